// Skinny products for decode steps: y[T, N] = x[T, K] · W[N, K]^T (+ bias), T <= 8, f16/bf16 with
// f32 accumulation. A decode step is a stream of weights through the SMs; this kernel's only job
// is to keep enough 16-byte weight loads in flight: each CTA owns kRows output rows and its 256
// threads stride over K in 8-element chunks (a chunk of W is read once, by one thread), then the
// CTA reduces its partial sums in a fixed order (deterministic). x (T rows of K) stays in L1/L2.
#include "llm/kernels/common.cuh"
#include "llm/kernels/llm_kernels.h"

namespace gpuopt::llm::cuda {
namespace {

using detail::aligned16;
using detail::to_f;
using detail::warp_sum;

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;

// Rows per CTA: one x chunk serves kRows weight chunks, which keeps L1 traffic for x below the
// weights' own as T grows.
template <int kT>
constexpr int rows_for() {
  return kT <= 2 ? 2 : 4;
}

template <class E, int kT>
__global__ void __launch_bounds__(kThreads) gemv_kernel(const E* __restrict__ x, const E* __restrict__ w,
                                                        const E* __restrict__ bias, E* __restrict__ y, int N, int K) {
  constexpr int kRows = rows_for<kT>();
  const int n0 = blockIdx.x * kRows;
  const int chunks = K / 8;
  float acc[kRows][kT];
#pragma unroll
  for (int r = 0; r < kRows; ++r)
#pragma unroll
    for (int t = 0; t < kT; ++t) acc[r][t] = 0.0f;

  const uint4* wv = reinterpret_cast<const uint4*>(w);
  const uint4* xv = reinterpret_cast<const uint4*>(x);
  for (int c = threadIdx.x; c < chunks; c += kThreads) {
    uint4 wr[kRows];
#pragma unroll
    for (int r = 0; r < kRows; ++r)  // rows past N read row N-1 again (never written)
      wr[r] = __ldg(wv + static_cast<int64_t>(min(n0 + r, N - 1)) * chunks + c);
#pragma unroll
    for (int t = 0; t < kT; ++t) {
      float xf[8];
      detail::unpack<E>(__ldg(xv + static_cast<int64_t>(t) * chunks + c), xf);
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        float wf[8];
        detail::unpack<E>(wr[r], wf);
#pragma unroll
        for (int i = 0; i < 8; ++i) acc[r][t] = fmaf(xf[i], wf[i], acc[r][t]);
      }
    }
  }

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
  if (threadIdx.x < kRows * kT) {
    const int r = threadIdx.x / kT, t = threadIdx.x % kT;
    const int n = n0 + r;
    if (n < N) {
      float s = 0.0f;
#pragma unroll
      for (int i = 0; i < kWarps; ++i) s += part[i][threadIdx.x];
      if (bias) s += to_f(bias[n]);
      y[static_cast<int64_t>(t) * N + n] = detail::from_f<E>(s);
    }
  }
}

template <class E, int kT>
void launch(const void* x, const void* w, const void* bias, void* y, int N, int K, cudaStream_t stream) {
  constexpr int kRows = rows_for<kT>();
  const unsigned grid = static_cast<unsigned>((N + kRows - 1) / kRows);
  gemv_kernel<E, kT><<<grid, kThreads, 0, stream>>>(static_cast<const E*>(x), static_cast<const E*>(w),
                                                    static_cast<const E*>(bias), static_cast<E*>(y), N, K);
}

template <class E>
void dispatch_t(int64_t T, const void* x, const void* w, const void* bias, void* y, int N, int K, cudaStream_t s) {
  switch (T) {
    case 1:
      return launch<E, 1>(x, w, bias, y, N, K, s);
    case 2:
      return launch<E, 2>(x, w, bias, y, N, K, s);
    case 3:
      return launch<E, 3>(x, w, bias, y, N, K, s);
    case 4:
      return launch<E, 4>(x, w, bias, y, N, K, s);
    case 5:
      return launch<E, 5>(x, w, bias, y, N, K, s);
    case 6:
      return launch<E, 6>(x, w, bias, y, N, K, s);
    case 7:
      return launch<E, 7>(x, w, bias, y, N, K, s);
    default:
      return launch<E, 8>(x, w, bias, y, N, K, s);
  }
}

}  // namespace

bool gemv_supported(const void* x, const void* w, const void* y, int64_t T, int64_t N, int64_t K, DType dt) {
  return (dt == DType::F16 || dt == DType::BF16) && T >= 1 && T <= kGemvMaxTokens && N >= 1 && N < (int64_t{1} << 31) &&
         K >= 8 && K % 8 == 0 && K < (int64_t{1} << 31) && aligned16(x) && aligned16(w) && y != nullptr;
}

void gemv(const void* x, const void* w, const void* bias, void* y, int64_t T, int64_t N, int64_t K, DType dt,
          cudaStream_t stream) {
  if (!gemv_supported(x, w, y, T, N, K, dt)) detail::contract_violation("gemv: unsupported shape, dtype or alignment");
  const int n = static_cast<int>(N), k = static_cast<int>(K);
  if (dt == DType::F16)
    dispatch_t<__half>(T, x, w, bias, y, n, k, stream);
  else
    dispatch_t<__nv_bfloat16>(T, x, w, bias, y, n, k, stream);
}

}  // namespace gpuopt::llm::cuda
