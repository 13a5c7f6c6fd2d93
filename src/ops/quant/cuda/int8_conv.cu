// Int8Conv's kernels (int8_conv.h): the epilogue constants, the epilogue over int32 sums, and the
// direct convolution the op falls back to.
#include "ops/quant/cuda/int8_conv.h"
#include "backends/cuda/kernels/kernel_common.cuh"
#include "core/cuda_check.h"

#include <cuda_fp16.h>
#include <cuda_runtime.h>

namespace gpuopt::cuda {
namespace {

__device__ __forceinline__ float ld(const float* p, int64_t i) { return p[i]; }
__device__ __forceinline__ float ld(const __half* p, int64_t i) { return __half2float(p[i]); }

template <typename T>
__global__ void prep_kernel(int64_t m, const T* xs, const T* ws, bool per_channel, const T* bias, const T* ys,
                            const T* zs, const T* os, float* alpha, float* beta) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= m) return;
  if (zs && i == 0) {  // the residual's two scalars after beta: ys / os and zs / os
    const float inv_o = os ? 1.0f / ld(os, 0) : 1.0f;
    beta[m] = ld(ys, 0) * inv_o;
    beta[m + 4] = ld(zs, 0) * inv_o;
  }
  const float inv = ys ? 1.0f / ld(ys, 0) : 1.0f;
  alpha[i] = ld(xs, 0) * ld(ws, per_channel ? i : 0) * inv;
  beta[i] = bias ? ld(bias, i) * inv : 0.0f;
}

__device__ __forceinline__ void store(int8_t* y, int64_t i, float v) {
  // QuantizeLinear: round half to even, saturate (NaN cannot arise from finite scales).
  y[i] = static_cast<int8_t>(max(-128, min(127, __float2int_rn(v))));
}
__device__ __forceinline__ void store(__half* y, int64_t i, float v) { y[i] = __float2half_rn(v); }
__device__ __forceinline__ void store(float* y, int64_t i, float v) { y[i] = v; }

template <typename O>
__global__ void epilogue_kernel(int64_t total, int64_t m, const int32_t* __restrict__ acc,
                                const float* __restrict__ alpha, const float* __restrict__ beta, bool relu,
                                O* __restrict__ y) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t c = i % m;
    float v = static_cast<float>(acc[i]) * alpha[c] + beta[c];
    if (relu) v = fmaxf(v, 0.f);
    store(y, i, v);
  }
}

template <typename O>
__global__ void direct_kernel(Int8ConvGeom g, const int8_t* __restrict__ x, const int8_t* __restrict__ w,
                              const float* __restrict__ alpha, const float* __restrict__ beta, bool relu,
                              O* __restrict__ y) {
  const int64_t total = g.n * g.oh * g.ow * g.m;
  const bool vec4 = g.c % 4 == 0 && reinterpret_cast<uintptr_t>(x) % 4 == 0 && reinterpret_cast<uintptr_t>(w) % 4 == 0;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t mo = i % g.m, ow = (i / g.m) % g.ow, oh = (i / (g.m * g.ow)) % g.oh, n = i / (g.m * g.ow * g.oh);
    int32_t acc = 0;
    for (int64_t r = 0; r < g.kh; ++r) {
      const int64_t ih = oh * g.sh - g.ph + r * g.dh;
      if (ih < 0 || ih >= g.h) continue;
      for (int64_t s = 0; s < g.kw; ++s) {
        const int64_t iw = ow * g.sw - g.pw + s * g.dw;
        if (iw < 0 || iw >= g.w) continue;
        const int8_t* xp = x + ((n * g.h + ih) * g.w + iw) * g.c;
        const int8_t* wp = w + ((mo * g.kh + r) * g.kw + s) * g.c;
        if (vec4) {  // four int8 products per __dp4a (C a multiple of 4: every row 4-byte aligned)
          const int* xv = reinterpret_cast<const int*>(xp);
          const int* wv = reinterpret_cast<const int*>(wp);
          for (int64_t c = 0; c < g.c / 4; ++c) acc = __dp4a(xv[c], wv[c], acc);
        } else {
          for (int64_t c = 0; c < g.c; ++c) acc += static_cast<int32_t>(xp[c]) * wp[c];
        }
      }
    }
    float v = static_cast<float>(acc) * alpha[mo] + beta[mo];
    if (relu) v = fmaxf(v, 0.f);
    store(y, i, v);
  }
}

}  // namespace

