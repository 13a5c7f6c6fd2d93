// The tensor-core decode kernel for grouped-query attention (f16/bf16), launched by attention.cu
// with the same partitions, workspace and reduce as its CUDA-core kernel.
#pragma once

#include "llm/kernels/attention_common.cuh"

namespace gpuopt::llm::cuda::detail {

// Decode with grouped-query attention, f16/bf16: the same CTA layout and cp.async pipeline as
// attn_kernel, but each warp's scores (the group's heads x 32 keys) and P.V run on tensor cores
// (mma.sync m16n8k16, the up-to-16 rows of the group in one m16 tile), which leaves the kernel
// bound by HBM instead of by CUDA-core FMAs and shared-memory query reads.
template <class T, int D>
__global__ void __launch_bounds__(kWarps * 32) attn_tc_kernel(const AttnParams p) {
  constexpr int kChunks = D / 8;
  constexpr int kRow = row_bytes<T, D>();
  extern __shared__ __align__(16) unsigned char smem[];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = lane >> 2, t4 = lane & 3;

  const int s = blockIdx.z, kvh = blockIdx.y;
  const int part = blockIdx.x % p.num_parts, qt = blockIdx.x / p.num_parts;
  const int q0 = p.query_start[s];
  const int q_len = p.query_start[s + 1] - q0;
  const int bq = 16 / p.group_pow2;
  const int i0 = qt * bq;
  if (q_len <= 0 || i0 >= q_len) return;
  const int ctx = p.context_lens[s];
  const int i_last = min(i0 + bq, q_len) - 1;
  const int pos0 = ctx - q_len + i0, pos_last = ctx - q_len + i_last;
  int k_begin = p.window > 0 ? max(0, pos0 - p.window + 1) : 0;
  const int k_end = pos_last + 1;
  const int part_begin = part * p.part_size;
  if (part_begin >= k_end) return;
  k_begin = max(k_begin, part_begin);
  const int k_stop = min(k_end, part_begin + p.part_size);

  // Rows g and g + 8 of the m16 tile: token i0 + r / group_pow2, head r % group_pow2.
  int rpos[2];
  const T* qrow[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int r = g + 8 * h;
    const int i = i0 + r / p.group_pow2, hg = r % p.group_pow2;
    const bool ok = i < q_len && hg < p.group;
    rpos[h] = ok ? ctx - q_len + i : -1;
    qrow[h] = ok ? static_cast<const T*>(p.q) + static_cast<int64_t>(q0 + i) * p.q_stride +
                       static_cast<int64_t>(kvh * p.group + hg) * D
                 : nullptr;
  }
  auto q2 = [&](int h, int col) -> uint32_t {
    return qrow[h] ? *reinterpret_cast<const uint32_t*>(qrow[h] + col) : 0u;
  };
  uint32_t qf[D / 16][4];
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) {
    qf[kk][0] = q2(0, kk * 16 + 2 * t4);
    qf[kk][1] = q2(1, kk * 16 + 2 * t4);
    qf[kk][2] = q2(0, kk * 16 + 8 + 2 * t4);
    qf[kk][3] = q2(1, kk * 16 + 8 + 2 * t4);
  }

  unsigned char* kbuf = smem + warp * 2 * kTile * kRow;
  unsigned char* vbuf = kbuf + kTile * kRow;
  const int32_t* table = p.block_tables + static_cast<int64_t>(s) * p.max_blocks_per_seq;
  const int64_t kv_row = static_cast<int64_t>(p.num_kv_heads) * D;
  const T* kc = static_cast<const T*>(p.k_cache) + static_cast<int64_t>(kvh) * D;
  const T* vc = static_cast<const T*>(p.v_cache) + static_cast<int64_t>(kvh) * D;
  auto slot_of = [&](int key) -> int64_t {
    if (key < k_begin || key >= k_stop) return -1;
    const int blk = table[key / p.block_size];
    return static_cast<int64_t>(blk) * p.block_size + key % p.block_size;
  };
  auto issue = [&](unsigned char* buf, const T* base, int64_t my_slot) {
#pragma unroll 4
    for (int c = lane; c < kTile * kChunks; c += 32) {
      const int key = c / kChunks, ch = c - key * kChunks;
      const int64_t slot = __shfl_sync(0xffffffffu, my_slot, key);
      const T* src = slot >= 0 ? base + slot * kv_row + ch * 8 : base;
      cp_async16(buf + key * kRow + ch * 16, src, slot >= 0);
    }
  };

