// The W8A16 GEMV for FP8 (e4m3) weights at decode: y[T, N] = x[T, K] · (W[N, K] * scale[n])^T.
//
// The weight keeps the layout cuBLASLt's FP8 GEMM needs for prefill ([N, K], K contiguous), so a
// lane streams 16 e4m3 weights of one output row per 16-byte load, and a CTA owns kRows rows (its
// 128 threads striding over the slice's 16-byte chunks, one load per row in flight each) and one
// K slice (blockIdx.y). x (T rows of K, f16/bf16) is read through L1, where it stays: one x chunk
// serves the CTA's kRows weight chunks. Weights are converted in registers, two at a time
// (cvt.rn.f16x2.e4m3x2 on sm_89+, exact: every e4m3 value is an f16 value), multiplied in f32 and
// accumulated in f32; the row's scale multiplies the finished sum (it is constant over K). The K
// slices end as the int GEMV's do (gemv_split.cuh): deterministic.
#include "llm/kernels/common.cuh"
#include "llm/kernels/gemv_split.cuh"
#include "llm/kernels/llm_kernels.h"

namespace gpuopt::llm::cuda {
namespace {

using detail::to_f;
using detail::warp_sum;

constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;
constexpr int kMaxSplits = 16;

// Rows per CTA and the k values handled per pass over a chunk (8 or 4 of its 16): the x values of
// one pass (kT x kSub floats) and the accumulators (kRows x kT) stay in registers for any T.
template <int kT>
constexpr int rows_for() {
  return kT <= 2 ? 8 : (kT <= 8 ? 4 : 2);
}
template <int kT>
constexpr int sub_for() {
  return kT <= 8 ? 8 : 4;
}

// kSub (8 or 4) consecutive elements of a row of x as floats.
template <class E, int kSub>
__device__ __forceinline__ void load_x(const E* p, float* f) {
  if constexpr (kSub == 8) {
    detail::unpack<E>(__ldg(reinterpret_cast<const uint4*>(p)), f);
  } else {
    const uint2 u = __ldg(reinterpret_cast<const uint2*>(p));
    const E* e = reinterpret_cast<const E*>(&u);
#pragma unroll
    for (int i = 0; i < 4; ++i) f[i] = to_f(e[i]);
  }
}

template <class E, int kT>
__global__ void __launch_bounds__(kThreads)
    gemv_fp8_kernel(const E* __restrict__ x, const uint4* __restrict__ w, const float* __restrict__ w_scale,
                    bool per_channel, const E* __restrict__ bias, E* __restrict__ y, int N, int K, int chunks_per_split,
                    float* __restrict__ partial, int* __restrict__ counters) {
  constexpr int kRows = rows_for<kT>(), kSub = sub_for<kT>();
  const int tile = blockIdx.x, n0 = tile * kRows;
  const int chunks = K / 16;
  const int c0 = blockIdx.y * chunks_per_split, c1 = min(chunks, c0 + chunks_per_split);
  float acc[kRows][kT];
#pragma unroll
  for (int r = 0; r < kRows; ++r)
#pragma unroll
    for (int t = 0; t < kT; ++t) acc[r][t] = 0.0f;

  for (int c = c0 + threadIdx.x; c < c1; c += kThreads) {
    uint4 wr[kRows];
#pragma unroll
    for (int r = 0; r < kRows; ++r)  // rows past N read row N-1 again (never written)
      wr[r] = __ldg(w + static_cast<int64_t>(min(n0 + r, N - 1)) * chunks + c);
#pragma unroll
    for (int sub = 0; sub < 16; sub += kSub) {
      float xf[kT][kSub];
#pragma unroll
      for (int t = 0; t < kT; ++t) load_x<E, kSub>(x + static_cast<int64_t>(t) * K + c * 16 + sub, xf[t]);
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        const uint32_t words[4] = {wr[r].x, wr[r].y, wr[r].z, wr[r].w};
        float wf[kSub];
#pragma unroll
        for (int q = 0; q < kSub / 4; ++q) detail::e4m3x4_to_float(words[sub / 4 + q], wf + 4 * q);
#pragma unroll
        for (int t = 0; t < kT; ++t)
#pragma unroll
          for (int i = 0; i < kSub; ++i) acc[r][t] = fmaf(xf[t][i], wf[i], acc[r][t]);
      }
    }
  }