Status launch_int8_conv_prep(const Int8ConvScales& s, int64_t m, float* alpha, float* beta, cudaStream_t st) {
  if (s.z_scale && !s.y_scale) return Status::InvalidArgument("Int8Conv: a residual needs the conv's y_scale");
  const unsigned blocks = static_cast<unsigned>((m + 255) / 256);
  if (s.dt == DType::F32) {
    prep_kernel<float><<<blocks, 256, 0, st>>>(m, static_cast<const float*>(s.x_scale),
                                               static_cast<const float*>(s.w_scale), s.w_per_channel,
                                               static_cast<const float*>(s.bias), static_cast<const float*>(s.y_scale),
                                               static_cast<const float*>(s.z_scale),
                                               static_cast<const float*>(s.out_scale), alpha, beta);
  } else if (s.dt == DType::F16) {
    prep_kernel<__half><<<blocks, 256, 0, st>>>(m, static_cast<const __half*>(s.x_scale),
                                                static_cast<const __half*>(s.w_scale), s.w_per_channel,
                                                static_cast<const __half*>(s.bias),
                                                static_cast<const __half*>(s.y_scale),
                                                static_cast<const __half*>(s.z_scale),
                                                static_cast<const __half*>(s.out_scale), alpha, beta);
  } else {
    return Status::Unimplemented("Int8Conv: scales of dtype {} on the GPU", dtype_name(s.dt));
  }
  GPUOPT_CHECK_CALL(cudaGetLastError());
  return Status::Ok();
}

Status launch_int8_conv_epilogue(int64_t rows, int64_t m, const int32_t* acc, const float* alpha, const float* beta,
                                 bool relu, DType out_dt, void* y, cudaStream_t st) {
  const int64_t total = rows * m;
  if (total == 0) return Status::Ok();
  const unsigned blocks = kern::grid_for(total, 256);
  if (out_dt == DType::I8) {
    epilogue_kernel<<<blocks, 256, 0, st>>>(total, m, acc, alpha, beta, relu, static_cast<int8_t*>(y));
  } else if (out_dt == DType::F16) {
    epilogue_kernel<<<blocks, 256, 0, st>>>(total, m, acc, alpha, beta, relu, static_cast<__half*>(y));
  } else if (out_dt == DType::F32) {
    epilogue_kernel<<<blocks, 256, 0, st>>>(total, m, acc, alpha, beta, relu, static_cast<float*>(y));
  } else {
    return Status::Unimplemented("Int8Conv: output dtype {} on the GPU", dtype_name(out_dt));
  }
  GPUOPT_CHECK_CALL(cudaGetLastError());
  return Status::Ok();
}

Status launch_int8_conv_direct(const Int8ConvGeom& g, const int8_t* x, const int8_t* w, const float* alpha,
                               const float* beta, bool relu, DType out_dt, void* y, cudaStream_t st) {
  const int64_t total = g.n * g.oh * g.ow * g.m;
  if (total == 0) return Status::Ok();
  const unsigned blocks = kern::grid_for(total, 256);
  if (out_dt == DType::I8) {
    direct_kernel<<<blocks, 256, 0, st>>>(g, x, w, alpha, beta, relu, static_cast<int8_t*>(y));
  } else if (out_dt == DType::F16) {
    direct_kernel<<<blocks, 256, 0, st>>>(g, x, w, alpha, beta, relu, static_cast<__half*>(y));
  } else if (out_dt == DType::F32) {
    direct_kernel<<<blocks, 256, 0, st>>>(g, x, w, alpha, beta, relu, static_cast<float*>(y));
  } else {
    return Status::Unimplemented("Int8Conv: output dtype {} on the GPU", dtype_name(out_dt));
  }
  GPUOPT_CHECK_CALL(cudaGetLastError());
  return Status::Ok();
}

}  // namespace gpuopt::cuda
