// Int8Gemm's epilogue and fallback GEMM (int8_gemm.h).
#include "ops/quant/cuda/int8_gemm.h"
#include "backends/cuda/kernels/kernel_common.cuh"
#include "core/cuda_check.h"

#include <cuda_fp16.h>
#include <cuda_runtime.h>

namespace gpuopt::cuda {
namespace {

__device__ __forceinline__ float ld(const float* p, int64_t i) { return p[i]; }
__device__ __forceinline__ float ld(const __half* p, int64_t i) { return __half2float(p[i]); }
__device__ __forceinline__ void st(float* p, int64_t i, float v) { p[i] = v; }
__device__ __forceinline__ void st(__half* p, int64_t i, float v) { p[i] = __float2half_rn(v); }

template <typename T>
__global__ void epilogue_kernel(int64_t m, int64_t n, const int32_t* __restrict__ acc, const T* a_scale,
                                const T* __restrict__ b_scale, bool per_channel, const T* __restrict__ bias, bool relu,
                                T* __restrict__ y) {
  const float sa = ld(a_scale, 0);
  const int64_t total = m * n;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t j = i % n;
    float v = static_cast<float>(acc[i]) * (sa * ld(b_scale, per_channel ? j : 0));
    if (bias) v += ld(bias, j);
    if (relu) v = fmaxf(v, 0.f);
    st(y, i, v);
  }
}

// One thread per output; 16x16 tiles of A and B staged through shared memory.
__global__ void gemm_simple_kernel(int64_t m, int64_t n, int64_t k, const int8_t* __restrict__ a,
                                   const int8_t* __restrict__ b, int32_t* __restrict__ acc) {
  __shared__ int8_t ta[16][17], tb[16][17];
  const int64_t row = blockIdx.y * 16 + threadIdx.y, col = blockIdx.x * 16 + threadIdx.x;
  int32_t sum = 0;
  for (int64_t k0 = 0; k0 < k; k0 += 16) {
    const int64_t ka = k0 + threadIdx.x;
    ta[threadIdx.y][threadIdx.x] = row < m && ka < k ? a[row * k + ka] : 0;
    const int64_t brow = blockIdx.x * 16 + threadIdx.y;
    tb[threadIdx.y][threadIdx.x] = brow < n && ka < k ? b[brow * k + ka] : 0;
    __syncthreads();
    for (int q = 0; q < 16; ++q) sum += static_cast<int32_t>(ta[threadIdx.y][q]) * tb[threadIdx.x][q];
    __syncthreads();
  }
  if (row < m && col < n) acc[row * n + col] = sum;
}

}  // namespace

Status launch_int8_epilogue(const Int8Epilogue& e, const int32_t* acc, void* y, cudaStream_t s) {
  const int64_t total = e.m * e.n;
  if (total == 0) return Status::Ok();
  const unsigned blocks = kern::grid_for(total, 256);
  if (e.dt == DType::F32) {
    epilogue_kernel<float><<<blocks, 256, 0, s>>>(e.m, e.n, acc, static_cast<const float*>(e.a_scale),
                                                  static_cast<const float*>(e.b_scale), e.b_per_channel,
                                                  static_cast<const float*>(e.bias), e.relu, static_cast<float*>(y));
  } else if (e.dt == DType::F16) {
    epilogue_kernel<__half><<<blocks, 256, 0, s>>>(e.m, e.n, acc, static_cast<const __half*>(e.a_scale),
                                                   static_cast<const __half*>(e.b_scale), e.b_per_channel,
                                                   static_cast<const __half*>(e.bias), e.relu, static_cast<__half*>(y));
  } else {
    return Status::Unimplemented("Int8Gemm: output dtype {} on the GPU", dtype_name(e.dt));
  }
  GPUOPT_CHECK_CALL(cudaGetLastError());
  return Status::Ok();
}

Status launch_int8_gemm_simple(int64_t m, int64_t n, int64_t k, const int8_t* a, const int8_t* b, int32_t* acc,
                               cudaStream_t s) {
  if (m == 0 || n == 0) return Status::Ok();
  if ((m + 15) / 16 > 65535) return Status::Unimplemented("Int8Gemm fallback: {} rows exceed its grid", m);
  const dim3 grid(static_cast<unsigned>((n + 15) / 16), static_cast<unsigned>((m + 15) / 16));
  gemm_simple_kernel<<<grid, dim3(16, 16), 0, s>>>(m, n, k, a, b, acc);
  GPUOPT_CHECK_CALL(cudaGetLastError());
  return Status::Ok();
}

}  // namespace gpuopt::cuda
