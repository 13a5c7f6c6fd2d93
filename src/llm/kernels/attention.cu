// Paged attention, CUDA-core kernel: flash-decoding. One CTA per (sequence, kv head, query tile,
// context partition) holds every query head of its GQA group as a row, so each K/V block is read
// from HBM once per group. Each of the 4 warps streams its own 32-key tiles (lane = key for the
// scores, lane = head dims for P.V) through shared memory with cp.async, keeping an online softmax
// per row; the warps' partials merge at the end, and decode's context partitions merge in a
// second kernel. Serves decode (all dtypes), f32 prefill and every step over an FP8 cache (e4m3
// codes staged as they are, converted to f32 as they leave shared memory; k_scale is folded into
// the queries' scale, v_scale into the output); f16/bf16 prefill goes to the tensor-core kernel
// (attention_mma.cu), GQA decode to attention_tc.cuh.
#include <algorithm>
#include <climits>
#include <cstdlib>
#include <type_traits>

#include "llm/kernels/attention_common.cuh"
#include "llm/kernels/attention_tc.cuh"

namespace gpuopt::llm::cuda {
namespace {
using namespace detail;

template <class KT, int D, int R>
constexpr size_t attn_smem_bytes() {
  const size_t tiles = kWarps * (2 * kTile * row_bytes<KT, D>() + R * kTile * sizeof(float));
  const size_t merge = kWarps * R * (D + 2) * sizeof(float);
  return (tiles > merge ? tiles : merge) + static_cast<size_t>(R) * D * sizeof(float);
}

// T: q and out; KT: the cache's elements (T, or e4m3 codes).
template <class T, class KT, int D, int R>
__global__ void __launch_bounds__(kWarps * 32) attn_kernel(const AttnParams p) {
  constexpr int kN = 16 / static_cast<int>(sizeof(KT));  // cache elements per 16-byte chunk
  constexpr int kChunks = D / kN;  // 16-byte chunks per key row
  constexpr int kDpl = D / 32;     // P.V: head dims per lane
  constexpr int kRow = row_bytes<KT, D>();
  extern __shared__ __align__(16) unsigned char smem[];
  float* sq = reinterpret_cast<float*>(smem);  // [R][D] scaled queries
  unsigned char* tiles = smem + R * D * sizeof(float);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;

  const int s = blockIdx.z, kvh = blockIdx.y;
  const int part = blockIdx.x % p.num_parts, qt = blockIdx.x / p.num_parts;
  const int q0 = p.query_start[s];
  const int q_len = p.query_start[s + 1] - q0;
  const int bq = R / p.group_pow2;  // query tokens per CTA
  const int i0 = qt * bq;
  if (q_len <= 0 || i0 >= q_len) return;
  const int ctx = p.context_lens[s];
  const int i_last = min(i0 + bq, q_len) - 1;
  const int pos0 = ctx - q_len + i0, pos_last = ctx - q_len + i_last;
  int k_begin = p.window > 0 ? max(0, pos0 - p.window + 1) : 0;
  const int k_end = pos_last + 1;
  const int part_begin = part * p.part_size;
  if (part_begin >= k_end) return;  // past the context: the reduce does not read it
  k_begin = max(k_begin, part_begin);
  const int k_stop = min(k_end, part_begin + p.part_size);

  // Queries of this CTA's rows, scaled, as f32 (row r: token i0 + r / group_pow2, head r % gp).
  for (int e = threadIdx.x; e < R * D; e += blockDim.x) {
    const int r = e / D, d = e - r * D;
    const int i = i0 + r / p.group_pow2, g = r % p.group_pow2;
    float v = 0.0f;
    if (i < q_len && g < p.group) {
      const T* qr = static_cast<const T*>(p.q) + static_cast<int64_t>(q0 + i) * p.q_stride +
                    static_cast<int64_t>(kvh * p.group + g) * D;
      v = to_f(qr[d]) * p.scale_log2;
    }
    sq[e] = v;
  }
  __syncthreads();

  unsigned char* kbuf = tiles + warp * (2 * kTile * kRow + R * kTile * sizeof(float));
  unsigned char* vbuf = kbuf + kTile * kRow;
  float* pbuf = reinterpret_cast<float*>(vbuf + kTile * kRow);  // [R][kTile]
  const int32_t* table = p.block_tables + static_cast<int64_t>(s) * p.max_blocks_per_seq;
  const int64_t kv_row = static_cast<int64_t>(p.num_kv_heads) * D;  // elements per slot
  const KT* kc = static_cast<const KT*>(p.k_cache) + static_cast<int64_t>(kvh) * D;
  const KT* vc = static_cast<const KT*>(p.v_cache) + static_cast<int64_t>(kvh) * D;

  // Row positions (invalid rows: -1 sees nothing).
  int rpos[R];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const int i = i0 + r / p.group_pow2, g = r % p.group_pow2;
    rpos[r] = (i < q_len && g < p.group) ? ctx - q_len + i : -1;
  }

