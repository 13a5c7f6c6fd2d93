// Broadcasting binary ops on the GPU (launch_binary in elementwise.h). The host picks a path per
// call (elementwise_plan.h):
//  - kVector: the output and every full-size input move 16 bytes per access; the other input is
//    one element, or a row/column/channel read as (i / inner) % mid with magic-number division
//    once per vector, or (any broadcast whose innermost axis is whole vectors) both offsets
//    once per vector; the n % V tail runs one element per thread.
//  - kGeneral32: any broadcast over collapsed dims, 32-bit offsets by magic-number division.
//  - kGeneral64: 2^31 elements or more, the original 64-bit index math.
// All three call binary_elem (elementwise_math.cuh), so the path never changes a result.
#include "backends/cuda/elementwise.h"
#include "ops/elementwise/cuda/elementwise_plan.h"
#include "ops/elementwise/cuda/elementwise_math.cuh"
#include "backends/cuda/kernels/kernel_common.cuh"
#include "core/cuda_check.h"

#include <cuda_runtime.h>

#include <cstdint>

namespace gpuopt::cuda {
namespace {

using namespace ew;  // NOLINT: the kernels' element helpers

struct VecArgs {
  VecMode mode;
  bool small_vector;        // kMid*: V contiguous small elements (else one, repeated)
  bool a_vector, b_vector;  // kBroadcast: V contiguous elements of a / b (else one, repeated)
  int64_t n;
  FastDivmod inner, mid;
  Index32 index;  // kBroadcast
};

__device__ __forceinline__ uint32_t small_index(const VecArgs& g, uint32_t i) {
  return mid_index(g.inner, g.mid, i);
}

template <typename T, int V>
__device__ __forceinline__ Pack<T, V> fill(T v) {
  Pack<T, V> p;
#pragma unroll
  for (int e = 0; e < V; ++e) p.v[e] = v;
  return p;
}

template <typename T, int V>
__device__ __forceinline__ Pack<T, V> small_pack(const T* p, const VecArgs& g, int64_t i) {
  const uint32_t s = small_index(g, static_cast<uint32_t>(i));
  return g.small_vector ? load_pack<T, V>(p, s) : fill<T, V>(p[s]);
}

template <typename T, typename Out, int V>
__global__ void binary_vec_kernel(BinaryOp op, const T* __restrict__ a, const T* __restrict__ b, Out* __restrict__ y,
                                  VecArgs g) {
  const int64_t tid = blockIdx.x * int64_t(blockDim.x) + threadIdx.x, stride = int64_t(gridDim.x) * blockDim.x;
  const int64_t nv = g.n / V;
  for (int64_t v = tid; v < nv; v += stride) {
    const int64_t i = v * V;
    Pack<T, V> pa, pb;
    switch (g.mode) {
      case VecMode::kSame:
        pa = load_pack<T, V>(a, i);
        pb = load_pack<T, V>(b, i);
        break;
      case VecMode::kScalarA:
        pa = fill<T, V>(a[0]);
        pb = load_pack<T, V>(b, i);
        break;
      case VecMode::kScalarB:
        pa = load_pack<T, V>(a, i);
        pb = fill<T, V>(b[0]);
        break;
      case VecMode::kMidA:
        pa = small_pack<T, V>(a, g, i);
        pb = load_pack<T, V>(b, i);
        break;
      case VecMode::kMidB:
        pa = load_pack<T, V>(a, i);
        pb = small_pack<T, V>(b, g, i);
        break;
      default: {  // kBroadcast
        uint32_t ia, ib;
        index32_offsets(g.index, static_cast<uint32_t>(i), &ia, &ib);
        pa = g.a_vector ? load_pack<T, V>(a, ia) : fill<T, V>(a[ia]);
        pb = g.b_vector ? load_pack<T, V>(b, ib) : fill<T, V>(b[ib]);
        break;
      }
    }
    Pack<Out, V> py;
#pragma unroll
    for (int e = 0; e < V; ++e) py.v[e] = binary_elem<T, Out>(op, pa.v[e], pb.v[e]);
    store_pack<Out, V>(y, i, py);
  }
  for (int64_t i = nv * V + tid; i < g.n; i += stride) {
    int64_t ia = i, ib = i;
    switch (g.mode) {
      case VecMode::kSame:
        break;
      case VecMode::kScalarA:
        ia = 0;
        break;
      case VecMode::kScalarB:
        ib = 0;
        break;
      case VecMode::kMidA:
        ia = small_index(g, static_cast<uint32_t>(i));
        break;
      case VecMode::kMidB:
        ib = small_index(g, static_cast<uint32_t>(i));
        break;
      default: {  // kBroadcast never has a tail (numel is whole vectors); kept for safety
        uint32_t oa, ob;
        index32_offsets(g.index, static_cast<uint32_t>(i), &oa, &ob);
        ia = oa;
        ib = ob;
        break;
      }
    }
    y[i] = binary_elem<T, Out>(op, a[ia], b[ib]);
  }
}

template <typename T, typename Out>
__global__ void binary_general32_kernel(BinaryOp op, const T* __restrict__ a, const T* __restrict__ b,
                                        Out* __restrict__ y, uint32_t n, Index32 g) {
  for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    uint32_t ia, ib;
    index32_offsets(g, i, &ia, &ib);
    y[i] = binary_elem<T, Out>(op, a[ia], b[ib]);
  }
}

__device__ __forceinline__ void broadcast_offsets(const BroadcastDesc& d, int64_t i, int64_t* ia, int64_t* ib) {
  int64_t oa = 0, ob = 0;
  for (int k = d.rank - 1; k >= 0; --k) {
    const int64_t c = i % d.out_dims[k];
    i /= d.out_dims[k];
    oa += c * d.a_strides[k];
    ob += c * d.b_strides[k];
  }
  *ia = oa;
  *ib = ob;
}

template <typename T, typename Out>
__global__ void binary_general64_kernel(BinaryOp op, const T* __restrict__ a, const T* __restrict__ b,
                                        Out* __restrict__ y, BroadcastDesc d) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < d.numel; i += int64_t(gridDim.x) * blockDim.x) {
    int64_t ia = i, ib = i;
    if (d.b_scalar && d.a_contiguous)
      ib = 0;
    else if (!(d.a_contiguous && d.b_contiguous))
      broadcast_offsets(d, i, &ia, &ib);
    y[i] = binary_elem<T, Out>(op, a[ia], b[ib]);
  }
}

