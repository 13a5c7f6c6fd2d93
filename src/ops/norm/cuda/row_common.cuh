// Shared by the row kernels of norm.cu and layernorm.cu: block sizes, warp and block reductions,
// the dispatch by row width and by float dtype. Device code, included by .cu files only.
#pragma once

#include "backends/cuda/kernels/kernel_common.cuh"
#include "core/status.h"
#include "core/dtype.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cfloat>
#include <cstdint>
#include <type_traits>

namespace gpuopt::cuda::rowk {

constexpr int kBlock = 256;

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
// Block-wide reductions; every thread gets the result.
__device__ inline float block_sum(float v) {
  __shared__ float sh[32];
  v = warp_sum(v);
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
  __syncthreads();
  if (lane == 0) sh[w] = v;
  __syncthreads();
  v = threadIdx.x < (blockDim.x >> 5) ? sh[lane] : 0.f;
  if (w == 0) v = warp_sum(v);
  if (threadIdx.x == 0) sh[0] = v;
  __syncthreads();
  return sh[0];
}
__device__ inline float block_max(float v) {
  __shared__ float sh[32];
  v = warp_max(v);
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
  __syncthreads();
  if (lane == 0) sh[w] = v;
  __syncthreads();
  v = threadIdx.x < (blockDim.x >> 5) ? sh[lane] : -FLT_MAX;
  if (w == 0) v = warp_max(v);
  if (threadIdx.x == 0) sh[0] = v;
  __syncthreads();
  return sh[0];
}

// Rows of up to 32 * N values: one warp per row, the row held in registers (N per lane), max and
// sum by shuffles, no shared memory and no block barriers. Attention scores ([B,H,S,S], S <= 1024)
// and hidden states (768, 1024) take this path: one block of 256 threads per short row left
// most threads idle and paid four barriers per reduction.
constexpr int kRowsPerBlock = 8;  // warps per block

// Calls f(std::integral_constant<int, N>) with the smallest N in {1,2,4,8,16,32} with 32 * N >=
// cols; false when cols > 1024.
template <typename F>
bool by_row_width(int64_t cols, F&& f) {
  if (cols <= 32) f(std::integral_constant<int, 1>{});
  else if (cols <= 64) f(std::integral_constant<int, 2>{});
  else if (cols <= 128) f(std::integral_constant<int, 4>{});
  else if (cols <= 256) f(std::integral_constant<int, 8>{});
  else if (cols <= 512) f(std::integral_constant<int, 16>{});
  else if (cols <= 1024) f(std::integral_constant<int, 32>{});
  else return false;
  return true;
}
inline unsigned warp_row_blocks(int64_t rows) { return static_cast<unsigned>((rows + kRowsPerBlock - 1) / kRowsPerBlock); }


template <typename F>
Status by_float(DType dt, F&& f) {
  switch (dt) {
    case DType::F32: f(float{}); return Status::Ok();
    case DType::F16: f(__half{}); return Status::Ok();
    case DType::BF16: f(__nv_bfloat16{}); return Status::Ok();
    default: return Status::Unimplemented("CUDA kernel does not support dtype {}", dtype_name(dt));
  }
}


}  // namespace gpuopt::cuda::rowk
