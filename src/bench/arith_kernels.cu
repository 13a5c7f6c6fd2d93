// Arithmetic kernels: the FMA peak kernels (kFmaChains independent chains per thread, no memory
// traffic but one store) and the roofline family (each 4-byte word read once, transformed by the
// op sequence of counts.h's roofline_ops, written once). The op counts come in as arguments from
// counts.h so what runs is what is counted.
#include "bench/counts.h"
#include "bench/cuda/common.h"

#include <cuda_fp16.h>
#include <cuda_runtime.h>

namespace gpuopt::bench::cuda {
namespace {

template <typename T>
__device__ __forceinline__ T fma_op(T x, T s, T t);
template <>
__device__ __forceinline__ float fma_op(float x, float s, float t) { return __fmaf_rn(x, s, t); }
template <>
__device__ __forceinline__ double fma_op(double x, double s, double t) { return __fma_rn(x, s, t); }
template <>
__device__ __forceinline__ __half2 fma_op(__half2 x, __half2 s, __half2 t) { return __hfma2(x, s, t); }

template <typename T>
__device__ __forceinline__ T from_float(float f);
template <>
__device__ __forceinline__ float from_float(float f) { return f; }
template <>
__device__ __forceinline__ double from_float(float f) { return f; }
template <>
__device__ __forceinline__ __half2 from_float(float f) { return __floats2half2_rn(f, f * 0.75f); }

template <typename T>
__device__ __forceinline__ T add_op(T a, T b) { return a + b; }
template <>
__device__ __forceinline__ __half2 add_op(__half2 a, __half2 b) { return __hadd2(a, b); }

template <typename T>
__global__ void __launch_bounds__(kFmaThreadsPerBlock) fma_kernel(T* __restrict__ out, int iterations, T s, T t) {
  const uint64_t tid = static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  T x[kFmaChains];
#pragma unroll
  for (int j = 0; j < kFmaChains; ++j) x[j] = from_float<T>(fma_chain_start(tid, j));
#pragma unroll 16
  for (int i = 0; i < iterations; ++i) {
#pragma unroll
    for (int j = 0; j < kFmaChains; ++j) x[j] = fma_op(x[j], s, t);
  }
  // kFmaChains - 1 adds combine the chains (counted by fma_count), so none is dead code.
  T sum = x[0];
#pragma unroll
  for (int j = 1; j < kFmaChains; ++j) sum = add_op(sum, x[j]);
  out[tid] = sum;
}

// ---- roofline ----
// Each thread handles two 16-byte vectors per step (more bytes in flight for the memory-bound
// end, eight independent chains for the compute-bound end).
__device__ __forceinline__ float4 rl_f32(float4 v, int muls, int fmas, float s, float t) {
  if (muls) {
    v.x *= s, v.y *= s, v.z *= s, v.w *= s;
  }
#pragma unroll 8
  for (int k = 0; k < fmas; ++k) {
    v.x = __fmaf_rn(v.x, s, t);
    v.y = __fmaf_rn(v.y, s, t);
    v.z = __fmaf_rn(v.z, s, t);
    v.w = __fmaf_rn(v.w, s, t);
  }
  return v;
}

__global__ void roofline_f32(const float4* __restrict__ src, float4* __restrict__ dst, size_t n, int muls, int fmas,
                             float s, float t) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  for (; i + stride < n; i += 2 * stride) {
    float4 a = src[i], b = src[i + stride];
    if (muls) {
      a.x *= s, a.y *= s, a.z *= s, a.w *= s;
      b.x *= s, b.y *= s, b.z *= s, b.w *= s;
    }
#pragma unroll 4
    for (int k = 0; k < fmas; ++k) {
      a.x = __fmaf_rn(a.x, s, t), a.y = __fmaf_rn(a.y, s, t), a.z = __fmaf_rn(a.z, s, t), a.w = __fmaf_rn(a.w, s, t);
      b.x = __fmaf_rn(b.x, s, t), b.y = __fmaf_rn(b.y, s, t), b.z = __fmaf_rn(b.z, s, t), b.w = __fmaf_rn(b.w, s, t);
    }
    dst[i] = a;
    dst[i + stride] = b;
  }
  if (i < n) dst[i] = rl_f32(src[i], muls, fmas, s, t);
}

union H2x4 {
  uint4 u;
  __half2 h[4];
};

__device__ __forceinline__ void rl_f16_muls(H2x4& v, int scalar_muls, int vector_muls, __half2 s) {
  if (scalar_muls) {
#pragma unroll
    for (int j = 0; j < 4; ++j) v.h[j].x = __hmul(v.h[j].x, s.x);  // low lane only: 1 FLOP/word
  }
  if (vector_muls) {
#pragma unroll
    for (int j = 0; j < 4; ++j) v.h[j] = __hmul2(v.h[j], s);
  }
}

__global__ void roofline_f16(const uint4* __restrict__ src, uint4* __restrict__ dst, size_t n, int scalar_muls,
                             int vector_muls, int fmas, __half2 s, __half2 t) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  for (; i + stride < n; i += 2 * stride) {
    H2x4 a, b;
    a.u = src[i];
    b.u = src[i + stride];
    rl_f16_muls(a, scalar_muls, vector_muls, s);
    rl_f16_muls(b, scalar_muls, vector_muls, s);
#pragma unroll 4
    for (int k = 0; k < fmas; ++k) {
#pragma unroll
      for (int j = 0; j < 4; ++j) a.h[j] = __hfma2(a.h[j], s, t), b.h[j] = __hfma2(b.h[j], s, t);
    }
    dst[i] = a.u;
    dst[i + stride] = b.u;
  }
  if (i < n) {
    H2x4 a;
    a.u = src[i];
    rl_f16_muls(a, scalar_muls, vector_muls, s);
    for (int k = 0; k < fmas; ++k) {
#pragma unroll
      for (int j = 0; j < 4; ++j) a.h[j] = __hfma2(a.h[j], s, t);
    }
    dst[i] = a.u;
  }
}

}  // namespace

