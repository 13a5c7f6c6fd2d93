// CumSum / CumProd: one thread per line along the axis (threads of a warp take neighbouring
// inner positions, so reads are coalesced when inner > 1). Floats accumulate in double and are
// rounded once per output, integers wrap in 64 bits: bit-exact with the CPU reference.
#include "ops/reduce/cuda/scan.h"
#include "backends/cuda/kernels/kernel_common.cuh"
#include "core/cuda_check.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

namespace gpuopt::cuda {
namespace {

constexpr int kThreads = 128;
unsigned grid_for(int64_t n) { return kern::grid_for(n, kThreads); }

using kern::from_d;
using kern::to_d;

template <typename T, bool kFloat>
__global__ void scan_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t outer, int64_t n, int64_t inner,
                            bool prod, bool exclusive, bool reverse) {
  const int64_t lines = outer * inner;
  for (int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; t < lines; t += int64_t(gridDim.x) * blockDim.x) {
    const int64_t o = t / inner, i = t % inner;
    if constexpr (kFloat) {
      double acc = prod ? 1.0 : 0.0;
      for (int64_t s = 0; s < n; ++s) {
        const int64_t idx = (o * n + (reverse ? n - 1 - s : s)) * inner + i;
        const double v = to_d(x[idx]);
        if (!exclusive) acc = prod ? __dmul_rn(acc, v) : __dadd_rn(acc, v);
        y[idx] = from_d<T>(acc);
        if (exclusive) acc = prod ? __dmul_rn(acc, v) : __dadd_rn(acc, v);
      }
    } else {
      unsigned long long acc = prod ? 1ull : 0ull;  // wraps like the reference's 64-bit accumulator
      for (int64_t s = 0; s < n; ++s) {
        const int64_t idx = (o * n + (reverse ? n - 1 - s : s)) * inner + i;
        const unsigned long long v = static_cast<unsigned long long>(static_cast<long long>(x[idx]));
        if (!exclusive) acc = prod ? acc * v : acc + v;
        y[idx] = static_cast<T>(static_cast<long long>(acc));
        if (exclusive) acc = prod ? acc * v : acc + v;
      }
    }
  }
}

}  // namespace

Status launch_scan(DType dt, const void* x, void* y, int64_t outer, int64_t n, int64_t inner, bool prod,
                   bool exclusive, bool reverse, cudaStream_t s) {
  if (outer * inner == 0 || n == 0) return Status::Ok();
  const unsigned g = grid_for(outer * inner);
  switch (dt) {
    case DType::F32: scan_kernel<float, true><<<g, kThreads, 0, s>>>(static_cast<const float*>(x), static_cast<float*>(y), outer, n, inner, prod, exclusive, reverse); break;
    case DType::F64: scan_kernel<double, true><<<g, kThreads, 0, s>>>(static_cast<const double*>(x), static_cast<double*>(y), outer, n, inner, prod, exclusive, reverse); break;
    case DType::F16: scan_kernel<__half, true><<<g, kThreads, 0, s>>>(static_cast<const __half*>(x), static_cast<__half*>(y), outer, n, inner, prod, exclusive, reverse); break;
    case DType::BF16: scan_kernel<__nv_bfloat16, true><<<g, kThreads, 0, s>>>(static_cast<const __nv_bfloat16*>(x), static_cast<__nv_bfloat16*>(y), outer, n, inner, prod, exclusive, reverse); break;
    case DType::I32: scan_kernel<int32_t, false><<<g, kThreads, 0, s>>>(static_cast<const int32_t*>(x), static_cast<int32_t*>(y), outer, n, inner, prod, exclusive, reverse); break;
    case DType::I64: scan_kernel<int64_t, false><<<g, kThreads, 0, s>>>(static_cast<const int64_t*>(x), static_cast<int64_t*>(y), outer, n, inner, prod, exclusive, reverse); break;
    default: return Status::Unimplemented("CUDA CumSum/CumProd on dtype {}", dtype_name(dt));
  }
  GPUOPT_CHECK_CALL(cudaGetLastError());
  return Status::Ok();
}

}  // namespace gpuopt::cuda