  float m[R], l[R], acc[R][kDpl];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    m[r] = -INFINITY;
    l[r] = 0.0f;
#pragma unroll
    for (int k = 0; k < kDpl; ++k) acc[r][k] = 0.0f;
  }

  // Slot of key `key` (lane's own); -1 outside [k_begin, k_stop).
  auto slot_of = [&](int key) -> int64_t {
    if (key < k_begin || key >= k_stop) return -1;
    const int blk = table[key / p.block_size];
    return static_cast<int64_t>(blk) * p.block_size + key % p.block_size;
  };
  auto issue = [&](unsigned char* buf, const KT* base, int64_t my_slot) {
#pragma unroll 4
    for (int c = lane; c < kTile * kChunks; c += 32) {
      const int key = c / kChunks, ch = c - key * kChunks;
      const int64_t slot = __shfl_sync(0xffffffffu, my_slot, key);
      const KT* src = slot >= 0 ? base + slot * kv_row + ch * kN : base;
      cp_async16(buf + key * kRow + ch * 16, src, slot >= 0);
    }
  };

  const int n_tiles = (k_stop - k_begin + kTile - 1) / kTile;
  int tile = warp;
  int64_t my_slot = tile < n_tiles ? slot_of(k_begin + tile * kTile + lane) : -1;
  if (tile < n_tiles) {
    issue(kbuf, kc, my_slot);
    cp_async_commit();
    issue(vbuf, vc, my_slot);
    cp_async_commit();
  }
  for (; tile < n_tiles; tile += kWarps) {
    const int key = k_begin + tile * kTile + lane;
    const int next = tile + kWarps;
    const int64_t next_slot = next < n_tiles ? slot_of(k_begin + next * kTile + lane) : -1;
    cp_async_wait<1>();  // this tile's K
    __syncwarp();
    float sc[R];
#pragma unroll
    for (int r = 0; r < R; ++r) sc[r] = 0.0f;
    const unsigned char* krow = kbuf + lane * kRow;
#pragma unroll 2
    for (int c = 0; c < kChunks; ++c) {
      float kf[kN];
      unpack_kv<KT>(*reinterpret_cast<const uint4*>(krow + c * 16), kf);
#pragma unroll
      for (int r = 0; r < R; ++r) {
        const float4* qv = reinterpret_cast<const float4*>(sq + r * D + c * kN);
#pragma unroll
        for (int v4 = 0; v4 < kN / 4; ++v4) {
          const float4 q4 = qv[v4];
          sc[r] += q4.x * kf[4 * v4] + q4.y * kf[4 * v4 + 1] + q4.z * kf[4 * v4 + 2] + q4.w * kf[4 * v4 + 3];
        }
      }
    }
    __syncwarp();
    if (next < n_tiles) issue(kbuf, kc, next_slot);
    cp_async_commit();
    // Online softmax; m stays warp-uniform, l is per lane until the end.
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const bool vis = my_slot >= 0 && key <= rpos[r] && (p.window <= 0 || key > rpos[r] - p.window);
      const float x = vis ? sc[r] : -INFINITY;
      const float mn = fmaxf(m[r], warp_max(x));
      float pr = 0.0f, alpha = 1.0f;
      if (mn != -INFINITY) {
        pr = exp2f(x - mn);
        alpha = exp2f(m[r] - mn);
      }
      m[r] = mn;
      l[r] = l[r] * alpha + pr;
#pragma unroll
      for (int k = 0; k < kDpl; ++k) acc[r][k] *= alpha;
      pbuf[r * kTile + lane] = pr;
    }
    cp_async_wait<1>();  // this tile's V (the next K may still be in flight)
    __syncwarp();
#pragma unroll 2
    for (int j = 0; j < kTile; j += 4) {
      float vf[4][kDpl];
#pragma unroll
      for (int jj = 0; jj < 4; ++jj)
        load_dims<KT, kDpl>(reinterpret_cast<const KT*>(vbuf + (j + jj) * kRow) + lane * kDpl, vf[jj]);
#pragma unroll
      for (int r = 0; r < R; ++r) {
        const float4 p4 = *reinterpret_cast<const float4*>(pbuf + r * kTile + j);
#pragma unroll
        for (int k = 0; k < kDpl; ++k)
          acc[r][k] += p4.x * vf[0][k] + p4.y * vf[1][k] + p4.z * vf[2][k] + p4.w * vf[3][k];
      }
    }
    __syncwarp();
    if (next < n_tiles) issue(vbuf, vc, next_slot);
    cp_async_commit();
    my_slot = next_slot;
  }
  cp_async_wait<0>();
  __syncthreads();  // tiles' memory becomes the merge area

  float* cm = reinterpret_cast<float*>(tiles);  // [W][R]
  float* cl = cm + kWarps * R;                  // [W][R]
  float* co = cl + kWarps * R;                  // [W][R][D]
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const float lt = warp_sum(l[r]);
    if (lane == 0) {
      cm[warp * R + r] = m[r];
      cl[warp * R + r] = lt;
    }
