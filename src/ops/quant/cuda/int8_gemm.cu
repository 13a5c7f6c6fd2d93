// Int8Gemm's epilogue and fallback GEMM (int8_gemm.h).
#include "ops/quant/cuda/int8_gemm.h"
#include "backends/cuda/kernels/kernel_common.cuh"
#include "core/cuda_check.h"

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

namespace gpuopt::cuda {
namespace {

__device__ __forceinline__ float to_f(float v) { return v; }
__device__ __forceinline__ float to_f(__half v) { return __half2float(v); }
__device__ __forceinline__ void from_f(float* p, float v) { *p = v; }
__device__ __forceinline__ void from_f(__half* p, float v) { *p = __float2half_rn(v); }
__device__ __forceinline__ void from_f(int8_t* p, float v) { *p = static_cast<int8_t>(v); }

// V elements of E as one aligned access (V * sizeof(E) bytes: 16 or 32 for the int32 sums).
template <typename E, int V>
struct alignas(sizeof(E) * V) Pack {
  E v[V];
};

__device__ __forceinline__ float activate(int act, float v) {
  switch (act) {
    case static_cast<int>(quant::GemmAct::kRelu): return fmaxf(v, 0.f);
    case static_cast<int>(quant::GemmAct::kGelu): return 0.5f * v * (1.f + erff(v * 0.70710678118654752f));
    case static_cast<int>(quant::GemmAct::kGeluTanh):
      return 0.5f * v * (1.f + tanhf(0.79788456080286536f * (v + 0.044715f * v * v * v)));
    default: return v;
  }
}

// Threads (x: V-column groups, y: rows): each holds its V columns' combined scale and bias in
// registers and walks rows. T: the scales', bias' and residual's type; O: the output's (T or
// int8, then v / y_scale rounded half to even and saturated, as QuantizeLinear).
template <typename T, typename O, int V>
__global__ void epilogue_kernel(int64_t m, int64_t n, const int32_t* __restrict__ acc, const T* a_scale,
                                const T* __restrict__ b_scale, bool per_channel, const T* __restrict__ bias, int act,
                                const T* __restrict__ residual, const T* y_scale, O* __restrict__ y) {
  const int64_t col = (blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x) * V;
  if (col >= n) return;
  const float sa = to_f(a_scale[0]);
  const float ys = y_scale ? to_f(y_scale[0]) : 1.f;
  float sc[V], bi[V];
#pragma unroll
  for (int j = 0; j < V; ++j) {
    sc[j] = sa * to_f(b_scale[per_channel ? col + j : 0]);
    bi[j] = bias ? to_f(bias[col + j]) : 0.f;
  }
  for (int64_t row = blockIdx.y * static_cast<int64_t>(blockDim.y) + threadIdx.y; row < m;
       row += static_cast<int64_t>(gridDim.y) * blockDim.y) {
    const int64_t at = row * n + col;
    const Pack<int32_t, V> a = *reinterpret_cast<const Pack<int32_t, V>*>(acc + at);
    Pack<T, V> r{};
    if (residual) r = *reinterpret_cast<const Pack<T, V>*>(residual + at);
    Pack<O, V> out;
#pragma unroll
    for (int j = 0; j < V; ++j) {
      float v = activate(act, fmaf(static_cast<float>(a.v[j]), sc[j], bi[j]));
      if (residual) v += to_f(r.v[j]);
      if (y_scale) v = fminf(fmaxf(rintf(v / ys), -128.f), 127.f);  // NaN -> -128 (fmaxf drops it)
      from_f(&out.v[j], v);
    }
    *reinterpret_cast<Pack<O, V>*>(y + at) = out;
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

template <typename T, typename O, int V>
void launch_epilogue(const Int8Epilogue& e, const int32_t* acc, O* y, cudaStream_t s) {
  const dim3 block(32, 8);
  const int64_t groups = e.n / V;
  const unsigned gx = static_cast<unsigned>((groups + 31) / 32);
  // About 4096 blocks in all, each thread then walks a few rows with its columns' scales in registers.
  const int64_t gy = std::min<int64_t>((e.m + 7) / 8, std::max<int64_t>(1, std::min<int64_t>(65535, 4096 / gx)));
  epilogue_kernel<T, O, V><<<dim3(gx, static_cast<unsigned>(gy)), block, 0, s>>>(
      e.m, e.n, acc, static_cast<const T*>(e.a_scale), static_cast<const T*>(e.b_scale), e.b_per_channel,
      static_cast<const T*>(e.bias), static_cast<int>(e.act), static_cast<const T*>(e.residual),
      static_cast<const T*>(e.y_scale), y);
}

bool aligned(const void* p, size_t bytes) { return p == nullptr || reinterpret_cast<uintptr_t>(p) % bytes == 0; }

template <typename T, typename O>
void launch_typed(const Int8Epilogue& e, const int32_t* acc, void* y, cudaStream_t s) {
  O* out = static_cast<O*>(y);
  // The widest V that divides n with every row's accesses aligned (n % V == 0 keeps each row's
  // start aligned once the base pointers are).
  auto fits = [&](int v) {
    return e.n % v == 0 && aligned(acc, 4 * v) && aligned(e.residual, sizeof(T) * v) && aligned(y, sizeof(O) * v);
  };
  if (fits(8))
    launch_epilogue<T, O, 8>(e, acc, out, s);
  else if (fits(4))
    launch_epilogue<T, O, 4>(e, acc, out, s);
  else
    launch_epilogue<T, O, 1>(e, acc, out, s);
}

}  // namespace

Status launch_int8_epilogue(const Int8Epilogue& e, const int32_t* acc, void* y, cudaStream_t s) {
  if (e.m == 0 || e.n == 0) return Status::Ok();
  const bool q = e.y_scale != nullptr;
  if (e.dt == DType::F32) {
    q ? launch_typed<float, int8_t>(e, acc, y, s) : launch_typed<float, float>(e, acc, y, s);
  } else if (e.dt == DType::F16) {
    q ? launch_typed<__half, int8_t>(e, acc, y, s) : launch_typed<__half, __half>(e, acc, y, s);
  } else {
    return Status::Unimplemented("Int8Gemm: float dtype {} on the GPU", dtype_name(e.dt));
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
