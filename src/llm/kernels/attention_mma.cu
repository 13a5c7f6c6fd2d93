// Paged attention for prefill / chunked prefill on tensor cores (FlashAttention-2's scheme with
// mma.sync m16n8k16, f16/bf16 in, f32 accumulate): one CTA of 4 warps per (sequence, head,
// 64-query tile); each warp owns 16 query rows. K/V tiles of 64 keys are gathered from the paged
// cache with cp.async (the next K while P.V runs, the next V while Q.K^T runs), scores and the
// online softmax stay in registers, and P feeds the P.V product straight from the score
// accumulators. Causal and sliding-window masks are applied only on the tiles that cross them.
#include <type_traits>

#include "llm/kernels/attention_common.cuh"

namespace gpuopt::llm::cuda::detail {
namespace {

constexpr int kBQ = 64, kBK = 64, kThreads = 128;

struct MmaParams {
  const void* q;
  int64_t q_stride;
  const void* k_cache;
  const void* v_cache;
  void* out;
  const int32_t* query_start;
  const int32_t* context_lens;
  const int32_t* block_tables;
  int max_blocks_per_seq, num_heads, num_kv_heads, group, block_size, window;
  float scale_log2;
};

template <int D>
constexpr int kStride = D + 8;  // elements per shared row: +16 bytes, conflict-free ldmatrix
template <int D>
constexpr size_t mma_smem_bytes() {
  return static_cast<size_t>(3) * 64 * kStride<D> * 2;  // Q, K, V tiles of 16-bit elements
}

template <class T, int D>
__global__ void __launch_bounds__(kThreads, 3) prefill_mma_kernel(const MmaParams p) {
  constexpr int kS = kStride<D>;
  constexpr int kChunks = D / 8;  // 16-byte chunks per row
  extern __shared__ __align__(16) unsigned char smem_raw[];
  T* sQ = reinterpret_cast<T*>(smem_raw);
  T* sK = sQ + kBQ * kS;
  T* sV = sK + kBK * kS;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int g = lane >> 2, t4 = lane & 3;

  const int s = blockIdx.z, h = blockIdx.y;
  const int qt = gridDim.x - 1 - blockIdx.x;  // longest (latest) tiles first
  const int q0 = p.query_start[s];
  const int q_len = p.query_start[s + 1] - q0;
  const int i0 = qt * kBQ;
  if (q_len <= 0 || i0 >= q_len) return;
  const int ctx = p.context_lens[s];
  const int rows = min(kBQ, q_len - i0);
  const int pos0 = ctx - q_len + i0;  // position of the tile's first row
  const int k_hi = pos0 + rows;       // keys [k_lo, k_hi)
  const int k_lo = p.window > 0 ? max(0, pos0 - p.window + 1) : 0;
  const int kvh = h / p.group;
  const int32_t* table = p.block_tables + static_cast<int64_t>(s) * p.max_blocks_per_seq;
  const int64_t kv_row = static_cast<int64_t>(p.num_kv_heads) * D;
  const T* kc = static_cast<const T*>(p.k_cache) + static_cast<int64_t>(kvh) * D;
  const T* vc = static_cast<const T*>(p.v_cache) + static_cast<int64_t>(kvh) * D;

  // Q tile (rows past the sequence's queries: zeros).
  for (int c = tid; c < kBQ * kChunks; c += kThreads) {
    const int r = c / kChunks, ch = c - r * kChunks;
    const bool ok = r < rows;
    const T* src = static_cast<const T*>(p.q) +
                   (ok ? (static_cast<int64_t>(q0 + i0 + r) * p.q_stride + static_cast<int64_t>(h) * D + ch * 8) : 0);
    cp_async16(sQ + r * kS + ch * 8, src, ok);
  }
  // Slots of a tile's keys, computed once per tile by 64 threads (the table lookup and the
  // division stay off the other threads' path), double-buffered: -1 past the context.
  __shared__ int64_t sSlot[2][kBK];
  auto compute_slots = [&](int buf, int kt0) {
    if (tid < kBK) {
      const int key = kt0 + tid;
      sSlot[buf][tid] =
          key < k_hi ? static_cast<int64_t>(table[key / p.block_size]) * p.block_size + key % p.block_size : -1;
    }
  };
  auto load_kv = [&](T* dst, const T* base, const int64_t* slots) {
#pragma unroll
    for (int c = tid; c < kBK * kChunks; c += kThreads) {
      const int r = c / kChunks, ch = c - r * kChunks;
      const int64_t slot = slots[r];
      cp_async16(dst + r * kS + ch * 8, base + (slot >= 0 ? slot * kv_row + ch * 8 : 0), slot >= 0);
    }
  };
  const int n_tiles = (k_hi - k_lo + kBK - 1) / kBK;
  compute_slots(0, k_lo);
  __syncthreads();
  load_kv(sK, kc, sSlot[0]);
  cp_async_commit();
  load_kv(sV, vc, sSlot[0]);
  cp_async_commit();

  uint32_t qf[D / 16][4];
  float o[D / 8][4];
#pragma unroll
  for (int n = 0; n < D / 8; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
  float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.0f, l1 = 0.0f;  // rows g and g + 8 of the warp
  const int row0 = warp * 16 + g;
  const int rpos0 = pos0 + row0, rpos1 = rpos0 + 8;

  for (int j = 0; j < n_tiles; ++j) {
    const int kt0 = k_lo + j * kBK;
    if (j + 1 < n_tiles) compute_slots((j + 1) & 1, kt0 + kBK);  // read after the next barrier
    cp_async_wait<1>();                                          // Q (first tile) and this tile's K
    __syncthreads();
    if (j == 0) {
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk)
        ldsm_x4(qf[kk], sQ + (warp * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * kS + kk * 16 + (lane >> 4) * 8);
    }
    float sc[kBK / 8][4];
#pragma unroll
    for (int n = 0; n < kBK / 8; ++n) sc[n][0] = sc[n][1] = sc[n][2] = sc[n][3] = 0.0f;
#pragma unroll
    for (int np = 0; np < kBK / 16; ++np) {
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) {
        uint32_t b[4];
        ldsm_x4(b, sK + (np * 16 + (lane & 7) + (lane >> 4) * 8) * kS + kk * 16 + ((lane >> 3) & 1) * 8);
        mma<T>(sc[2 * np], qf[kk], b[0], b[1]);
        mma<T>(sc[2 * np + 1], qf[kk], b[2], b[3]);
      }
    }
    __syncthreads();  // every warp is done with sK
    if (j + 1 < n_tiles) load_kv(sK, kc, sSlot[(j + 1) & 1]);
    cp_async_commit();

    // Scale to log2 units, mask where the tile crosses the diagonal / window / context end.
    const bool need_mask =
        kt0 + kBK - 1 > pos0 || kt0 + kBK > k_hi || (p.window > 0 && kt0 <= pos0 + kBQ - 1 - p.window);
    float mx0 = -INFINITY, mx1 = -INFINITY;
#pragma unroll
    for (int n = 0; n < kBK / 8; ++n) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        float v = sc[n][e] * p.scale_log2;
        if (need_mask) {
          const int key = kt0 + n * 8 + 2 * t4 + (e & 1);
          const int rp = e < 2 ? rpos0 : rpos1;
          if (key > rp || key >= k_hi || (p.window > 0 && key <= rp - p.window)) v = -INFINITY;
        }
        sc[n][e] = v;
      }
      mx0 = fmaxf(mx0, fmaxf(sc[n][0], sc[n][1]));
      mx1 = fmaxf(mx1, fmaxf(sc[n][2], sc[n][3]));
    }
#pragma unroll
    for (int o_ = 1; o_ <= 2; o_ <<= 1) {
      mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, o_));
      mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, o_));
    }
    const float mn0 = fmaxf(m0, mx0), mn1 = fmaxf(m1, mx1);
    const float base0 = mn0 == -INFINITY ? 0.0f : mn0, base1 = mn1 == -INFINITY ? 0.0f : mn1;
    const float a0 = exp2f(m0 - base0), a1 = exp2f(m1 - base1);  // m = -inf: 0 (nothing yet)
    m0 = mn0;
    m1 = mn1;
    l0 *= a0;
    l1 *= a1;