int fma_blocks(int kind, int device) {
  const void* k = kind == static_cast<int>(FmaKind::F32)     ? reinterpret_cast<const void*>(fma_kernel<float>)
                  : kind == static_cast<int>(FmaKind::F64)   ? reinterpret_cast<const void*>(fma_kernel<double>)
                                                             : reinterpret_cast<const void*>(fma_kernel<__half2>);
  return max_resident_blocks(k, kFmaThreadsPerBlock, device);
}

void launch_fma(int kind, void* out, int blocks, int iterations, double s, double t, cudaStream_t st) {
  switch (static_cast<FmaKind>(kind)) {
    case FmaKind::F32:
      fma_kernel<float><<<blocks, kFmaThreadsPerBlock, 0, st>>>(static_cast<float*>(out), iterations,
                                                                static_cast<float>(s), static_cast<float>(t));
      break;
    case FmaKind::F64:
      fma_kernel<double><<<blocks, kFmaThreadsPerBlock, 0, st>>>(static_cast<double*>(out), iterations, s, t);
      break;
    case FmaKind::F16x2:
      fma_kernel<__half2><<<blocks, kFmaThreadsPerBlock, 0, st>>>(
          static_cast<__half2*>(out), iterations, __float2half2_rn(static_cast<float>(s)),
          __float2half2_rn(static_cast<float>(t)));
      break;
  }
}

void launch_roofline(int type, const void* src, void* dst, size_t words, int scalar_muls, int vector_muls, int fmas,
                     double s, double t, int device, cudaStream_t st) {
  const size_t vecs = words / 4;
  constexpr int kThreads = 256;
  if (static_cast<RooflineType>(type) == RooflineType::F32) {
    const int full = max_resident_blocks(reinterpret_cast<const void*>(roofline_f32), kThreads, device);
    const int grid = static_cast<int>(std::min<size_t>(full, (vecs + kThreads - 1) / kThreads));
    roofline_f32<<<grid, kThreads, 0, st>>>(static_cast<const float4*>(src), static_cast<float4*>(dst), vecs, scalar_muls,
                                            fmas, static_cast<float>(s), static_cast<float>(t));
  } else {
    const int full = max_resident_blocks(reinterpret_cast<const void*>(roofline_f16), kThreads, device);
    const int grid = static_cast<int>(std::min<size_t>(full, (vecs + kThreads - 1) / kThreads));
    roofline_f16<<<grid, kThreads, 0, st>>>(static_cast<const uint4*>(src), static_cast<uint4*>(dst), vecs, scalar_muls,
                                            vector_muls, fmas, __float2half2_rn(static_cast<float>(s)),
                                            __float2half2_rn(static_cast<float>(t)));
  }
}

}  // namespace gpuopt::bench::cuda
