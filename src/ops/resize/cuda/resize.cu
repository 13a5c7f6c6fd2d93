// Resize kernel (see resize.h): one thread per output element; the arithmetic is in resize_math.h.
#include "ops/resize/cuda/resize_math.h"
#include "backends/cuda/kernels/kernel_common.cuh"
#include "core/cuda_check.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

namespace gpuopt::cuda {
namespace {

constexpr int kThreads = 256;
unsigned grid_for(int64_t n) { return kern::grid_for(n, kThreads); }

using kern::to_d;

template <typename T> __device__ __forceinline__ T from_d(double v);
template <> __device__ __forceinline__ float from_d<float>(double v) { return __double2float_rn(v); }
template <> __device__ __forceinline__ __half from_d<__half>(double v) { return __double2half(v); }
template <> __device__ __forceinline__ __nv_bfloat16 from_d<__nv_bfloat16>(double v) { return __double2bfloat16(v); }
// Integers: round half to even, NaN to 0, saturate (the reference's saturate_cast).
template <> __device__ __forceinline__ uint8_t from_d<uint8_t>(double v) {
  v = rint(v);
  return isnan(v) ? 0 : static_cast<uint8_t>(fmin(fmax(v, 0.0), 255.0));
}
template <> __device__ __forceinline__ int8_t from_d<int8_t>(double v) {
  v = rint(v);
  return isnan(v) ? 0 : static_cast<int8_t>(fmin(fmax(v, -128.0), 127.0));
}

template <typename T>
__global__ void resize_kernel(const T* __restrict__ x, T* __restrict__ y, ResizeDesc d) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < d.numel; i += int64_t(gridDim.x) * blockDim.x) {
    const double v = resize_point(d, i, [x](int64_t off) { return to_d(x[off]); });
    y[i] = from_d<T>(v);
  }
}

}  // namespace

Status launch_resize(DType dt, const void* x, void* y, const ResizeDesc& d, cudaStream_t s) {
  if (d.numel == 0) return Status::Ok();
  auto go = [&](auto tag) {
    using T = decltype(tag);
    resize_kernel<T><<<grid_for(d.numel), kThreads, 0, s>>>(static_cast<const T*>(x), static_cast<T*>(y), d);
  };
  switch (dt) {
    case DType::F32: go(float{}); break;
    case DType::F16: go(__half{}); break;
    case DType::BF16: go(__nv_bfloat16{}); break;
    case DType::U8: go(uint8_t{}); break;
    case DType::I8: go(int8_t{}); break;
    default: return Status::Unimplemented("CUDA Resize on dtype {}", dtype_name(dt));
  }
  GPUOPT_CHECK_CALL(cudaGetLastError());
  return Status::Ok();
}

}  // namespace gpuopt::cuda
