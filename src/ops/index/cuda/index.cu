// Index and creation kernels (see index_ops.h). Grid-stride loops; data movement by element size.
#include "ops/index/cuda/index_math.h"
#include "backends/cuda/kernels/by_size.cuh"
#include "backends/cuda/kernels/kernel_common.cuh"
#include "core/cuda_check.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

namespace gpuopt::cuda {
namespace {

constexpr int kThreads = 256;
unsigned grid_for(int64_t n) { return kern::grid_for(n, kThreads); }
#define GRID_LOOP(i, n) \
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < (n); i += int64_t(gridDim.x) * blockDim.x)

// ---- Trilu -----------------------------------------------------------------------------------

template <typename E>
__global__ void trilu_kernel(const E* __restrict__ in, E* __restrict__ out, int64_t n, int64_t rows, int64_t cols,
                             int64_t k, bool upper) {
  GRID_LOOP(e, n) {
    const int64_t j = e % cols, i = (e / cols) % rows;
    const bool keep = upper ? j >= i + k : j <= i + k;
    out[e] = keep ? in[e] : E{};
  }
}

// ---- GatherElements / GatherND (offsets in index_math.h) ---------------------------------------

template <typename E>
__global__ void gather_elements_kernel(const E* __restrict__ data, const void* __restrict__ idx, bool i64,
                                       E* __restrict__ out, ElementsDesc d) {
  GRID_LOOP(e, d.numel) {
    const int64_t off = elements_offset(d, idx, i64, e);
    out[e] = off < 0 ? E{} : data[off];
  }
}

template <typename E>
__global__ void gather_nd_kernel(const E* __restrict__ data, const void* __restrict__ idx, bool i64,
                                 E* __restrict__ out, NdDesc d) {
  const int64_t n = d.batches * d.tuples * d.slice;
  GRID_LOOP(i, n) {
    const int64_t off = nd_offset(d, idx, i64, i / d.slice);
    out[i] = off < 0 ? E{} : data[off + i % d.slice];
  }
}

// ---- Scatter combine -------------------------------------------------------------------------

template <typename T> __device__ __forceinline__ float to_f(T v) { return static_cast<float>(v); }
template <> __device__ __forceinline__ float to_f<__half>(__half v) { return __half2float(v); }
template <> __device__ __forceinline__ float to_f<__nv_bfloat16>(__nv_bfloat16 v) { return __bfloat162float(v); }

// The CPU reference's combine: f16/bf16 in float rounded back, others in their own type;
// max/min as std::max/std::min (the first argument wins unless the second is strictly better).
template <typename T>
__device__ __forceinline__ T combine(T a, T b, ScatterReduction r) {
  if constexpr (std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>) {
    const float x = to_f(a), y = to_f(b);
    float v = y;
    switch (r) {
      case ScatterReduction::kAdd: v = x + y; break;
      case ScatterReduction::kMul: v = x * y; break;
      case ScatterReduction::kMax: v = x < y ? y : x; break;
      case ScatterReduction::kMin: v = y < x ? y : x; break;
      default: break;
    }
    if constexpr (std::is_same_v<T, __half>) return __float2half_rn(v);
    else return __float2bfloat16_rn(v);
  } else {
    switch (r) {
      case ScatterReduction::kAdd: return static_cast<T>(a + b);
      case ScatterReduction::kMul: return static_cast<T>(a * b);
      case ScatterReduction::kMax: return a < b ? b : a;
      case ScatterReduction::kMin: return b < a ? b : a;
      default: return b;
    }
  }
}

template <size_t N> struct Bits;
template <> struct Bits<2> { using type = unsigned short; };
template <> struct Bits<4> { using type = unsigned int; };
template <> struct Bits<8> { using type = unsigned long long; };

// *p = combine(*p, v) atomically (compare-and-swap on the element's bits).
template <typename T>
__device__ void atomic_combine(T* p, T v, ScatterReduction r) {
  if (r == ScatterReduction::kNone) {
    *p = v;
    return;
  }
  if constexpr (sizeof(T) == 2 || sizeof(T) == 4 || sizeof(T) == 8) {
    using U = typename Bits<sizeof(T)>::type;
    U* addr = reinterpret_cast<U*>(p);
    U old = *addr, assumed;
    do {
      assumed = old;
      T cur;
      memcpy(&cur, &assumed, sizeof(T));
      const T next = combine(cur, v, r);
      U nb;
      memcpy(&nb, &next, sizeof(T));
      old = atomicCAS(addr, assumed, nb);
    } while (old != assumed);
  }
}

template <typename T>
__global__ void scatter_elements_kernel(const void* __restrict__ idx, bool i64, const T* __restrict__ upd, T* out,
                                        ElementsDesc d, ScatterReduction r) {
  GRID_LOOP(e, d.numel) {
    const int64_t off = elements_offset(d, idx, i64, e);
    if (off >= 0) atomic_combine(out + off, upd[e], r);
  }
}

template <typename T>
__global__ void scatter_nd_kernel(const void* __restrict__ idx, bool i64, const T* __restrict__ upd, T* out, NdDesc d,
                                  ScatterReduction r) {
  const int64_t n = d.batches * d.tuples * d.slice;
  GRID_LOOP(i, n) {
    const int64_t off = nd_offset(d, idx, i64, i / d.slice);
    if (off >= 0) atomic_combine(out + off + i % d.slice, upd[i], r);
  }
}

// Typed for reductions, by size for plain assignment.
template <typename F>
Status scatter_dispatch(DType dt, ScatterReduction r, F&& f) {
  if (r == ScatterReduction::kNone) return by_size(dtype_size(dt), f);
  switch (dt) {
    case DType::F32: f(float{}); return Status::Ok();
    case DType::F16: f(__half{}); return Status::Ok();
    case DType::BF16: f(__nv_bfloat16{}); return Status::Ok();
    case DType::I32: f(int32_t{}); return Status::Ok();
    case DType::I64: f(int64_t{}); return Status::Ok();
    default: return Status::Unimplemented("CUDA scatter reduction on dtype {}", dtype_name(dt));
  }
}

// ---- Range, fill, Cosh -----------------------------------------------------------------------

template <typename T>
__global__ void range_int_kernel(T* out, int64_t n, int64_t start, int64_t delta) {
  GRID_LOOP(i, n) out[i] = static_cast<T>(start + i * delta);
}

using kern::from_d;
using kern::to_d;

// One thread: each value depends on the rounded previous one.
template <typename T>
__global__ void range_float_kernel(T* out, int64_t n, double start, double delta) {
  T v = from_d<T>(start);
  for (int64_t i = 0; i < n; ++i) {
    out[i] = v;
    v = from_d<T>(__dadd_rn(to_d(v), delta));
  }
}
__global__ void range_double_kernel(double* out, int64_t n, double start, double delta) {
  double v = start;
  for (int64_t i = 0; i < n; ++i) {
    out[i] = v;
    v = __dadd_rn(v, delta);
  }
}

template <typename E>
__global__ void fill_kernel(E* out, int64_t n, E v) {
  GRID_LOOP(i, n) out[i] = v;
}

template <typename T>
__global__ void cosh_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t n) {
  GRID_LOOP(i, n) y[i] = from_d<T>(cosh(to_d(x[i])));
}

