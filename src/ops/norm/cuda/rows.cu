// TopK and Instance/GroupNormalization kernels (see rows.h).
#include "ops/index/cuda/index_math.h"
#include "ops/norm/cuda/rows.h"
#include "backends/cuda/kernels/float_convert.cuh"
#include "core/cuda_check.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

namespace gpuopt::cuda {
namespace {

constexpr int kBlock = 256;
constexpr int kTile = 1024;

using kern::ld;
using kern::st;

// ---- TopK ------------------------------------------------------------------------------------

// Key: float for the float types (exact for f16/bf16), int64 for the integers.
template <typename T> struct KeyOf { using type = float; };
template <> struct KeyOf<int32_t> { using type = int64_t; };
template <> struct KeyOf<int64_t> { using type = int64_t; };
template <typename T> __device__ __forceinline__ typename KeyOf<T>::type key(const T* p, int64_t i) {
  if constexpr (std::is_same_v<typename KeyOf<T>::type, float>) return ld(p, i);
  else return static_cast<int64_t>(p[i]);
}

// One block per line (grid-strided over lines); each element's rank is the number of elements
// before it, and ranks below k are the output positions.
template <typename T>
__global__ void topk_kernel(const T* __restrict__ x, T* __restrict__ vals, int64_t* __restrict__ idx, int64_t outer,
                            int64_t n, int64_t inner, int64_t k, bool largest) {
  using K = typename KeyOf<T>::type;
  __shared__ K tile[kTile];
  const int64_t lines = outer * inner;
  for (int64_t line = blockIdx.x; line < lines; line += gridDim.x) {
    const int64_t o = line / inner, in = line % inner;
    const int64_t base = o * n * inner + in;  // element j at base + j * inner
    for (int64_t first = 0; first < n; first += blockDim.x) {
      const int64_t i = first + threadIdx.x;
      const bool mine = i < n;
      const K ki = mine ? key(x, base + i * inner) : K{};
      int64_t rank = 0;
      for (int64_t t0 = 0; t0 < n; t0 += kTile) {
        const int64_t len = n - t0 < kTile ? n - t0 : kTile;
        __syncthreads();
        for (int64_t j = threadIdx.x; j < len; j += blockDim.x) tile[j] = key(x, base + (t0 + j) * inner);
        __syncthreads();
        if (mine)
          for (int64_t j = 0; j < len; ++j) rank += topk_before(tile[j], t0 + j, ki, i, largest);
      }
      if (mine && rank < k) {
        const int64_t at = (o * k + rank) * inner + in;
        if (vals) vals[at] = x[base + i * inner];
        if (idx) idx[at] = i;
      }
    }
  }
}

// ---- Group / Instance normalization ----------------------------------------------------------

__device__ float block_sum(float v) {
  __shared__ float sh[32];
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
  __syncthreads();
  if (lane == 0) sh[w] = v;
  __syncthreads();
  v = threadIdx.x < (blockDim.x >> 5) ? sh[lane] : 0.f;
  if (w == 0)
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  if (threadIdx.x == 0) sh[0] = v;
  __syncthreads();
  return sh[0];
}

// One block per (n, g): two-pass mean and biased variance in f32, then the affine.
template <typename T>
__global__ void groupnorm_kernel(const T* __restrict__ x, const T* __restrict__ scale, const T* __restrict__ bias,
                                 T* __restrict__ y, int64_t groups, int64_t cpg, int64_t spatial, bool sc_ch, bool bi_ch,
                                 float eps) {
  const int64_t ng = blockIdx.x, g = ng % groups;
  const int64_t len = cpg * spatial, base = ng * len;
  float s = 0.f;
  for (int64_t j = threadIdx.x; j < len; j += blockDim.x) s += ld(x, base + j);
  const float mean = block_sum(s) / static_cast<float>(len);
  float q = 0.f;
  for (int64_t j = threadIdx.x; j < len; j += blockDim.x) {
    const float d = ld(x, base + j) - mean;
    q += d * d;
  }
  const float inv = 1.f / sqrtf(block_sum(q) / static_cast<float>(len) + eps);
  for (int64_t j = threadIdx.x; j < len; j += blockDim.x) {
    const int64_t c = g * cpg + j / spatial;
    const float sc = ld(scale, sc_ch ? c : g), bi = ld(bias, bi_ch ? c : g);
    st(y, base + j, (ld(x, base + j) - mean) * inv * sc + bi);
  }
}

template <bool kInts, typename F>
Status by_type(DType dt, F&& f) {
  switch (dt) {
    case DType::F32: f(float{}); return Status::Ok();
    case DType::F16: f(__half{}); return Status::Ok();
    case DType::BF16: f(__nv_bfloat16{}); return Status::Ok();
    default: break;
  }
  if constexpr (kInts) {
    if (dt == DType::I32) return f(int32_t{}), Status::Ok();
    if (dt == DType::I64) return f(int64_t{}), Status::Ok();
  }
  return Status::Unimplemented("CUDA kernel on dtype {}", dtype_name(dt));
}

unsigned blocks_for(int64_t n) { return static_cast<unsigned>(n < (1 << 30) ? n : (1 << 30)); }

}  // namespace

Status launch_topk(DType dt, const void* x, void* values, int64_t* indices, int64_t outer, int64_t n, int64_t inner,
                   int64_t k, bool largest, cudaStream_t s) {
  if (outer * inner == 0 || k == 0) return Status::Ok();
  GPUOPT_RETURN_IF_ERROR(by_type<true>(dt, [&](auto tag) {
    using T = decltype(tag);
    topk_kernel<T><<<blocks_for(outer * inner), kBlock, 0, s>>>(static_cast<const T*>(x), static_cast<T*>(values),
                                                                 indices, outer, n, inner, k, largest);
  }));
  GPUOPT_CHECK_CALL(cudaGetLastError());
  return Status::Ok();
}

Status launch_groupnorm(DType dt, const void* x, const void* scale, const void* bias, void* y, int64_t n,
                        int64_t groups, int64_t cpg, int64_t spatial, bool sc_ch, bool bi_ch, float eps, cudaStream_t s) {
  if (n * groups == 0 || cpg * spatial == 0) return Status::Ok();
  if (n * groups >= (int64_t{1} << 31)) return Status::Unimplemented("{} groups exceed one CUDA grid", n * groups);
  GPUOPT_RETURN_IF_ERROR(by_type<false>(dt, [&](auto tag) {
    using T = decltype(tag);
    groupnorm_kernel<T><<<static_cast<unsigned>(n * groups), kBlock, 0, s>>>(
        static_cast<const T*>(x), static_cast<const T*>(scale), static_cast<const T*>(bias), static_cast<T*>(y), groups,
        cpg, spatial, sc_ch, bi_ch, eps);
  }));
  GPUOPT_CHECK_CALL(cudaGetLastError());
  return Status::Ok();
}

}  // namespace gpuopt::cuda
