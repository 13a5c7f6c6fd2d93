// The W4A16 / W8A16 GEMV for decode steps without act-order: 16-byte weight loads, split-K.
//
// A CTA owns 128 output columns (32 lanes x 4 adjacent columns: one uint4 of a packed row) and a
// slice of K (blockIdx.y); its 4 warps take contiguous runs of the slice's packed rows, four
// uint4 loads in flight per lane. The slice of x (T tokens) is staged in shared memory as f32 and
// read as broadcasts. A weight is dequantized with the exponent trick (2^23 + q as a float's bits,
// minus 2^23 + zero: no integer-to-float conversion) and multiplied by the group's scale, then
// accumulated in f32 for every token. With several slices, the slices' partial sums are added in
// slice order by the last CTA of a column tile (gemv_split.cuh): deterministic.
#include <algorithm>

#include "llm/kernels/common.cuh"
#include "llm/kernels/gemv_quant_wide.h"
#include "llm/kernels/gemv_split.cuh"

namespace gpuopt::llm::cuda {
namespace {

using detail::to_f;

constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;
constexpr int kTileCols = 128;               // 32 lanes x 4 columns
constexpr int kSmemBytes = 32 * 1024;         // x slice, then the warps' partial sums
constexpr int kMaxSplits = 32;

template <class E, int kT, int kBits>
__global__ void __launch_bounds__(kThreads)
    gemv_wide_kernel(const E* __restrict__ x, const uint4* __restrict__ qw, const uint32_t* __restrict__ qz,
                     const E* __restrict__ scales, const E* __restrict__ bias, E* __restrict__ y, int N, int K,
                     int group_size, bool zero_minus_one, int rows_per_split, float* __restrict__ partial,
                     int* __restrict__ counters) {
  constexpr int kPack = 32 / kBits;
  constexpr uint32_t kMask = (1u << kBits) - 1;
  extern __shared__ float smem[];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int tile = blockIdx.x, split = blockIdx.y;
  const int n0 = tile * kTileCols + lane * 4;
  const bool live = n0 < N;  // N % 4 == 0: a lane's four columns are all in or all out
  const int rows = K / kPack;
  const int r0 = split * rows_per_split, r1 = min(rows, r0 + rows_per_split);
  const int cap = rows_per_split * kPack, slice_k = (r1 - r0) * kPack;

  float* xs = smem;  // [kT][cap]
  for (int i = threadIdx.x; i < kT * slice_k; i += kThreads) {
    const int t = i / slice_k, k = i - t * slice_k;
    xs[t * cap + k] = to_f(x[static_cast<int64_t>(t) * K + static_cast<int64_t>(r0) * kPack + k]);
  }
  __syncthreads();

  float acc[kT][4];
#pragma unroll
  for (int t = 0; t < kT; ++t)
#pragma unroll
    for (int c = 0; c < 4; ++c) acc[t][c] = 0.0f;
  const int per_warp = (r1 - r0 + kWarps - 1) / kWarps;
  const int w0 = r0 + warp * per_warp, w1 = min(r1, w0 + per_warp);
  const int64_t row_vecs = N / 4;
  if (live) {
    int cur_g = -1;
    float s[4], zf[4];
    for (int r = w0; r < w1; r += 4) {
      uint4 wd[4] = {};
#pragma unroll
      for (int u = 0; u < 4; ++u)
        if (r + u < w1) wd[u] = __ldg(qw + static_cast<int64_t>(r + u) * row_vecs + n0 / 4);
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        if (r + u >= w1) break;
        const int rr = r + u;
        const int g = rr * kPack / group_size;
        if (g != cur_g) {
          cur_g = g;
          const uint32_t zw = __ldg(qz + static_cast<int64_t>(g) * (N / kPack) + n0 / kPack);
#pragma unroll
          for (int c = 0; c < 4; ++c) {
            s[c] = to_f(scales[static_cast<int64_t>(g) * N + n0 + c]);
            uint32_t z = (zw >> (kBits * ((n0 + c) % kPack))) & kMask;
            if (zero_minus_one) z = (z + 1) & kMask;
            zf[c] = 8388608.0f + static_cast<float>(z);
          }
        }
        const uint32_t words[4] = {wd[u].x, wd[u].y, wd[u].z, wd[u].w};
        const float* xr = xs + (rr - r0) * kPack;
#pragma unroll
        for (int j = 0; j < kPack; ++j) {
          float xv[kT];
#pragma unroll
          for (int t = 0; t < kT; ++t) xv[t] = xr[t * cap + j];
#pragma unroll
          for (int c = 0; c < 4; ++c) {
            const uint32_t q = (words[c] >> (kBits * j)) & kMask;
            const float w = (__uint_as_float(0x4B000000u | q) - zf[c]) * s[c];
#pragma unroll
            for (int t = 0; t < kT; ++t) acc[t][c] = fmaf(xv[t], w, acc[t][c]);
          }
        }
      }
    }
  }