template <typename F>
Status float_dispatch(DType dt, F&& f) {
  switch (dt) {
    case DType::F32: f(float{}); return Status::Ok();
    case DType::F16: f(__half{}); return Status::Ok();
    case DType::BF16: f(__nv_bfloat16{}); return Status::Ok();
    default: return Status::Unimplemented("CUDA kernel on dtype {}", dtype_name(dt));
  }
}

}  // namespace

Status launch_trilu(size_t es, const void* in, void* out, int64_t mats, int64_t rows, int64_t cols, int64_t k,
                    bool upper, cudaStream_t s) {
  const int64_t n = mats * rows * cols;
  if (n == 0) return Status::Ok();
  GPUOPT_RETURN_IF_ERROR(by_size(es, [&](auto tag) {
    using E = decltype(tag);
    trilu_kernel<E><<<grid_for(n), kThreads, 0, s>>>(static_cast<const E*>(in), static_cast<E*>(out), n, rows, cols,
                                                      k, upper);
  }));
  GPUOPT_CHECK_CALL(cudaGetLastError());
  return Status::Ok();
}

Status launch_gather_elements(size_t es, const void* data, const void* idx, bool i64, void* out, const ElementsDesc& d,
                              cudaStream_t s) {
  if (d.numel == 0) return Status::Ok();
  GPUOPT_RETURN_IF_ERROR(by_size(es, [&](auto tag) {
    using E = decltype(tag);
    gather_elements_kernel<E><<<grid_for(d.numel), kThreads, 0, s>>>(static_cast<const E*>(data), idx, i64,
                                                                      static_cast<E*>(out), d);
  }));
  GPUOPT_CHECK_CALL(cudaGetLastError());
  return Status::Ok();
}