#pragma unroll
    for (int n = 0; n < D / 8; ++n) {
      o[n][0] *= a0;
      o[n][1] *= a0;
      o[n][2] *= a1;
      o[n][3] *= a1;
    }
    uint32_t pf[kBK / 16][4];
#pragma unroll
    for (int n = 0; n < kBK / 8; ++n) {
      const float p0 = exp2f(sc[n][0] - base0), p1 = exp2f(sc[n][1] - base0);
      const float p2 = exp2f(sc[n][2] - base1), p3 = exp2f(sc[n][3] - base1);
      l0 += p0 + p1;
      l1 += p2 + p3;
      pf[n / 2][(n & 1) * 2] = Pair<T>::pack(p0, p1);
      pf[n / 2][(n & 1) * 2 + 1] = Pair<T>::pack(p2, p3);
    }
    cp_async_wait<1>();  // this tile's V (the next K may still be in flight)
    __syncthreads();
#pragma unroll
    for (int dp = 0; dp < D / 16; ++dp) {
#pragma unroll
      for (int kk = 0; kk < kBK / 16; ++kk) {
        uint32_t b[4];
        ldsm_x4_t(b, sV + (kk * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * kS + dp * 16 + (lane >> 4) * 8);
        mma<T>(o[2 * dp], pf[kk], b[0], b[1]);
        mma<T>(o[2 * dp + 1], pf[kk], b[2], b[3]);
      }
    }
    __syncthreads();  // every warp is done with sV
    if (j + 1 < n_tiles) load_kv(sV, vc, sSlot[(j + 1) & 1]);
    cp_async_commit();
  }
  cp_async_wait<0>();

