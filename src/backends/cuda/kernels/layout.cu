#include "backends/cuda/layout.h"
#include "backends/cuda/kernels/kernel_common.cuh"
#include "core/cuda_check.h"

#include <cuda_runtime.h>

namespace gpuopt::cuda {
namespace {

constexpr int kThreads = 256;
unsigned grid_for(int64_t n) { return kern::grid_for(n, kThreads); }

template <typename E>
__global__ void strided_copy_kernel(const E* __restrict__ in, E* __restrict__ out, StridedDesc d) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < d.numel; i += int64_t(gridDim.x) * blockDim.x) {
    int64_t rem = i, off = d.in_offset;
    for (int k = d.rank - 1; k >= 0; --k) {
      const int64_t c = rem % d.out_dims[k];
      rem /= d.out_dims[k];
      off += c * d.in_strides[k];
    }
    out[i] = in[off];
  }
}

struct Where3 {
  int rank;
  int64_t numel;
  int64_t dims[kMaxRank];
  int64_t sc[kMaxRank], sa[kMaxRank], sb[kMaxRank];
};

template <typename E>
__global__ void where_kernel(const bool* __restrict__ c, const E* __restrict__ a, const E* __restrict__ b,
                             E* __restrict__ y, Where3 d) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < d.numel; i += int64_t(gridDim.x) * blockDim.x) {
    int64_t rem = i, oc = 0, oa = 0, ob = 0;
    for (int k = d.rank - 1; k >= 0; --k) {
      const int64_t x = rem % d.dims[k];
      rem /= d.dims[k];
      oc += x * d.sc[k];
      oa += x * d.sa[k];
      ob += x * d.sb[k];
    }
    y[i] = c[oc] ? a[oa] : b[ob];
  }
}

template <typename E, typename I>
__global__ void gather_kernel(const E* __restrict__ data, int64_t outer, int64_t axis_dim, int64_t inner,
                              const I* __restrict__ idx, int64_t nidx, E* __restrict__ out, int* bad) {
  const int64_t total = outer * nidx * inner;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t in_i = i % inner;
    const int64_t j = (i / inner) % nidx;
    const int64_t o = i / (inner * nidx);
    int64_t k = static_cast<int64_t>(idx[j]);
    if (k < 0) k += axis_dim;
    if (k < 0 || k >= axis_dim) {
      out[i] = E{};
      if (bad) *bad = 1;
      continue;
    }
    out[i] = data[(o * axis_dim + k) * inner + in_i];
  }
}

template <typename E>
__global__ void pad_index_kernel(const E* __restrict__ in, E* __restrict__ out, PadDesc d) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < d.numel; i += int64_t(gridDim.x) * blockDim.x) {
    int64_t rem = i, src = 0;
    for (int k = d.rank - 1; k >= 0; --k) {
      const int64_t c = rem % d.out_dims[k];
      rem /= d.out_dims[k];
      const int64_t n = d.in_dims[k];
      int64_t j = c - d.begin[k];
      if (j < 0 || j >= n) {
        if (d.mode == PadMode::kEdge) {
          j = j < 0 ? 0 : n - 1;
        } else if (d.mode == PadMode::kWrap) {
          j = ((j % n) + n) % n;
        } else {
          const int64_t p = 2 * (n - 1);
          j = p == 0 ? 0 : ((j % p) + p) % p;
          if (j >= n) j = p - j;
        }
      }
      src += j * d.in_strides[k];
    }
    out[i] = in[src];
  }
}

// Calls f(E{}) with an unsigned type of the element size.
template <typename F>
Status by_size(size_t es, F&& f) {
  switch (es) {
    case 1: f(uint8_t{}); return Status::Ok();
    case 2: f(uint16_t{}); return Status::Ok();
    case 4: f(uint32_t{}); return Status::Ok();
    case 8: f(uint64_t{}); return Status::Ok();
    default: return Status::Unimplemented("CUDA data movement of {}-byte elements", es);
  }
}