Status launch_gather_nd(size_t es, const void* data, const void* idx, bool i64, void* out, const NdDesc& d,
                        cudaStream_t s) {
  const int64_t n = d.batches * d.tuples * d.slice;
  if (n == 0) return Status::Ok();
  GPUOPT_RETURN_IF_ERROR(by_size(es, [&](auto tag) {
    using E = decltype(tag);
    gather_nd_kernel<E><<<grid_for(n), kThreads, 0, s>>>(static_cast<const E*>(data), idx, i64, static_cast<E*>(out), d);
  }));
  GPUOPT_CHECK_CALL(cudaGetLastError());
  return Status::Ok();
}

Status launch_scatter_elements(DType dt, ScatterReduction r, const void* idx, bool i64, const void* upd, void* out,
                               const ElementsDesc& d, cudaStream_t s) {
  if (d.numel == 0) return Status::Ok();
  GPUOPT_RETURN_IF_ERROR(scatter_dispatch(dt, r, [&](auto tag) {
    using T = decltype(tag);
    scatter_elements_kernel<T><<<grid_for(d.numel), kThreads, 0, s>>>(idx, i64, static_cast<const T*>(upd),
                                                                       static_cast<T*>(out), d, r);
  }));
  GPUOPT_CHECK_CALL(cudaGetLastError());
  return Status::Ok();
}

Status launch_scatter_nd(DType dt, ScatterReduction r, const void* idx, bool i64, const void* upd, void* out,
                         const NdDesc& d, cudaStream_t s) {
  const int64_t n = d.batches * d.tuples * d.slice;
  if (n == 0) return Status::Ok();
  GPUOPT_RETURN_IF_ERROR(scatter_dispatch(dt, r, [&](auto tag) {
    using T = decltype(tag);
    scatter_nd_kernel<T><<<grid_for(n), kThreads, 0, s>>>(idx, i64, static_cast<const T*>(upd), static_cast<T*>(out),
                                                           d, r);
  }));
  GPUOPT_CHECK_CALL(cudaGetLastError());
  return Status::Ok();
}

Status launch_range(DType dt, double start_f, double delta_f, int64_t start_i, int64_t delta_i, void* out, int64_t n,
                    cudaStream_t s) {
  if (n == 0) return Status::Ok();
  switch (dt) {
    case DType::I32: range_int_kernel<int32_t><<<grid_for(n), kThreads, 0, s>>>(static_cast<int32_t*>(out), n, start_i, delta_i); break;
    case DType::I64: range_int_kernel<int64_t><<<grid_for(n), kThreads, 0, s>>>(static_cast<int64_t*>(out), n, start_i, delta_i); break;
    case DType::F64: range_double_kernel<<<1, 1, 0, s>>>(static_cast<double*>(out), n, start_f, delta_f); break;
    default:
      GPUOPT_RETURN_IF_ERROR(float_dispatch(dt, [&](auto tag) {
        using T = decltype(tag);
        range_float_kernel<T><<<1, 1, 0, s>>>(static_cast<T*>(out), n, start_f, delta_f);
      }));
  }
  GPUOPT_CHECK_CALL(cudaGetLastError());
  return Status::Ok();
}

Status launch_fill(size_t es, const void* pattern, void* out, int64_t n, cudaStream_t s) {
  if (n == 0) return Status::Ok();
  GPUOPT_RETURN_IF_ERROR(by_size(es, [&](auto tag) {
    using E = decltype(tag);
    E v;
    memcpy(&v, pattern, sizeof(E));
    fill_kernel<E><<<grid_for(n), kThreads, 0, s>>>(static_cast<E*>(out), n, v);
  }));
  GPUOPT_CHECK_CALL(cudaGetLastError());
  return Status::Ok();
}

Status launch_cosh(DType dt, const void* x, void* y, int64_t n, cudaStream_t s) {
  if (n == 0) return Status::Ok();
  GPUOPT_RETURN_IF_ERROR(float_dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    cosh_kernel<T><<<grid_for(n), kThreads, 0, s>>>(static_cast<const T*>(x), static_cast<T*>(y), n);
  }));
  GPUOPT_CHECK_CALL(cudaGetLastError());
  return Status::Ok();
}

}  // namespace gpuopt::cuda
