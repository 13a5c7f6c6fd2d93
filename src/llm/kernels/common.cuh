// Device helpers shared by the language-model kernels: dtype traits, 16-byte vector packing,
// warp/block reductions and the dtype dispatch. Private to src/llm/kernels.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "core/dtype.h"

namespace gpuopt::llm::cuda::detail {

// A launch-time precondition the caller broke (the header lists them): one line, then abort,
// since these entry points are void and a silent no-op would hand garbage to the next layer.
[[noreturn]] inline void contract_violation(const char* what) {
  std::fprintf(stderr, "llm kernels: %s\n", what);
  std::abort();
}

template <class T>
struct Vec;  // kN elements of T in 16 bytes
template <>
struct Vec<float> {
  static constexpr int kN = 4;
};
template <>
struct Vec<__half> {
  static constexpr int kN = 8;
};
template <>
struct Vec<__nv_bfloat16> {
  static constexpr int kN = 8;
};

__device__ __forceinline__ float to_f(float x) {
  return x;
}
__device__ __forceinline__ float to_f(__half x) {
  return __half2float(x);
}
__device__ __forceinline__ float to_f(__nv_bfloat16 x) {
  return __bfloat162float(x);
}
template <class T>
__device__ __forceinline__ T from_f(float x);
template <>
__device__ __forceinline__ float from_f<float>(float x) {
  return x;
}
template <>
__device__ __forceinline__ __half from_f<__half>(float x) {
  return __float2half_rn(x);
}
template <>
__device__ __forceinline__ __nv_bfloat16 from_f<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}

// Four e4m3 codes (the bytes of w, lowest first) -> four floats, exactly (every e4m3 value is an
// f16 value; cvt.rn.f16x2.e4m3x2 on sm_89+).
__device__ __forceinline__ void e4m3x4_to_float(uint32_t w, float* f) {
  const __half2_raw lo = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(w & 0xffffu), __NV_E4M3);
  const __half2_raw hi = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(w >> 16), __NV_E4M3);
  const float2 a = __half22float2(__half2(lo)), b = __half22float2(__half2(hi));
  f[0] = a.x;
  f[1] = a.y;
  f[2] = b.x;
  f[3] = b.y;
}

// 16 bytes <-> Vec<T>::kN floats.
template <class T>
__device__ __forceinline__ void unpack(const uint4& u, float* f) {
  const T* e = reinterpret_cast<const T*>(&u);
#pragma unroll
  for (int i = 0; i < Vec<T>::kN; ++i) f[i] = to_f(e[i]);
}
template <class T>
__device__ __forceinline__ uint4 pack(const float* f) {
  uint4 u;
  T* e = reinterpret_cast<T*>(&u);
#pragma unroll
  for (int i = 0; i < Vec<T>::kN; ++i) e[i] = from_f<T>(f[i]);
  return u;
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Sum over the block (blockDim.x a multiple of 32, <= 1024); every thread gets the result.
// `scratch`: 32 floats of shared memory; the call ends with the block synchronised.
__device__ __forceinline__ float block_sum(float v, float* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
  v = warp_sum(v);
  __syncthreads();  // scratch may still be read by a previous call
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < nw ? scratch[lane] : 0.0f;
  return warp_sum(v);
}

__host__ __device__ inline bool aligned16(const void* p) {
  return (reinterpret_cast<uintptr_t>(p) & 15) == 0;
}

// Calls f(T{}) with T the CUDA type of dt (F32, F16, BF16).
template <class F>
void dispatch_float(DType dt, F&& f) {
  switch (dt) {
    case DType::F32:
      f(float{});
      break;
    case DType::F16:
      f(__half{});
      break;
    case DType::BF16:
      f(__nv_bfloat16{});
      break;
    default:
      contract_violation("dtype must be f32, f16 or bf16");
  }
}

inline unsigned grid_1d(int64_t n, int threads, int64_t cap = 65536) {
  int64_t g = (n + threads - 1) / threads;
  if (g < 1) g = 1;
  return static_cast<unsigned>(g < cap ? g : cap);
}

}  // namespace gpuopt::llm::cuda::detail
