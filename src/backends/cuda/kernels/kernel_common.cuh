// Shared by the CUDA kernel files: the grid size of a grid-stride launch, and conversions
// between storage types and double (the kernels that must match the CPU reference bit for bit
// compute in double, as it does).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

namespace gpuopt::cuda::kern {

// Blocks for n elements at `threads` per block: at least 1, at most 65535 * 8 (grid-stride loops
// cover the rest).
inline unsigned grid_for(int64_t n, int threads) {
  const int64_t b = (n + threads - 1) / threads;
  return static_cast<unsigned>(b < 65535 * 8 ? (b > 0 ? b : 1) : 65535 * 8);
}

__device__ __forceinline__ double to_d(float v) { return v; }
__device__ __forceinline__ double to_d(double v) { return v; }
__device__ __forceinline__ double to_d(__half v) { return __half2float(v); }
__device__ __forceinline__ double to_d(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ double to_d(uint8_t v) { return v; }
__device__ __forceinline__ double to_d(int8_t v) { return v; }

// Round to nearest even; integer types are specialised where a kernel needs them (saturation
// rules differ by op).
template <typename T>
__device__ __forceinline__ T from_d(double v);
template <>
__device__ __forceinline__ float from_d<float>(double v) { return __double2float_rn(v); }
template <>
__device__ __forceinline__ double from_d<double>(double v) { return v; }
template <>
__device__ __forceinline__ __half from_d<__half>(double v) { return __double2half(v); }
template <>
__device__ __forceinline__ __nv_bfloat16 from_d<__nv_bfloat16>(double v) { return __double2bfloat16(v); }

}  // namespace gpuopt::cuda::kern