  // The warps' sums for the tile, in warp order.
  __syncthreads();  // xs is read no more
  float* part = smem;  // [kWarps][kT][kTileCols]
#pragma unroll
  for (int t = 0; t < kT; ++t)
#pragma unroll
    for (int c = 0; c < 4; ++c) part[(warp * kT + t) * kTileCols + lane * 4 + c] = acc[t][c];
  __syncthreads();
  const auto cta_sum = [&](int t, int cc) {
    float v = 0.0f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) v += part[(w * kT + t) * kTileCols + cc];
    return v;
  };
  const auto out = [&](int t, int col, float v) {
    if (bias) v += to_f(bias[col]);
    y[static_cast<int64_t>(t) * N + col] = detail::from_f<E>(v);
  };
  detail::split_k_finish<kT, kThreads>(cta_sum, out, tile, tile * kTileCols, kTileCols, N, partial, counters);
}

// Packed rows per slice: at least the rows / kMaxSplits, at most what the x slice's shared memory
// holds, and about enough slices for four CTAs per SM.
int rows_per_split(int64_t T, int bits, int64_t N, int64_t K, const GemvSplitScratch* ws, int sms) {
  const int64_t pack = 32 / bits, rows = K / pack, tiles = (N + kTileCols - 1) / kTileCols;
  const int64_t smem_rows = kSmemBytes / (T * 4 * pack);
  const int64_t splits = detail::split_count(T, N, tiles, kMaxSplits, ws, sms);
  int64_t rps = (rows + splits - 1) / splits;
  if (rps > smem_rows) {
    rps = smem_rows;
    const int64_t need = (rows + rps - 1) / rps;
    if (need > 1 && !(ws && ws->partial && ws->counters && tiles <= ws->num_counters &&
                      static_cast<size_t>(need * T * N) <= ws->partial_floats))
      return 0;
  }
  return static_cast<int>(rps);
}

template <class E, int kT>
void launch(const void* x, const QuantWeightArgs& w, const void* bias, void* y, int N, int K, int rps,
            const GemvSplitScratch* ws, cudaStream_t s) {
  const int pack = 32 / w.bits, rows = K / pack;
  const dim3 grid((N + kTileCols - 1) / kTileCols, (rows + rps - 1) / rps);
  const int smem = std::max(kT * rps * pack, kWarps * kT * kTileCols) * 4;
  const auto* qw = static_cast<const uint4*>(static_cast<const void*>(w.qweight));
  const auto* qz = static_cast<const uint32_t*>(static_cast<const void*>(w.qzeros));
  float* partial = grid.y > 1 ? ws->partial : nullptr;
  int* counters = grid.y > 1 ? ws->counters : nullptr;
  const int gs = static_cast<int>(w.group_size);
  if (w.bits == 4)
    gemv_wide_kernel<E, kT, 4><<<grid, kThreads, smem, s>>>(static_cast<const E*>(x), qw, qz,
                                                            static_cast<const E*>(w.scales), static_cast<const E*>(bias),
                                                            static_cast<E*>(y), N, K, gs, w.zero_minus_one, rps,
                                                            partial, counters);
  else
    gemv_wide_kernel<E, kT, 8><<<grid, kThreads, smem, s>>>(static_cast<const E*>(x), qw, qz,
                                                            static_cast<const E*>(w.scales), static_cast<const E*>(bias),
                                                            static_cast<E*>(y), N, K, gs, w.zero_minus_one, rps,
                                                            partial, counters);
}

template <class E, int kT = 1>
void dispatch(int64_t T, const void* x, const QuantWeightArgs& w, const void* bias, void* y, int N, int K, int rps,
              const GemvSplitScratch* ws, cudaStream_t s) {
  if constexpr (kT < kQuantGemvMaxTokens) {
    if (T > kT) return dispatch<E, kT + 1>(T, x, w, bias, y, N, K, rps, ws, s);
  }
  launch<E, kT>(x, w, bias, y, N, K, rps, ws, s);
}

}  // namespace

bool gemv_quant_wide(const void* x, const QuantWeightArgs& w, const void* bias, void* y, int64_t T, int64_t N,
                     int64_t K, DType dt, const GemvSplitScratch* ws, cudaStream_t stream) {
  if (w.g_idx || N % 4 != 0 || (reinterpret_cast<uintptr_t>(w.qweight) & 15) != 0 || T < 1 ||
      T > kQuantGemvMaxTokens || (dt != DType::F16 && dt != DType::BF16))
    return false;
  static const int sms = detail::sm_count();
  const int rps = rows_per_split(T, w.bits, N, K, ws, sms);
  if (rps == 0) return false;
  if (dt == DType::F16)
    dispatch<__half>(T, x, w, bias, y, static_cast<int>(N), static_cast<int>(K), rps, ws, stream);
  else
    dispatch<__nv_bfloat16>(T, x, w, bias, y, static_cast<int>(N), static_cast<int>(K), rps, ws, stream);
  return true;
}

}  // namespace gpuopt::llm::cuda
