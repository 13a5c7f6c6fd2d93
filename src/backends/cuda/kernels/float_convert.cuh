// Storage type <-> f32 for kernels that compute in f32 (the attention kernels): to_f(x) and
// from_f<T>(v), round to nearest even. kernel_common.cuh's to_d/from_d are the double versions.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace gpuopt::cuda::kern {

__device__ __forceinline__ float to_f(float v) { return v; }
__device__ __forceinline__ float to_f(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_f(__nv_bfloat16 v) { return __bfloat162float(v); }
template <typename T>
__device__ __forceinline__ T from_f(float v);
template <>
__device__ __forceinline__ float from_f<float>(float v) { return v; }
template <>
__device__ __forceinline__ __half from_f<__half>(float v) { return __float2half_rn(v); }
template <>
__device__ __forceinline__ __nv_bfloat16 from_f<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }

}  // namespace gpuopt::cuda::kern