#pragma unroll
    for (int k = 0; k < kDpl; ++k) co[(warp * R + r) * D + lane * kDpl + k] = acc[r][k];
  }
  __syncthreads();
  for (int e = threadIdx.x; e < R * D; e += blockDim.x) {
    const int r = e / D, d = e - r * D;
    const int i = i0 + r / p.group_pow2, g = r % p.group_pow2;
    if (i >= q_len || g >= p.group) continue;
    float M = -INFINITY;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) M = fmaxf(M, cm[w * R + r]);
    float L = 0.0f, O = 0.0f;
    if (M != -INFINITY) {
#pragma unroll
      for (int w = 0; w < kWarps; ++w) {
        const float f = exp2f(cm[w * R + r] - M);
        L += cl[w * R + r] * f;
        O += co[(w * R + r) * D + d] * f;
      }
    }
    const float o = L > 0.0f ? O / L * p.v_scale : 0.0f;
    const int64_t t = q0 + i;
    const int h = kvh * p.group + g;
    if (p.num_parts == 1) {
      static_cast<T*>(p.out)[(t * p.num_heads + h) * D + d] = from_f<T>(o);
    } else {
      const int64_t idx = (t * p.num_heads + h) * p.num_parts + part;
      p.ws_o[idx * D + d] = o;
      if (d == 0) {
        p.ws_ml[idx * 2] = M;
        p.ws_ml[idx * 2 + 1] = L;
      }
    }
  }
}

