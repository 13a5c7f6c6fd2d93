// Index arithmetic of the CUDA index kernels (index.cu) and TopK's order (rows.cu), shared with
// the host unit test that checks them against the CPU reference without a GPU.
#pragma once

#include "ops/index/cuda/index_ops.h"

#include <cmath>

#ifdef __CUDACC__
#define GPUOPT_INDEX_HD __host__ __device__
#else
#define GPUOPT_INDEX_HD
#endif

namespace gpuopt::cuda {

GPUOPT_INDEX_HD inline int64_t load_index(const void* p, bool i64, int64_t i) {
  return i64 ? static_cast<const int64_t*>(p)[i] : static_cast<int64_t>(static_cast<const int32_t*>(p)[i]);
}

// GatherElements/ScatterElements: data offset of index element e, or -1 when out of range.
GPUOPT_INDEX_HD inline int64_t elements_offset(const ElementsDesc& d, const void* idx, bool i64, int64_t e) {
  int64_t k = load_index(idx, i64, e);
  if (k < 0) k += d.axis_dim;
  if (k < 0 || k >= d.axis_dim) return -1;
  int64_t rem = e, off = 0;
  for (int a = d.rank - 1; a >= 0; --a) {
    const int64_t c = rem % d.ind_dims[a];
    rem /= d.ind_dims[a];
    off += (a == d.axis ? k : c) * d.data_strides[a];
  }
  return off;
}

// GatherND/ScatterND: data offset of index tuple t's slice, or -1 when an index is out of range.
GPUOPT_INDEX_HD inline int64_t nd_offset(const NdDesc& d, const void* idx, bool i64, int64_t t) {
  int64_t off = (t / d.tuples) * d.batch_stride;
  for (int j = 0; j < d.m; ++j) {
    int64_t k = load_index(idx, i64, t * d.m + j);
    if (k < 0) k += d.dims[j];
    if (k < 0 || k >= d.dims[j]) return -1;
    off += k * d.strides[j];
  }
  return off;
}

// TopK's order, the CPU reference's comparator: whether (a, ia) comes before (b, ib). Larger
// (or smaller) first, NaN counts as the largest, ties by the lower index.
template <typename K>
GPUOPT_INDEX_HD inline bool topk_before(K a, int64_t ia, K b, int64_t ib, bool largest) {
  if constexpr (std::is_floating_point_v<K>) {
    const bool an = a != a, bn = b != b;
    if (an || bn) return an != bn ? (largest ? an : bn) : ia < ib;
  }
  if (a != b) return largest ? a > b : a < b;
  return ia < ib;
}

}  // namespace gpuopt::cuda
