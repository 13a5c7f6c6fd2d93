// QuantizeLinear / DequantizeLinear kernels (see quant.h). The dtypes are runtime switches inside
// one kernel per direction: the kernels are memory bound and the build stays small.
#include "ops/quant/cuda/quant.h"
#include "backends/cuda/kernels/kernel_common.cuh"
#include "ops/quant/cuda/quant_math.h"
#include "core/cuda_check.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

namespace gpuopt::cuda {
namespace {

constexpr int kThreads = 256;
unsigned grid_for(int64_t n) { return kern::grid_for(n, kThreads); }

// Small dtype codes for the device.
enum Code : uint8_t { kF32, kF16, kBF16, kU8, kI8, kI32 };
Code code_of(DType t) {
  switch (t) {
    case DType::F16: return kF16;
    case DType::BF16: return kBF16;
    case DType::U8: return kU8;
    case DType::I8: return kI8;
    case DType::I32: return kI32;
    default: return kF32;
  }
}

__device__ __forceinline__ double load(const void* p, Code c, int64_t i) {
  switch (c) {
    case kF16: return __half2float(static_cast<const __half*>(p)[i]);
    case kBF16: return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
    case kU8: return static_cast<const uint8_t*>(p)[i];
    case kI8: return static_cast<const int8_t*>(p)[i];
    case kI32: return static_cast<const int32_t*>(p)[i];
    default: return static_cast<const float*>(p)[i];
  }
}

__host__ __device__ inline QFloat qfloat(Code c) { return c == kF16 ? QFloat::kF16 : c == kBF16 ? QFloat::kBF16 : QFloat::kF32; }

__global__ void quantize_kernel(const void* __restrict__ x, Code xc, const void* __restrict__ scale, Code sc,
                                const void* __restrict__ zp, void* __restrict__ y, Code yc, QuantDesc d) {
  const double lo = yc == kU8 ? 0.0 : -128.0, hi = yc == kU8 ? 255.0 : 127.0;
  // Per tensor (the activations of a QDQ model): one scale and zero point, no 64-bit index
  // division per element (which made these kernels compute bound).
  const double s0 = load(scale, sc, 0), z0 = zp ? load(zp, yc, 0) : 0.0;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < d.n; i += int64_t(gridDim.x) * blockDim.x) {
    double sv = s0, zv = z0;
    if (d.axis_dim != 1) {
      const int64_t p = (i / d.inner) % d.axis_dim;
      sv = load(scale, sc, p);
      zv = zp ? load(zp, yc, p) : 0.0;
    }
    const double v = quantize_value(load(x, xc, i), sv, qfloat(sc), zv, lo, hi);
    if (yc == kU8) static_cast<uint8_t*>(y)[i] = static_cast<uint8_t>(v);
    else static_cast<int8_t*>(y)[i] = static_cast<int8_t>(v);
  }
}

__global__ void dequantize_kernel(const void* __restrict__ x, Code xc, const void* __restrict__ scale, Code sc,
                                  const void* __restrict__ zp, void* __restrict__ y, Code yc, QuantDesc d) {
  const double s0 = load(scale, sc, 0), z0 = zp ? load(zp, xc, 0) : 0.0;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < d.n; i += int64_t(gridDim.x) * blockDim.x) {
    double sv = s0, zv = z0;
    if (d.axis_dim != 1) {
      const int64_t p = (i / d.inner) % d.axis_dim;
      sv = load(scale, sc, p);
      zv = zp ? load(zp, xc, p) : 0.0;
    }
    const float v = dequantize_value(load(x, xc, i), zv, sv);
    switch (yc) {
      case kF16: static_cast<__half*>(y)[i] = __float2half_rn(v); break;
      case kBF16: static_cast<__nv_bfloat16*>(y)[i] = __float2bfloat16_rn(v); break;
      default: static_cast<float*>(y)[i] = v;
    }
  }
}