// Merges decode's context partitions: one block of D threads per (sequence, head). The partials'
// weights go through shared memory so the (up to 256) partition loads are issued in parallel.
constexpr int kMaxParts = 256;
template <class T, int D>
__global__ void attn_reduce_kernel(const AttnParams p) {
  __shared__ float w[kMaxParts];
  __shared__ float wsum;
  const int s = blockIdx.x, h = blockIdx.y, d = threadIdx.x;
  const int q0 = p.query_start[s];
  const int q_len = p.query_start[s + 1] - q0;
  const int ctx = p.context_lens[s];
  const int parts = min(p.num_parts, (ctx + p.part_size - 1) / p.part_size);
  for (int i = 0; i < q_len; ++i) {
    const int64_t base = ((static_cast<int64_t>(q0) + i) * p.num_heads + h) * p.num_parts;
    float mk = -INFINITY;
    for (int k = d; k < parts; k += D) {
      const float l = p.ws_ml[(base + k) * 2 + 1];
      w[k] = l;
      if (l > 0.0f) mk = fmaxf(mk, p.ws_ml[(base + k) * 2]);
    }
    __shared__ float red[D / 32];
    mk = warp_max(mk);
    if ((d & 31) == 0) red[d >> 5] = mk;
    __syncthreads();
    float M = -INFINITY;
#pragma unroll
    for (int k = 0; k < D / 32; ++k) M = fmaxf(M, red[k]);
    float part_sum = 0.0f;
    for (int k = d; k < parts; k += D) {
      const float l = w[k];
      const float wk = l > 0.0f ? l * exp2f(p.ws_ml[(base + k) * 2] - M) : 0.0f;
      w[k] = wk;
      part_sum += wk;
    }
    part_sum = warp_sum(part_sum);
    __syncthreads();  // red[] reads above are done
    if ((d & 31) == 0) red[d >> 5] = part_sum;
    __syncthreads();
    if (d == 0) {
      float t = 0.0f;
      for (int k = 0; k < D / 32; ++k) t += red[k];
      wsum = t;
    }
    __syncthreads();
    float O = 0.0f;
#pragma unroll 8
    for (int k = 0; k < parts; ++k) O += w[k] * p.ws_o[(base + k) * D + d];
    static_cast<T*>(p.out)[((q0 + i) * static_cast<int64_t>(p.num_heads) + h) * D + d] =
        from_f<T>(wsum > 0.0f ? O / wsum : 0.0f);
    __syncthreads();  // w[] and wsum are rewritten for the next query row
  }
}

// GPUOPT_LLM_ATTN_CUDA_CORES=1: GQA decode on the CUDA-core kernel (tests compare both paths).
bool force_cuda_cores() {
  const char* e = std::getenv("GPUOPT_LLM_ATTN_CUDA_CORES");
  return e != nullptr && e[0] == '1';
}

int pow2_ceil(int x) {
  int p = 1;
  while (p < x) p <<= 1;
  return p;
}

// Context partitions for a decode launch: enough CTAs to fill the GPU a few times over, at least
// 128 keys each, and at most 256 partials per head in all (bounds the workspace).
int64_t decode_partitions(int64_t num_seqs, int64_t num_kv_heads, int64_t max_context) {
  if (max_context <= 256 || num_seqs <= 0) return 1;
  const int64_t by_ctx = (max_context + 127) / 128;
  const int64_t want = (1024 + num_seqs * num_kv_heads - 1) / (num_seqs * num_kv_heads);
  const int64_t cap = (kMaxParts + num_seqs - 1) / num_seqs;
  return std::max<int64_t>(1, std::min({by_ctx, want, cap}));
}
// Partition size for `parts` partitions: a multiple of the CTA's key tile; the partition count
// it gives back may shrink.
int64_t partition_size(int64_t parts, int64_t max_context) {
  const int64_t step = kWarps * kTile;
  const int64_t per = (max_context + parts - 1) / parts;
  return (per + step - 1) / step * step;
}

