// ToNhwc's kernel (to_nhwc.h). A thread reads its pixel's C values (adjacent threads read adjacent
// pixels of one channel plane: coalesced) and writes the pixel's cp channels; 4 channels of a
// 2-byte type go out as one 8-byte store (ResNet's stem input: C=3 padded to 4).
#include "ops/tensor/cuda/to_nhwc.h"
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

template <typename I, typename O>
__global__ void to_nhwc_kernel(const I* __restrict__ x, O* __restrict__ y, int64_t pixels, int64_t hw, int c, int cp) {
  for (int64_t p = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; p < pixels;
       p += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t b = p / hw, q = p - b * hw;
    const I* src = x + b * c * hw + q;
    O* dst = y + p * cp;
    for (int ch = 0; ch < cp; ++ch) dst[ch] = from_f<O>(ch < c ? to_f(src[ch * hw]) : 0.0f);
  }
}

// cp == 4, 2-byte O: the pixel's 8 bytes in one store (Y's base is 256-byte aligned, so p * 8 is
// 8-byte aligned).
template <typename I, typename O>
__global__ void to_nhwc4_kernel(const I* __restrict__ x, O* __restrict__ y, int64_t pixels, int64_t hw, int c) {
  for (int64_t p = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; p < pixels;
       p += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t b = p / hw, q = p - b * hw;
    const I* src = x + b * c * hw + q;
    union {
      O v[4];
      uint2 u;
    } out;
#pragma unroll
    for (int ch = 0; ch < 4; ++ch) out.v[ch] = from_f<O>(ch < c ? to_f(src[ch * hw]) : 0.0f);
    reinterpret_cast<uint2*>(y)[p] = out.u;
  }
}

template <typename I, typename O>
void launch(const ToNhwcArgs& a, cudaStream_t s) {
  const int64_t pixels = a.n * a.h * a.w;
  const int c = static_cast<int>(a.c);
  const unsigned grid = grid_for(pixels, kThreads);
  if constexpr (sizeof(O) == 2) {
    if (a.cp == 4 && reinterpret_cast<uintptr_t>(a.y) % 8 == 0) {
      to_nhwc4_kernel<I, O><<<grid, kThreads, 0, s>>>(static_cast<const I*>(a.x), static_cast<O*>(a.y), pixels, a.h * a.w, c);
      return;
    }
  }
  to_nhwc_kernel<I, O><<<grid, kThreads, 0, s>>>(static_cast<const I*>(a.x), static_cast<O*>(a.y), pixels, a.h * a.w, c,
                                                  static_cast<int>(a.cp));
}

template <typename I>
Status launch_out(const ToNhwcArgs& a, cudaStream_t s) {
  switch (a.out_dt) {
    case DType::F32: launch<I, float>(a, s); break;
    case DType::F16: launch<I, __half>(a, s); break;
    case DType::BF16: launch<I, __nv_bfloat16>(a, s); break;
    default: return Status::Unimplemented("ToNhwc to {}", dtype_name(a.out_dt));
  }
  return Status::Ok();
}

}  // namespace

Status launch_to_nhwc(const ToNhwcArgs& a, cudaStream_t s) {
  if (a.n * a.h * a.w == 0 || a.cp == 0) return Status::Ok();
  switch (a.in_dt) {
    case DType::F32: GPUOPT_RETURN_IF_ERROR(launch_out<float>(a, s)); break;
    case DType::F16: GPUOPT_RETURN_IF_ERROR(launch_out<__half>(a, s)); break;
    case DType::BF16: GPUOPT_RETURN_IF_ERROR(launch_out<__nv_bfloat16>(a, s)); break;
    default: return Status::Unimplemented("ToNhwc from {}", dtype_name(a.in_dt));
  }
  GPUOPT_CHECK_CALL(cudaGetLastError());
  return Status::Ok();
}

}  // namespace gpuopt::cuda