  float o[D / 8][4];
#pragma unroll
  for (int n = 0; n < D / 8; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};

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
    const int key0 = k_begin + tile * kTile;
    const int next = tile + kWarps;
    const int64_t next_slot = next < n_tiles ? slot_of(k_begin + next * kTile + lane) : -1;
    cp_async_wait<1>();
    __syncwarp();
    float sc[kTile / 8][4];
#pragma unroll
    for (int n = 0; n < kTile / 8; ++n) sc[n][0] = sc[n][1] = sc[n][2] = sc[n][3] = 0.0f;
#pragma unroll
    for (int np = 0; np < kTile / 16; ++np) {
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) {
        uint32_t b[4];
        ldsm_x4(b, kbuf + (np * 16 + (lane & 7) + (lane >> 4) * 8) * kRow + (kk * 16 + ((lane >> 3) & 1) * 8) * 2);
        mma<T>(sc[2 * np], qf[kk], b[0], b[1]);
        mma<T>(sc[2 * np + 1], qf[kk], b[2], b[3]);
      }
    }
    __syncwarp();
    if (next < n_tiles) issue(kbuf, kc, next_slot);
    cp_async_commit();
    float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int n = 0; n < kTile / 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int key = key0 + n * 8 + 2 * t4 + (e & 1);
        const int rp = rpos[e >> 1];
        const bool vis = key < k_stop && key <= rp && (p.window <= 0 || key > rp - p.window);
        sc[n][e] = vis ? sc[n][e] * p.scale_log2 : -INFINITY;
        mx[e >> 1] = fmaxf(mx[e >> 1], sc[n][e]);
      }
    float base[2], alpha[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 1));
      mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 2));
      const float mn = fmaxf(m[h], mx[h]);
      base[h] = mn == -INFINITY ? 0.0f : mn;
      alpha[h] = exp2f(m[h] - base[h]);
      m[h] = mn;
      l[h] *= alpha[h];
    }
#pragma unroll
    for (int n = 0; n < D / 8; ++n) {
      o[n][0] *= alpha[0];
      o[n][1] *= alpha[0];
      o[n][2] *= alpha[1];
      o[n][3] *= alpha[1];
    }
    uint32_t pf[kTile / 16][4];
#pragma unroll
    for (int n = 0; n < kTile / 8; ++n) {
      const float p0 = exp2f(sc[n][0] - base[0]), p1 = exp2f(sc[n][1] - base[0]);
      const float p2 = exp2f(sc[n][2] - base[1]), p3 = exp2f(sc[n][3] - base[1]);
      l[0] += p0 + p1;
      l[1] += p2 + p3;
      pf[n / 2][(n & 1) * 2] = Pair<T>::pack(p0, p1);
      pf[n / 2][(n & 1) * 2 + 1] = Pair<T>::pack(p2, p3);
    }
    cp_async_wait<1>();
    __syncwarp();
#pragma unroll
    for (int dp = 0; dp < D / 16; ++dp) {
#pragma unroll
      for (int kk = 0; kk < kTile / 16; ++kk) {
        uint32_t b[4];
        ldsm_x4_t(b, vbuf + (kk * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * kRow + (dp * 16 + (lane >> 4) * 8) * 2);
        mma<T>(o[2 * dp], pf[kk], b[0], b[1]);
        mma<T>(o[2 * dp + 1], pf[kk], b[2], b[3]);
      }
    }
    __syncwarp();
    if (next < n_tiles) issue(vbuf, vc, next_slot);
    cp_async_commit();
    my_slot = next_slot;
  }
  cp_async_wait<0>();
  __syncthreads();

  constexpr int R = 16;
  float* cm = reinterpret_cast<float*>(smem);  // [W][R]
  float* cl = cm + kWarps * R;
  float* co = cl + kWarps * R;  // [W][R][D]
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    l[h] += __shfl_xor_sync(0xffffffffu, l[h], 1);
    l[h] += __shfl_xor_sync(0xffffffffu, l[h], 2);
    if (t4 == 0) {
      cm[warp * R + g + 8 * h] = m[h];
      cl[warp * R + g + 8 * h] = l[h];
    }
  }
#pragma unroll
  for (int n = 0; n < D / 8; ++n) {
    float* r0 = co + (warp * R + g) * D + n * 8 + 2 * t4;
    float* r1 = r0 + 8 * D;
    r0[0] = o[n][0];
    r0[1] = o[n][1];
    r1[0] = o[n][2];
    r1[1] = o[n][3];
  }
  __syncthreads();
  for (int e = threadIdx.x; e < R * D; e += blockDim.x) {
    const int r = e / D, d = e - r * D;
    const int i = i0 + r / p.group_pow2, hg = r % p.group_pow2;
    if (i >= q_len || hg >= p.group) continue;
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
    const float out = L > 0.0f ? O / L : 0.0f;
    const int64_t t = q0 + i;
    const int h = kvh * p.group + hg;
    if (p.num_parts == 1) {
      static_cast<T*>(p.out)[(t * p.num_heads + h) * D + d] = from_f<T>(out);
    } else {
      const int64_t idx = (t * p.num_heads + h) * p.num_parts + part;
      p.ws_o[idx * D + d] = out;
      if (d == 0) {
        p.ws_ml[idx * 2] = M;
        p.ws_ml[idx * 2 + 1] = L;
      }
    }
  }
}

template <class T, int D>
constexpr size_t tc_smem_bytes() {
  const size_t tiles = kWarps * 2 * kTile * row_bytes<T, D>();
  const size_t merge = kWarps * 16 * (D + 2) * sizeof(float);
  return tiles > merge ? tiles : merge;
}

}  // namespace gpuopt::llm::cuda::detail
