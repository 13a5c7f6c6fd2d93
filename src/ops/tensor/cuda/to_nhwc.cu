// ToNhwc's kernel (to_nhwc.h). A thread reads its pixel's C values (adjacent threads read adjacent
// pixels of one channel plane: coalesced) and writes the pixel's cp channels; 4 channels of a
// 2-byte type go out as one 8-byte store (ResNet's stem input: C=3 padded to 4).
#include "ops/tensor/cuda/to_nhwc.h"
#include "ops/quant/cuda/quant_math.h"
#include "backends/cuda/kernels/float_convert.cuh"
#include "backends/cuda/kernels/kernel_common.cuh"
#include "core/cuda_check.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

namespace gpuopt::cuda {
namespace {

using kern::from_f;
using kern::grid_for;
using kern::to_f;

constexpr int kThreads = 256;

// The quantize round trip's scale (one value of Y's type) and zero point (one i8 or u8 value);
// scale null: none. Read by each thread from the constants' device memory (capture-safe).
struct RoundTrip {
  const void* scale = nullptr;
  const void* zp = nullptr;
  QFloat t = QFloat::kF32;
  bool zp_i8 = false;
};

struct RoundTripValues {
  bool on = false;
  float scale = 1, zp = 0, lo = 0, hi = 255;
  QFloat t = QFloat::kF32;
};

__device__ __forceinline__ RoundTripValues load(const RoundTrip& r) {
  RoundTripValues v;
  if (!r.scale) return v;
  v.on = true;
  v.t = r.t;
  v.scale = r.t == QFloat::kF16    ? __half2float(*static_cast<const __half*>(r.scale))
            : r.t == QFloat::kBF16 ? __bfloat162float(*static_cast<const __nv_bfloat16*>(r.scale))
                                   : *static_cast<const float*>(r.scale);
  if (r.zp) v.zp = r.zp_i8 ? static_cast<float>(*static_cast<const int8_t*>(r.zp)) : static_cast<float>(*static_cast<const uint8_t*>(r.zp));
  if (r.zp_i8) v.lo = -128.f, v.hi = 127.f;
  return v;
}

template <typename O>
__device__ __forceinline__ O convert(float v, const RoundTripValues& r) {
  const O o = from_f<O>(v);  // the Cast's rounding
  if (!r.on) return o;
  const float q = quantize_value_f32(to_f(o), r.scale, r.t, r.zp, r.lo, r.hi);
  return from_f<O>(dequantize_value(q, r.zp, r.scale));
}

template <typename I, typename O>
__global__ void to_nhwc_kernel(const I* __restrict__ x, O* __restrict__ y, int64_t pixels, int64_t hw, int c, int cp,
                               RoundTrip r) {
  const RoundTripValues rt = load(r);
  for (int64_t p = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; p < pixels;
       p += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t b = p / hw, q = p - b * hw;
    const I* src = x + b * c * hw + q;
    O* dst = y + p * cp;
    for (int ch = 0; ch < cp; ++ch) dst[ch] = ch < c ? convert<O>(to_f(src[ch * hw]), rt) : from_f<O>(0.0f);
  }
}

// cp == 4, 2-byte O: the pixel's 8 bytes in one store (Y's base is 256-byte aligned, so p * 8 is
// 8-byte aligned).
template <typename I, typename O>
__global__ void to_nhwc4_kernel(const I* __restrict__ x, O* __restrict__ y, int64_t pixels, int64_t hw, int c,
                                RoundTrip r) {
  const RoundTripValues rt = load(r);
  for (int64_t p = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; p < pixels;
       p += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t b = p / hw, q = p - b * hw;
    const I* src = x + b * c * hw + q;
    union {
      O v[4];
      uint2 u;
    } out;
#pragma unroll
    for (int ch = 0; ch < 4; ++ch) out.v[ch] = ch < c ? convert<O>(to_f(src[ch * hw]), rt) : from_f<O>(0.0f);
    reinterpret_cast<uint2*>(y)[p] = out.u;
  }
}

template <typename I, typename O>
void launch(const ToNhwcArgs& a, const RoundTrip& rt, cudaStream_t s) {
  const int64_t pixels = a.n * a.h * a.w;
  const int c = static_cast<int>(a.c);
  const unsigned grid = grid_for(pixels, kThreads);
  if constexpr (sizeof(O) == 2) {
    if (a.cp == 4 && reinterpret_cast<uintptr_t>(a.y) % 8 == 0) {
      to_nhwc4_kernel<I, O><<<grid, kThreads, 0, s>>>(static_cast<const I*>(a.x), static_cast<O*>(a.y), pixels, a.h * a.w, c, rt);
      return;
    }
  }
  to_nhwc_kernel<I, O><<<grid, kThreads, 0, s>>>(static_cast<const I*>(a.x), static_cast<O*>(a.y), pixels, a.h * a.w, c,
                                                  static_cast<int>(a.cp), rt);
}

template <typename I>
Status launch_out(const ToNhwcArgs& a, const RoundTrip& rt, cudaStream_t s) {
  switch (a.out_dt) {
    case DType::F32: launch<I, float>(a, rt, s); break;
    case DType::F16: launch<I, __half>(a, rt, s); break;
    case DType::BF16: launch<I, __nv_bfloat16>(a, rt, s); break;
    default: return Status::Unimplemented("ToNhwc to {}", dtype_name(a.out_dt));
  }
  return Status::Ok();
}

}  // namespace

Status launch_to_nhwc(const ToNhwcArgs& a, cudaStream_t s) {
  if (a.n * a.h * a.w == 0 || a.cp == 0) return Status::Ok();
  RoundTrip rt;
  if (a.scale) {
    rt.scale = a.scale;
    rt.zp = a.zero_point;
    rt.zp_i8 = a.zero_point && a.zp_dt == DType::I8;
    rt.t = a.out_dt == DType::F16 ? QFloat::kF16 : a.out_dt == DType::BF16 ? QFloat::kBF16 : QFloat::kF32;
  }
  switch (a.in_dt) {
    case DType::F32: GPUOPT_RETURN_IF_ERROR(launch_out<float>(a, rt, s)); break;
    case DType::F16: GPUOPT_RETURN_IF_ERROR(launch_out<__half>(a, rt, s)); break;
    case DType::BF16: GPUOPT_RETURN_IF_ERROR(launch_out<__nv_bfloat16>(a, rt, s)); break;
    default: return Status::Unimplemented("ToNhwc from {}", dtype_name(a.in_dt));
  }
  GPUOPT_CHECK_CALL(cudaGetLastError());
  return Status::Ok();
}

}  // namespace gpuopt::cuda