template <class T, class KT, int D, int R>
void launch(const PagedAttentionArgs& a, const AttnParams& p, int q_tiles, cudaStream_t stream) {
  auto kernel = attn_kernel<T, KT, D, R>;
  constexpr size_t smem = attn_smem_bytes<KT, D, R>();
  static const bool once = (allow_smem(kernel, smem), true);
  (void)once;
  dim3 grid(static_cast<unsigned>(q_tiles * p.num_parts), static_cast<unsigned>(a.num_kv_heads),
            static_cast<unsigned>(a.num_seqs));
  kernel<<<grid, kWarps * 32, smem, stream>>>(p);
  if (p.num_parts > 1) {
    dim3 rgrid(static_cast<unsigned>(a.num_seqs), static_cast<unsigned>(a.num_heads));
    attn_reduce_kernel<T, D><<<rgrid, D, 0, stream>>>(p);
  }
}

template <class T, int D>
void launch_tc(const PagedAttentionArgs& a, const AttnParams& p, cudaStream_t stream) {
  auto kernel = attn_tc_kernel<T, D>;
  constexpr size_t smem = tc_smem_bytes<T, D>();
  static const bool once = (allow_smem(kernel, smem), true);
  (void)once;
  dim3 grid(static_cast<unsigned>(p.num_parts), static_cast<unsigned>(a.num_kv_heads),
            static_cast<unsigned>(a.num_seqs));
  kernel<<<grid, kWarps * 32, smem, stream>>>(p);
  if (p.num_parts > 1) {
    dim3 rgrid(static_cast<unsigned>(a.num_seqs), static_cast<unsigned>(a.num_heads));
    attn_reduce_kernel<T, D><<<rgrid, D, 0, stream>>>(p);
  }
}

template <class T, class KT, int D>
void launch_rows(const PagedAttentionArgs& a, const AttnParams& p, int R, int q_tiles, cudaStream_t stream) {
  switch (R) {
    case 1:
      launch<T, KT, D, 1>(a, p, q_tiles, stream);
      break;
    case 2:
      launch<T, KT, D, 2>(a, p, q_tiles, stream);
      break;
    case 4:
      launch<T, KT, D, 4>(a, p, q_tiles, stream);
      break;
    case 8:
      launch<T, KT, D, 8>(a, p, q_tiles, stream);
      break;
    default:
      launch<T, KT, D, 16>(a, p, q_tiles, stream);
      break;
  }
}

}  // namespace

const char* paged_attention_unsupported(const PagedAttentionArgs& a) {
  if (a.head_dim != 64 && a.head_dim != 128) return "paged_attention: head_dim must be 64 or 128";
  if (a.dt != DType::F32 && a.dt != DType::F16 && a.dt != DType::BF16)
    return "paged_attention: dtype must be f32, f16 or bf16";
  if (a.kv_dt != a.dt && !(a.kv_dt == kKvFp8 && a.dt != DType::F32))
    return "paged_attention: the KV cache dtype must equal the activations' (or be e4m3 under f16/bf16)";
  if (a.kv_dt == kKvFp8 && !(a.k_scale > 0.0f && a.v_scale > 0.0f))
    return "paged_attention: FP8 cache scales must be positive";
  if (a.num_kv_heads <= 0 || a.num_heads % a.num_kv_heads != 0)
    return "paged_attention: num_heads must be a multiple of num_kv_heads";
  if (a.num_heads / a.num_kv_heads > 16) return "paged_attention: more than 16 query heads per kv head";
  if (a.block_size <= 0) return "paged_attention: block_size must be positive";
  if (a.max_context > INT_MAX / 2) return "paged_attention: max_context too large";
  if ((reinterpret_cast<uintptr_t>(a.k_cache) | reinterpret_cast<uintptr_t>(a.v_cache)) & 15)
    return "paged_attention: K/V caches must be 16-byte aligned";
  if (a.dt != DType::F32 &&
      (((reinterpret_cast<uintptr_t>(a.q) | reinterpret_cast<uintptr_t>(a.out)) & 15) || a.q_stride % 8 != 0))
    return "paged_attention: f16/bf16 q and out must be 16-byte aligned, q_stride a multiple of 8";
  return nullptr;
}