// Strides of `s` broadcast to `out` (0 along broadcast axes).
void broadcast_strides(const Shape& s, const Shape& out, int64_t* strides) {
  const int r = static_cast<int>(out.size());
  int64_t st = 1;
  for (int k = r - 1; k >= 0; --k) {
    const int ks = k - (r - static_cast<int>(s.size()));
    const int64_t d = ks >= 0 ? s[ks] : 1;
    strides[k] = d == 1 ? 0 : st;
    st *= d;
  }
}

}  // namespace

Status launch_strided_copy(size_t es, const void* in, void* out, const StridedDesc& d, cudaStream_t s) {
  if (d.numel == 0) return Status::Ok();
  GPUOPT_RETURN_IF_ERROR(by_size(es, [&](auto tag) {
    using E = decltype(tag);
    strided_copy_kernel<E><<<grid_for(d.numel), kThreads, 0, s>>>(static_cast<const E*>(in), static_cast<E*>(out), d);
  }));
  GPUOPT_CHECK_CALL(cudaGetLastError());
  return Status::Ok();
}

Status launch_pad_index(size_t es, const void* in, void* out, const PadDesc& d, cudaStream_t s) {
  if (d.numel == 0) return Status::Ok();
  GPUOPT_RETURN_IF_ERROR(by_size(es, [&](auto tag) {
    using E = decltype(tag);
    pad_index_kernel<E><<<grid_for(d.numel), kThreads, 0, s>>>(static_cast<const E*>(in), static_cast<E*>(out), d);
  }));
  GPUOPT_CHECK_CALL(cudaGetLastError());
  return Status::Ok();
}

Status launch_where(size_t es, const bool* cond, const Shape& cs, const void* a, const Shape& as, const void* b,
                    const Shape& bs, void* y, const Shape& out, cudaStream_t s) {
  Where3 d{};
  d.rank = static_cast<int>(out.size());
  if (d.rank > kMaxRank) return Status::Unimplemented("Where of rank {} exceeds {}", d.rank, kMaxRank);
  d.numel = shape_numel(out);
  if (d.numel == 0) return Status::Ok();
  for (int k = 0; k < d.rank; ++k) d.dims[k] = out[k];
  broadcast_strides(cs, out, d.sc);
  broadcast_strides(as, out, d.sa);
  broadcast_strides(bs, out, d.sb);
  GPUOPT_RETURN_IF_ERROR(by_size(es, [&](auto tag) {
    using E = decltype(tag);
    where_kernel<E><<<grid_for(d.numel), kThreads, 0, s>>>(cond, static_cast<const E*>(a), static_cast<const E*>(b),
                                                           static_cast<E*>(y), d);
  }));
  GPUOPT_CHECK_CALL(cudaGetLastError());
  return Status::Ok();
}

Status launch_gather(size_t es, const void* data, int64_t outer, int64_t axis_dim, int64_t inner, const void* indices,
                     bool i64, int64_t nidx, void* out, int* bad, cudaStream_t s) {
  const int64_t total = outer * nidx * inner;
  if (total == 0) return Status::Ok();
  GPUOPT_RETURN_IF_ERROR(by_size(es, [&](auto tag) {
    using E = decltype(tag);
    if (i64)
      gather_kernel<E, int64_t><<<grid_for(total), kThreads, 0, s>>>(static_cast<const E*>(data), outer, axis_dim, inner,
                                                                     static_cast<const int64_t*>(indices), nidx,
                                                                     static_cast<E*>(out), bad);
    else
      gather_kernel<E, int32_t><<<grid_for(total), kThreads, 0, s>>>(static_cast<const E*>(data), outer, axis_dim, inner,
                                                                     static_cast<const int32_t*>(indices), nidx,
                                                                     static_cast<E*>(out), bad);
  }));
  GPUOPT_CHECK_CALL(cudaGetLastError());
  return Status::Ok();
}

}  // namespace gpuopt::cuda