#pragma unroll
  for (int o_ = 1; o_ <= 2; o_ <<= 1) {
    l0 += __shfl_xor_sync(0xffffffffu, l0, o_);
    l1 += __shfl_xor_sync(0xffffffffu, l1, o_);
  }
  const float inv0 = l0 > 0.0f ? 1.0f / l0 : 0.0f, inv1 = l1 > 0.0f ? 1.0f / l1 : 0.0f;
  T* out = static_cast<T*>(p.out);
  const int64_t ostride = static_cast<int64_t>(p.num_heads) * D;
#pragma unroll
  for (int n = 0; n < D / 8; ++n) {
    const int col = h * D + n * 8 + 2 * t4;
    if (row0 < rows)
      *reinterpret_cast<uint32_t*>(out + (q0 + i0 + row0) * ostride + col) =
          Pair<T>::pack(o[n][0] * inv0, o[n][1] * inv0);
    if (row0 + 8 < rows)
      *reinterpret_cast<uint32_t*>(out + (q0 + i0 + row0 + 8) * ostride + col) =
          Pair<T>::pack(o[n][2] * inv1, o[n][3] * inv1);
  }
}

template <class T, int D>
void launch_mma(const PagedAttentionArgs& a, const MmaParams& p, cudaStream_t stream) {
  auto kernel = prefill_mma_kernel<T, D>;
  constexpr size_t smem = mma_smem_bytes<D>();
  static const bool once = (allow_smem(kernel, smem), true);
  (void)once;
  dim3 grid(static_cast<unsigned>((a.max_query_len + kBQ - 1) / kBQ), static_cast<unsigned>(a.num_heads),
            static_cast<unsigned>(a.num_seqs));
  kernel<<<grid, kThreads, smem, stream>>>(p);
}

}  // namespace

bool prefill_mma_available() {
  return true;
}

void paged_attention_prefill_mma(const PagedAttentionArgs& a, cudaStream_t stream) {
  MmaParams p{};
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
  p.group = a.num_heads / a.num_kv_heads;
  p.block_size = a.block_size;
  p.window = a.sliding_window;
  p.scale_log2 = a.scale * kLog2e;
  if ((reinterpret_cast<uintptr_t>(a.q) | static_cast<uintptr_t>(a.q_stride * 2) | reinterpret_cast<uintptr_t>(a.out)) &
      15)
    contract_violation("paged_attention: q rows and out must be 16-byte aligned for prefill");
  if (a.dt == DType::F16) {
    if (a.head_dim == 64)
      launch_mma<__half, 64>(a, p, stream);
    else
      launch_mma<__half, 128>(a, p, stream);
  } else {
    if (a.head_dim == 64)
      launch_mma<__nv_bfloat16, 64>(a, p, stream);
    else
      launch_mma<__nv_bfloat16, 128>(a, p, stream);
  }
}

}  // namespace gpuopt::llm::cuda::detail