constexpr int kThreads = 256;
unsigned grid_for(int64_t n) {
  return kern::grid_for(n, kThreads);
}

template <typename T, typename Out>
void launch_typed(BinaryOp op, const T* a, const T* b, Out* y, const BroadcastDesc& d, cudaStream_t s) {
  constexpr int V = vec_width(sizeof(T));
  const BinaryPlan p = plan_binary(d, sizeof(T), sizeof(Out), a, b, y);
  if (p.path == BinaryPath::kVector) {
    const VecArgs g{p.mode,
                    p.small_vector,
                    p.a_vector,
                    p.b_vector,
                    d.numel,
                    FastDivmod(static_cast<uint32_t>(p.inner)),
                    FastDivmod(static_cast<uint32_t>(p.mid)),
                    p.mode == VecMode::kBroadcast ? make_index32(p.shape) : Index32{}};
    binary_vec_kernel<T, Out, V><<<grid_for(d.numel / V), kThreads, 0, s>>>(op, a, b, y, g);
  } else if (p.path == BinaryPath::kGeneral32) {
    binary_general32_kernel<T, Out>
        <<<grid_for(d.numel), kThreads, 0, s>>>(op, a, b, y, static_cast<uint32_t>(d.numel), make_index32(p.shape));
  } else {
    binary_general64_kernel<T, Out><<<grid_for(d.numel), kThreads, 0, s>>>(op, a, b, y, d);
  }
}

}  // namespace

Status launch_binary(BinaryOp op, DType dt, const void* a, const void* b, void* y, const BroadcastDesc& d,
                     cudaStream_t s) {
  if (d.numel == 0) return Status::Ok();
  GPUOPT_RETURN_IF_ERROR(dispatch_device(dt, [&](auto tag) {
    using T = decltype(tag);
    const T* at = static_cast<const T*>(a);
    const T* bt = static_cast<const T*>(b);
    if (binary_op_is_comparison(op))
      launch_typed<T, bool>(op, at, bt, static_cast<bool*>(y), d, s);
    else
      launch_typed<T, T>(op, at, bt, static_cast<T*>(y), d, s);
  }));
  GPUOPT_CHECK_CALL(cudaGetLastError());
  return Status::Ok();
}

}  // namespace gpuopt::cuda