size_t paged_attention_workspace_bytes(int max_tokens, int num_heads, int head_dim, int64_t max_context) {
  // decode_partitions before rounding to whole tiles: an upper bound of the count a launch uses
  // that only grows with num_kv_heads shrinking and max_context growing, so it also covers
  // launches with a smaller max_context or more kv heads.
  int64_t rows = 0;
  for (int64_t n = 1; n <= std::min<int64_t>(max_tokens, kMaxParts); ++n) {
    const int64_t parts = decode_partitions(n, 1, max_context);
    if (parts > 1) rows = std::max(rows, n * parts);
  }
  return static_cast<size_t>(rows) * num_heads * (head_dim + 2) * sizeof(float);
}

void paged_attention(const PagedAttentionArgs& a, cudaStream_t stream) {
  if (const char* why = paged_attention_unsupported(a)) contract_violation(why);
  if (a.num_seqs <= 0 || a.max_query_len <= 0) return;
  const bool fp8 = a.kv_dt == kKvFp8;
  if (a.max_query_len > 1 && a.dt != DType::F32 && !fp8 && prefill_mma_available()) {
    paged_attention_prefill_mma(a, stream);
    return;
  }
  const int group = a.num_heads / a.num_kv_heads;
  const int gp = pow2_ceil(group);
  const int R = a.max_query_len == 1 ? gp : 16;
  const int bq = R / gp;
  const int q_tiles = (a.max_query_len + bq - 1) / bq;

  AttnParams p{};
  p.q = a.q;
  p.q_stride = a.q_stride;
  p.k_cache = a.k_cache;
  p.v_cache = a.v_cache;
  p.out = a.out;
  p.query_start = a.query_start;
  p.context_lens = a.context_lens;
  p.block_tables = a.block_tables;
  p.max_blocks_per_seq = a.max_blocks_per_seq;
  p.num_heads = a.num_heads;
  p.num_kv_heads = a.num_kv_heads;
  p.group = group;
  p.group_pow2 = gp;
  p.block_size = a.block_size;
  p.scale_log2 = a.scale * kLog2e * (fp8 ? a.k_scale : 1.0f);  // q . (k_code * k_scale)
  p.v_scale = fp8 ? a.v_scale : 1.0f;
  p.window = a.sliding_window;
  p.part_size = INT_MAX / 2;
  p.num_parts = 1;
  if (a.max_query_len == 1 && a.workspace != nullptr) {
    int64_t parts = decode_partitions(a.num_seqs, a.num_kv_heads, a.max_context);
    if (parts > 1) {
      const int64_t size = partition_size(parts, a.max_context);
      parts = (a.max_context + size - 1) / size;
      if (parts > 1) {
        p.part_size = static_cast<int>(size);
        p.num_parts = static_cast<int>(parts);
        p.ws_o = static_cast<float*>(a.workspace);
        const int64_t n = static_cast<int64_t>(a.num_seqs) * a.num_heads * parts;
        p.ws_ml = p.ws_o + n * a.head_dim;
      }
    }
  }
  dispatch_float(a.dt, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (!std::is_same_v<T, float>) {
      if (fp8) {
        if (a.head_dim == 64)
          launch_rows<T, Fp8, 64>(a, p, R, q_tiles, stream);
        else
          launch_rows<T, Fp8, 128>(a, p, R, q_tiles, stream);
        return;
      }
      if (a.max_query_len == 1 && gp >= 2 && !force_cuda_cores()) {  // GQA decode: tensor cores
        if (a.head_dim == 64)
          launch_tc<T, 64>(a, p, stream);
        else
          launch_tc<T, 128>(a, p, stream);
        return;
      }
    }
    if (a.head_dim == 64)
      launch_rows<T, T, 64>(a, p, R, q_tiles, stream);
    else
      launch_rows<T, T, 128>(a, p, R, q_tiles, stream);
  });
}

}  // namespace gpuopt::llm::cuda