  // The warps' sums, then in warp order.
  __shared__ float part[kWarps][kRows * kT];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int r = 0; r < kRows; ++r)
#pragma unroll
    for (int t = 0; t < kT; ++t) {
      const float s = warp_sum(acc[r][t]);
      if (lane == 0) part[warp][r * kT + t] = s;
    }
  __syncthreads();
  const auto cta_sum = [&](int t, int r) {
    float v = 0.0f;
#pragma unroll
    for (int i = 0; i < kWarps; ++i) v += part[i][r * kT + t];
    return v;
  };
  const auto out = [&](int t, int n, float v) {
    v *= w_scale[per_channel ? n : 0];
    if (bias) v += to_f(bias[n]);
    y[static_cast<int64_t>(t) * N + n] = detail::from_f<E>(v);
  };
  detail::split_k_finish<kT, kThreads>(cta_sum, out, tile, n0, kRows, N, partial, counters);
}

template <class E, int kT>
void launch(const void* x, const void* w, const float* w_scale, bool per_channel, const void* bias, void* y, int N,
            int K, const GemvSplitScratch* ws, int sms, cudaStream_t s) {
  constexpr int kRows = rows_for<kT>();
  const int64_t tiles = (N + kRows - 1) / kRows, chunks = K / 16;
  const int64_t want = detail::split_count(kT, N, tiles, kMaxSplits, ws, sms);
  // Whole passes of the CTA's threads per slice, so no slice is left with a ragged sliver.
  const int64_t per = (chunks + want - 1) / want;
  const int64_t cps = (per + kThreads - 1) / kThreads * kThreads;
  const dim3 grid(static_cast<unsigned>(tiles), static_cast<unsigned>((chunks + cps - 1) / cps));
  float* partial = grid.y > 1 ? ws->partial : nullptr;
  int* counters = grid.y > 1 ? ws->counters : nullptr;
  gemv_fp8_kernel<E, kT><<<grid, kThreads, 0, s>>>(static_cast<const E*>(x), static_cast<const uint4*>(w), w_scale,
                                                   per_channel, static_cast<const E*>(bias), static_cast<E*>(y), N, K,
                                                   static_cast<int>(cps), partial, counters);
}

template <class E, int kT = 1>
void dispatch(int64_t T, const void* x, const void* w, const float* w_scale, bool per_channel, const void* bias,
              void* y, int N, int K, const GemvSplitScratch* ws, int sms, cudaStream_t s) {
  if constexpr (kT < kQuantGemvMaxTokens) {
    if (T > kT) return dispatch<E, kT + 1>(T, x, w, w_scale, per_channel, bias, y, N, K, ws, sms, s);
  }
  launch<E, kT>(x, w, w_scale, per_channel, bias, y, N, K, ws, sms, s);
}

}  // namespace

bool gemv_fp8_supported(const void* x, const void* w, int64_t T, int64_t N, int64_t K, DType dt) {
  return (dt == DType::F16 || dt == DType::BF16) && T >= 1 && T <= kQuantGemvMaxTokens && N >= 1 &&
         N < (int64_t{1} << 31) && K >= 16 && K % 16 == 0 && K < (int64_t{1} << 31) && detail::aligned16(x) &&
         detail::aligned16(w);
}

void gemv_fp8(const void* x, const void* w, const float* w_scale, bool per_channel, const void* bias, void* y,
              int64_t T, int64_t N, int64_t K, DType dt, cudaStream_t stream, const GemvSplitScratch* split) {
  if (!gemv_fp8_supported(x, w, T, N, K, dt) || !w_scale || !y)
    detail::contract_violation("gemv_fp8: unsupported shape, dtype or alignment");
  static const int sms = detail::sm_count();
  const int n = static_cast<int>(N), k = static_cast<int>(K);
  if (dt == DType::F16)
    dispatch<__half>(T, x, w, w_scale, per_channel, bias, y, n, k, split, sms, stream);
  else
    dispatch<__nv_bfloat16>(T, x, w, w_scale, per_channel, bias, y, n, k, split, sms, stream);
}

}  // namespace gpuopt::llm::cuda