// Per tensor with fp16 data, 8 elements per thread (16-byte fp16 loads or stores, 8-byte int8
// ones): what a QDQ CNN at --precision int8 runs around every quantized activation. Same results
// as the kernels above (quantize_value_f32 == quantize_value, quant_plan_test.cpp).
__global__ void quantize_f16x8_kernel(const uint4* __restrict__ x, const void* __restrict__ scale, Code sc,
                                      const void* __restrict__ zp, uint2* __restrict__ y, Code yc, int64_t n8) {
  const float s = static_cast<float>(load(scale, sc, 0)), z = zp ? static_cast<float>(load(zp, yc, 0)) : 0.f;
  const float lo = yc == kU8 ? 0.f : -128.f, hi = yc == kU8 ? 255.f : 127.f;
  const QFloat t = qfloat(sc);
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n8; i += int64_t(gridDim.x) * blockDim.x) {
    const uint4 v = x[i];
    const __half* h = reinterpret_cast<const __half*>(&v);
    uint2 out;
    uint8_t* o = reinterpret_cast<uint8_t*>(&out);
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const float q = quantize_value_f32(__half2float(h[j]), s, t, z, lo, hi);
      o[j] = yc == kU8 ? static_cast<uint8_t>(q) : static_cast<uint8_t>(static_cast<int8_t>(q));
    }
    y[i] = out;
  }
}

__global__ void dequantize_f16x8_kernel(const uint2* __restrict__ x, Code xc, const void* __restrict__ scale, Code sc,
                                        const void* __restrict__ zp, uint4* __restrict__ y, int64_t n8) {
  const double s = load(scale, sc, 0), z = zp ? load(zp, xc, 0) : 0.0;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n8; i += int64_t(gridDim.x) * blockDim.x) {
    const uint2 v = x[i];
    const uint8_t* b = reinterpret_cast<const uint8_t*>(&v);
    uint4 out;
    __half* h = reinterpret_cast<__half*>(&out);
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const double q = xc == kU8 ? static_cast<double>(b[j]) : static_cast<double>(static_cast<int8_t>(b[j]));
      h[j] = __float2half_rn(dequantize_value(q, z, s));
    }
    y[i] = out;
  }
}

bool aligned(const void* p, uintptr_t a) { return reinterpret_cast<uintptr_t>(p) % a == 0; }

bool is_float_code(DType t) { return t == DType::F32 || t == DType::F16 || t == DType::BF16; }

}  // namespace

Status launch_quantize(DType xt, DType st, DType yt, const void* x, const void* scale, const void* zp, void* y,
                       const QuantDesc& d, cudaStream_t s) {
  if (!is_float_code(xt) || !is_float_code(st) || (yt != DType::U8 && yt != DType::I8))
    return Status::Unimplemented("CUDA QuantizeLinear {} -> {} with {} scale", dtype_name(xt), dtype_name(yt), dtype_name(st));
  if (d.n == 0) return Status::Ok();
  if (xt == DType::F16 && d.axis_dim == 1 && d.n % 8 == 0 && aligned(x, 16) && aligned(y, 8)) {
    quantize_f16x8_kernel<<<grid_for(d.n / 8), kThreads, 0, s>>>(static_cast<const uint4*>(x), scale, code_of(st), zp,
                                                                 static_cast<uint2*>(y), code_of(yt), d.n / 8);
    GPUOPT_CHECK_CALL(cudaGetLastError());
    return Status::Ok();
  }
  quantize_kernel<<<grid_for(d.n), kThreads, 0, s>>>(x, code_of(xt), scale, code_of(st), zp, y, code_of(yt), d);
  GPUOPT_CHECK_CALL(cudaGetLastError());
  return Status::Ok();
}

Status launch_dequantize(DType xt, DType st, DType yt, const void* x, const void* scale, const void* zp, void* y,
                         const QuantDesc& d, cudaStream_t s) {
  if ((xt != DType::U8 && xt != DType::I8 && xt != DType::I32) || !is_float_code(st) || !is_float_code(yt))
    return Status::Unimplemented("CUDA DequantizeLinear {} -> {} with {} scale", dtype_name(xt), dtype_name(yt), dtype_name(st));
  if (d.n == 0) return Status::Ok();
  if ((xt == DType::I8 || xt == DType::U8) && yt == DType::F16 && d.axis_dim == 1 && d.n % 8 == 0 && aligned(x, 8) &&
      aligned(y, 16)) {
    dequantize_f16x8_kernel<<<grid_for(d.n / 8), kThreads, 0, s>>>(static_cast<const uint2*>(x), code_of(xt), scale,
                                                                   code_of(st), zp, static_cast<uint4*>(y), d.n / 8);
    GPUOPT_CHECK_CALL(cudaGetLastError());
    return Status::Ok();
  }
  dequantize_kernel<<<grid_for(d.n), kThreads, 0, s>>>(x, code_of(xt), scale, code_of(st), zp, y, code_of(yt), d);
  GPUOPT_CHECK_CALL(cudaGetLastError());
  return Status::Ok();
}

}  // namespace gpuopt::cuda
