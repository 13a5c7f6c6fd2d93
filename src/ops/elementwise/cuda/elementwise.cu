// Unary ops and Cast on the GPU (see elementwise.h); the broadcasting binary ops are in
// binary.cu. One kernel per element type with the op as a uniform runtime switch: memory-bound
// code pays nothing for the branch, and the build compiles one instantiation per type instead of
// ops x types. Contiguous data moves 16 bytes per access (8 elements at most) when both pointers
// are aligned, with a scalar tail; the per-element math is the same either way
// (elementwise_math.cuh), so results do not depend on the path.
#include "backends/cuda/elementwise.h"
#include "ops/elementwise/cuda/elementwise_plan.h"
#include "ops/elementwise/cuda/elementwise_math.cuh"
#include "backends/cuda/kernels/kernel_common.cuh"
#include "core/cuda_check.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

namespace gpuopt::cuda {
namespace {

using namespace ew;  // NOLINT: the kernels' element helpers

// V elements per access, then the n % V tail one per thread. V = 1 is the scalar kernel for
// misaligned pointers. `op` gives the op: a UnaryOp read at run time, or an OpConst fixing it at
// compile time for the hot activations (GELU's erf alone is ~15 instructions; with the op's
// switch in the loop the erf GELU of BERT-base ran at 2.5x its bytes).
template <UnaryOp OP>
struct OpConst {
  __device__ constexpr operator UnaryOp() const { return OP; }
};

template <typename T, int V, typename OpT>
__global__ void unary_kernel(OpT op, const T* __restrict__ x, T* __restrict__ y, int64_t n, UnaryParams p) {
  const int64_t tid = blockIdx.x * int64_t(blockDim.x) + threadIdx.x, stride = int64_t(gridDim.x) * blockDim.x;
  const int64_t nv = n / V;
  for (int64_t v = tid; v < nv; v += stride) {
    const Pack<T, V> in = load_pack<T, V>(x, v * V);
    Pack<T, V> out;
#pragma unroll
    for (int e = 0; e < V; ++e) out.v[e] = unary_elem(static_cast<UnaryOp>(op), in.v[e], p);
    store_pack<T, V>(y, v * V, out);
  }
  for (int64_t i = nv * V + tid; i < n; i += stride) y[i] = unary_elem(static_cast<UnaryOp>(op), x[i], p);
}

template <typename T>
__global__ void predicate_kernel(UnaryOp op, const T* __restrict__ x, bool* __restrict__ y, int64_t n, UnaryParams p) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const auto v = to_math(x[i]);
    bool r = false;
    if constexpr (IsFloat<T>::value) {
      if (op == UnaryOp::kIsNaN) r = isnan(v);
      else if (op == UnaryOp::kIsInf) r = isinf(v) && ((v > 0 && p.alpha != 0.f) || (v < 0 && p.beta != 0.f));
    }
    if (op == UnaryOp::kNot) r = !(v != 0);
    y[i] = r;
  }
}

template <typename S, typename D, int V>
__global__ void cast_kernel(const S* __restrict__ x, D* __restrict__ y, int64_t n) {
  const int64_t tid = blockIdx.x * int64_t(blockDim.x) + threadIdx.x, stride = int64_t(gridDim.x) * blockDim.x;
  const int64_t nv = n / V;
  for (int64_t v = tid; v < nv; v += stride) {
    const Pack<S, V> in = load_pack<S, V>(x, v * V);
    Pack<D, V> out;
#pragma unroll
    for (int e = 0; e < V; ++e) out.v[e] = cast_elem<S, D>(in.v[e]);
    store_pack<D, V>(y, v * V, out);
  }
  for (int64_t i = nv * V + tid; i < n; i += stride) y[i] = cast_elem<S, D>(x[i]);
}

constexpr int kThreads = 256;
unsigned grid_for(int64_t n) { return kern::grid_for(n, kThreads); }

}  // namespace

bool binary_op_is_comparison(BinaryOp op) { return op >= BinaryOp::kEqual; }

