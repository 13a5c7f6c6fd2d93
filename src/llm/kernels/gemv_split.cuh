// The split-K ending shared by the weight-streaming GEMVs (gemv_quant_wide.cu, gemv_fp8.cu): a CTA
// owns `tile_cols` output columns and one K slice (blockIdx.y of gridDim.y). With one slice it
// writes y directly; with several, each CTA writes its partial sums to the workspace and the last
// CTA of a column tile to arrive (an arrival counter, reset by that CTA for the next launch and
// graph replay) adds them in slice order, so the result does not depend on scheduling.
// Private to src/llm/kernels.
#pragma once

#include <cuda_runtime.h>

#include "llm/kernels/common.cuh"
#include "llm/kernels/llm_kernels.h"

namespace gpuopt::llm::cuda::detail {

// cta_sum(t, cc): this CTA's sum for token t and tile column cc (cc < tile_cols), read once per
// (t, cc) after a __syncthreads. out(t, col, v): writes y[t, col] from the full sum v (bias,
// scale, rounding). partial: [slices][tokens][N] f32; counters: one per tile.
template <int kThreads, class CtaSum, class Out>
__device__ __forceinline__ void split_k_finish_t(const CtaSum& cta_sum, const Out& out, int tokens, int tile, int col0,
                                                 int tile_cols, int N, float* __restrict__ partial,
                                                 int* __restrict__ counters) {
  __shared__ int is_last;
  const int split = blockIdx.y, splits = gridDim.y;
  for (int i = threadIdx.x; i < tokens * tile_cols; i += kThreads) {
    const int t = i / tile_cols, cc = i - t * tile_cols, col = col0 + cc;
    if (col >= N) continue;
    const float v = cta_sum(t, cc);
    if (splits == 1)
      out(t, col, v);
    else
      partial[(static_cast<int64_t>(split) * tokens + t) * N + col] = v;
  }
  if (splits == 1) return;
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) is_last = atomicAdd(&counters[tile], 1) == splits - 1;
  __syncthreads();
  if (!is_last) return;
  __threadfence();
  for (int i = threadIdx.x; i < tokens * tile_cols; i += kThreads) {
    const int t = i / tile_cols, col = col0 + (i - t * tile_cols);
    if (col >= N) continue;
    float v = 0.0f;
    for (int sp = 0; sp < splits; ++sp) v += __ldcg(&partial[(static_cast<int64_t>(sp) * tokens + t) * N + col]);
    out(t, col, v);
  }
  if (threadIdx.x == 0) counters[tile] = 0;  // ready for the next launch (and graph replay)
}

// The same with the token count fixed at compile time.
template <int kT, int kThreads, class CtaSum, class Out>
__device__ __forceinline__ void split_k_finish(const CtaSum& cta_sum, const Out& out, int tile, int col0, int tile_cols,
                                               int N, float* __restrict__ partial, int* __restrict__ counters) {
  split_k_finish_t<kThreads>(cta_sum, out, kT, tile, col0, tile_cols, N, partial, counters);
}

// Slices of K for `tiles` CTAs' worth of columns: about four CTAs per SM, at most max_splits,
// within what the workspace holds (partial sums of T x N floats per slice, one counter per tile);
// 1 without a workspace.
inline int64_t split_count(int64_t T, int64_t N, int64_t tiles, int max_splits, const GemvSplitScratch* ws, int sms) {
  if (!ws || !ws->partial || !ws->counters || tiles > ws->num_counters) return 1;
  int64_t splits = (4 * static_cast<int64_t>(sms) + tiles - 1) / tiles;
  splits = splits < 1 ? 1 : (splits > max_splits ? max_splits : splits);
  const int64_t fit = static_cast<int64_t>(ws->partial_floats / static_cast<size_t>(T * N));
  return splits < fit ? splits : (fit < 1 ? 1 : fit);
}

inline int sm_count() {
  int dev = 0, n = 0;
  cudaGetDevice(&dev);
  cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev);
  return n > 0 ? n : 1;
}

}  // namespace gpuopt::llm::cuda::detail
