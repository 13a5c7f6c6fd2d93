// Fp8Gemm's activation quantization (fp8_gemm.h): one grid-stride pass over A, converted by
// e4m3.cuh (the hardware's cvt on sm_89+, fp8_e4m3.h's rounding before).
#include "ops/quant/cuda/fp8_gemm.h"
#include "backends/cuda/kernels/e4m3.cuh"
#include "backends/cuda/kernels/kernel_common.cuh"
#include "core/cuda_check.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

namespace gpuopt::cuda {
namespace {

__device__ __forceinline__ float ld(const float* p, int64_t i) { return p[i]; }
__device__ __forceinline__ float ld(const __half* p, int64_t i) { return __half2float(p[i]); }
__device__ __forceinline__ float ld(const __nv_bfloat16* p, int64_t i) { return __bfloat162float(p[i]); }

template <typename T>
__global__ void quantize_kernel(const T* __restrict__ x, int64_t n, float a_scale, uint8_t* __restrict__ q) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n; i += stride)
    q[i] = static_cast<uint8_t>(to_e4m3(ld(x, i) / a_scale));  // IEEE division, as the CPU reference
}

// 16-bit types, n % 8 == 0, 16-byte aligned: eight values per thread (one 16-byte load, one
// 8-byte store).
template <typename T>
__global__ void quantize8_kernel(const uint4* __restrict__ x, int64_t n8, float a_scale, uint2* __restrict__ q) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n8; i += stride) {
    const uint4 v = x[i];
    const T* h = reinterpret_cast<const T*>(&v);
    uint32_t lo = 0, hi = 0;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      lo |= to_e4m3(ld(h, j) / a_scale) << (8 * j);
      hi |= to_e4m3(ld(h, j + 4) / a_scale) << (8 * j);
    }
    q[i] = make_uint2(lo, hi);
  }
}

__global__ void set_scalar_kernel(float* p, float v) { *p = v; }

__global__ void f16_to_bf16_kernel(const __half* __restrict__ x, int64_t n, __nv_bfloat16* __restrict__ y) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < n) y[i] = __float2bfloat16(__half2float(x[i]));
}

}  // namespace

Status launch_fp8_set_scalar(float* p, float v, cudaStream_t s) {
  set_scalar_kernel<<<1, 1, 0, s>>>(p, v);
  GPUOPT_CHECK_CALL(cudaGetLastError());
  return Status::Ok();
}

Status launch_f16_to_bf16(const void* x, int64_t n, void* y, cudaStream_t s) {
  if (n == 0) return Status::Ok();
  f16_to_bf16_kernel<<<kern::grid_for(n, 256), 256, 0, s>>>(static_cast<const __half*>(x), n, static_cast<__nv_bfloat16*>(y));
  GPUOPT_CHECK_CALL(cudaGetLastError());
  return Status::Ok();
}

Status launch_fp8_quantize(DType dt, const void* x, int64_t n, float a_scale, uint8_t* q, cudaStream_t s) {
  if (n == 0) return Status::Ok();
  const bool vec = n % 8 == 0 && reinterpret_cast<uintptr_t>(x) % 16 == 0 && reinterpret_cast<uintptr_t>(q) % 8 == 0;
  if (vec && (dt == DType::F16 || dt == DType::BF16)) {
    const unsigned blocks = kern::grid_for(n / 8, 256);
    const auto* xv = static_cast<const uint4*>(x);
    auto* qv = reinterpret_cast<uint2*>(q);
    if (dt == DType::F16)
      quantize8_kernel<__half><<<blocks, 256, 0, s>>>(xv, n / 8, a_scale, qv);
    else
      quantize8_kernel<__nv_bfloat16><<<blocks, 256, 0, s>>>(xv, n / 8, a_scale, qv);
    GPUOPT_CHECK_CALL(cudaGetLastError());
    return Status::Ok();
  }
  const unsigned blocks = kern::grid_for(n, 256);
  switch (dt) {
    case DType::F32: quantize_kernel<<<blocks, 256, 0, s>>>(static_cast<const float*>(x), n, a_scale, q); break;
    case DType::F16: quantize_kernel<<<blocks, 256, 0, s>>>(static_cast<const __half*>(x), n, a_scale, q); break;
    case DType::BF16:
      quantize_kernel<<<blocks, 256, 0, s>>>(static_cast<const __nv_bfloat16*>(x), n, a_scale, q);
      break;
    default: return Status::Unimplemented("Fp8Gemm: activation dtype {} on the GPU", dtype_name(dt));
  }
  GPUOPT_CHECK_CALL(cudaGetLastError());
  return Status::Ok();
}

}  // namespace gpuopt::cuda