Result<BroadcastDesc> make_broadcast(const Shape& a, const Shape& b) {
  BroadcastDesc d;
  const int rank = static_cast<int>(std::max(a.size(), b.size()));
  if (rank > kMaxRank) return Status::Unimplemented("broadcast of rank {} exceeds {}", rank, kMaxRank);
  d.rank = rank;
  int64_t sa = 1, sb = 1;
  d.numel = 1;
  for (int k = rank - 1; k >= 0; --k) {
    const int ka = k - (rank - static_cast<int>(a.size())), kb = k - (rank - static_cast<int>(b.size()));
    const int64_t da = ka >= 0 ? a[ka] : 1, db = kb >= 0 ? b[kb] : 1;
    if (da != db && da != 1 && db != 1)
      return Status::InvalidArgument("shapes {} and {} do not broadcast", shape_to_string(a), shape_to_string(b));
    const int64_t out = da == 1 ? db : da;
    d.out_dims[k] = out;
    d.a_strides[k] = da == 1 ? 0 : sa;
    d.b_strides[k] = db == 1 ? 0 : sb;
    sa *= da;
    sb *= db;
    d.numel *= out;
  }
  d.a_contiguous = sa == d.numel;
  d.b_contiguous = sb == d.numel;
  d.b_scalar = sb == 1;
  return d;
}

Status launch_unary(UnaryOp op, DType dt, const void* x, void* y, int64_t n, const UnaryParams& p, cudaStream_t s) {
  if (n == 0) return Status::Ok();
  const bool predicate = op == UnaryOp::kIsNaN || op == UnaryOp::kIsInf || op == UnaryOp::kNot;
  GPUOPT_RETURN_IF_ERROR(dispatch_device(dt, [&](auto tag) {
    using T = decltype(tag);
    constexpr int V = vec_width(sizeof(T));
    const T* xt = static_cast<const T*>(x);
    if (predicate) {
      predicate_kernel<T><<<grid_for(n), kThreads, 0, s>>>(op, xt, static_cast<bool*>(y), n, p);
    } else if (aligned_to(x, V * sizeof(T)) && aligned_to(y, V * sizeof(T))) {
      T* yt = static_cast<T*>(y);
      const unsigned g = grid_for(n / V);
      if constexpr (IsFloat<T>::value) {
        switch (op) {
          case UnaryOp::kGelu: unary_kernel<T, V><<<g, kThreads, 0, s>>>(OpConst<UnaryOp::kGelu>{}, xt, yt, n, p); return;
          case UnaryOp::kGeluTanh: unary_kernel<T, V><<<g, kThreads, 0, s>>>(OpConst<UnaryOp::kGeluTanh>{}, xt, yt, n, p); return;
          case UnaryOp::kRelu: unary_kernel<T, V><<<g, kThreads, 0, s>>>(OpConst<UnaryOp::kRelu>{}, xt, yt, n, p); return;
          case UnaryOp::kSigmoid: unary_kernel<T, V><<<g, kThreads, 0, s>>>(OpConst<UnaryOp::kSigmoid>{}, xt, yt, n, p); return;
          default: break;
        }
      }
      unary_kernel<T, V><<<g, kThreads, 0, s>>>(op, xt, yt, n, p);
    } else {
      unary_kernel<T, 1><<<grid_for(n), kThreads, 0, s>>>(op, xt, static_cast<T*>(y), n, p);
    }
  }));
  GPUOPT_CHECK_CALL(cudaGetLastError());
  return Status::Ok();
}

Status launch_cast(DType from, DType to, const void* x, void* y, int64_t n, cudaStream_t s) {
  if (n == 0) return Status::Ok();
  // The nested dispatch's result is kept as a bool: nvcc warns (#2810-D) on assigning a Status
  // inside the generic lambda.
  bool to_supported = true;
  GPUOPT_RETURN_IF_ERROR(dispatch_device(from, [&](auto stag) {
    using S = decltype(stag);
    to_supported = dispatch_device(to, [&](auto dtag) {
      using D = decltype(dtag);
      constexpr int V = vec_width(std::max(sizeof(S), sizeof(D)));
      const S* xs = static_cast<const S*>(x);
      D* yd = static_cast<D*>(y);
      if (aligned_to(x, V * sizeof(S)) && aligned_to(y, V * sizeof(D)))
        cast_kernel<S, D, V><<<grid_for(n / V), kThreads, 0, s>>>(xs, yd, n);
      else
        cast_kernel<S, D, 1><<<grid_for(n), kThreads, 0, s>>>(xs, yd, n);
    }).ok();
  }));
  if (!to_supported) return dispatch_device(to, [](auto) {});  // the error naming the dtype
  GPUOPT_CHECK_CALL(cudaGetLastError());
  return Status::Ok();
}

}  // namespace gpuopt::cuda
