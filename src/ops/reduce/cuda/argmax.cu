// ArgMax / ArgMin on the GPU, with the CPU reference's sequential rule (arg_scan.cpp): the
// running best starts at index 0 and a later element replaces it only when strictly better
// (or equal, with select_last_index), so NaN is never chosen unless it is element 0. Rows along
// the innermost axis (a classifier's or LM head's last axis) take a warp each: each lane scans
// a strided part skipping NaN and the warp combines (value, index) pairs with the same tie rule;
// element 0 being NaN (or every element) gives 0, as the sequential loop. Other axes take a
// thread per output, reading consecutive outputs' elements side by side.
#include "ops/reduce/cuda/argmax.h"
#include "backends/cuda/kernels/float_convert.cuh"
#include "core/cuda_check.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <type_traits>

namespace gpuopt::cuda {
namespace {

template <typename T>
__device__ __forceinline__ auto key(T v) {
  if constexpr (std::is_integral_v<T>)
    return v;
  else
    return kern::to_f(v);
}

template <typename K>
__device__ __forceinline__ bool is_nan(K v) {
  if constexpr (std::is_floating_point_v<K>)
    return isnan(v);
  else
    return false;
}

// Whether (v, i) beats (b, bi) for the arg op; b of index -1 is empty.
template <bool kMax, typename K>
__device__ __forceinline__ bool better(K v, int64_t i, K b, int64_t bi, bool last) {
  if (bi < 0) return i >= 0;
  if (i < 0) return false;
  if (kMax ? v > b : v < b) return true;
  return v == b && (last ? i > bi : i < bi);
}

template <bool kMax, typename T>
__global__ void arg_rows(const T* __restrict__ x, int64_t* __restrict__ y, int64_t rows, int64_t n, bool last) {
  const int64_t row = blockIdx.x * int64_t(blockDim.x / 32) + (threadIdx.x >> 5);
  if (row >= rows) return;
  const int lane = threadIdx.x & 31;
  const T* p = x + row * n;
  using K = decltype(key(p[0]));
  K best{};
  int64_t bi = -1;
  for (int64_t k = lane; k < n; k += 32) {
    const K v = key(p[k]);
    if (is_nan(v)) continue;
    if (better<kMax>(v, k, best, bi, last)) {
      best = v;
      bi = k;
    }
  }
  for (int off = 16; off > 0; off >>= 1) {
    const K ov = __shfl_down_sync(0xffffffffu, best, off);
    const int64_t oi = __shfl_down_sync(0xffffffffu, bi, off);
    if (better<kMax>(ov, oi, best, bi, last)) {
      best = ov;
      bi = oi;
    }
  }
  if (lane == 0) y[row] = (bi < 0 || is_nan(key(p[0]))) ? 0 : bi;
}

template <bool kMax, typename T>
__global__ void arg_strided(const T* __restrict__ x, int64_t* __restrict__ y, int64_t outer, int64_t n, int64_t inner,
                            bool last) {
  const int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (t >= outer * inner) return;
  const int64_t o = t / inner, i = t % inner;
  const T* p = x + o * n * inner + i;
  auto b = key(p[0]);
  int64_t best = 0;
  for (int64_t k = 1; k < n; ++k) {
    const auto v = key(p[k * inner]);
    if (kMax ? (last ? v >= b : v > b) : (last ? v <= b : v < b)) {
      b = v;
      best = k;
    }
  }
  y[t] = best;
}

template <bool kMax, typename T>
void launch_typed(const void* x, int64_t* y, int64_t outer, int64_t n, int64_t inner, bool last, cudaStream_t s) {
  const T* px = static_cast<const T*>(x);
  if (inner == 1) {
    constexpr int kWarps = 8;
    arg_rows<kMax, T><<<static_cast<unsigned>((outer + kWarps - 1) / kWarps), 32 * kWarps, 0, s>>>(px, y, outer, n, last);
  } else {
    const int64_t total = outer * inner;
    arg_strided<kMax, T><<<static_cast<unsigned>((total + 255) / 256), 256, 0, s>>>(px, y, outer, n, inner, last);
  }
}

template <bool kMax>
Status launch_for(DType dt, const void* x, int64_t* y, int64_t outer, int64_t n, int64_t inner, bool last,
                  cudaStream_t s) {
  switch (dt) {
    case DType::F32: launch_typed<kMax, float>(x, y, outer, n, inner, last, s); break;
    case DType::F16: launch_typed<kMax, __half>(x, y, outer, n, inner, last, s); break;
    case DType::BF16: launch_typed<kMax, __nv_bfloat16>(x, y, outer, n, inner, last, s); break;
    case DType::I32: launch_typed<kMax, int32_t>(x, y, outer, n, inner, last, s); break;
    case DType::I64: launch_typed<kMax, int64_t>(x, y, outer, n, inner, last, s); break;
    default: return Status::Unimplemented("ArgMax/ArgMin in {}", dtype_name(dt));
  }
  GPUOPT_CHECK_CALL(cudaGetLastError());
  return Status::Ok();
}

}  // namespace

Status launch_arg(bool max, DType dt, const void* x, int64_t* y, int64_t outer, int64_t n, int64_t inner, bool last,
                  cudaStream_t s) {
  if (outer * inner == 0) return Status::Ok();
  if (outer * inner > (int64_t{1} << 31) * 32) return Status::Unimplemented("ArgMax/ArgMin over {} outputs", outer * inner);
  return max ? launch_for<true>(dt, x, y, outer, n, inner, last, s) : launch_for<false>(dt, x, y, outer, n, inner, last, s);
}

}  // namespace gpuopt::cuda
