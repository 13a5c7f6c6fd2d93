// Index and creation kernels on the GPU: Trilu, GatherElements, GatherND, ScatterElements/Scatter,
// ScatterND, Range, ConstantOfShape's fill and Cosh. Data movement works on raw element sizes;
// scatter reductions and arithmetic are typed. Launchers take device pointers (testable alone).
//
// Indices (i32 or i64, negative counted from the end) that are out of range are skipped on the
// device (a gather writes zero); the CPU reference reports them as an error.
#pragma once

#include "backends/cuda/elementwise.h"

namespace gpuopt::cuda {

// out = in with the elements outside the kept triangle zeroed; kept: j >= i + k (upper) or
// j <= i + k (lower) for row i, column j of each of `mats` [rows, cols] matrices.
Status launch_trilu(size_t elem_size, const void* in, void* out, int64_t mats, int64_t rows, int64_t cols, int64_t k,
                    bool upper, cudaStream_t s);

// GatherElements / ScatterElements: the index tensor's shape `ind_shape` (same rank as data),
// data's shape `data_shape`, the axis the index values replace.
struct ElementsDesc {
  int rank = 0;
  int64_t numel = 0;  // elements of the index tensor
  int64_t ind_dims[kMaxRank] = {};
  int64_t data_strides[kMaxRank] = {};
  int axis = 0;
  int64_t axis_dim = 0;
};
Result<ElementsDesc> make_elements_desc(const Shape& data, const Shape& ind, int64_t axis);

// GatherND / ScatterND: indices [..., m]; `tuples` index tuples per batch, each selecting a slice
// of `slice` contiguous elements of data.
struct NdDesc {
  int m = 0;
  int64_t batches = 1, tuples = 0, slice = 1, batch_stride = 0;
  int64_t dims[kMaxRank] = {};     // data dims b .. b+m-1
  int64_t strides[kMaxRank] = {};  // their strides in elements
};
Result<NdDesc> make_nd_desc(const Shape& data, const Shape& ind, int64_t batch_dims);

enum class ScatterReduction : uint8_t { kNone, kAdd, kMul, kMax, kMin };

Status launch_gather_elements(size_t elem_size, const void* data, const void* idx, bool idx_i64, void* out,
                              const ElementsDesc& d, cudaStream_t s);
Status launch_gather_nd(size_t elem_size, const void* data, const void* idx, bool idx_i64, void* out, const NdDesc& d,
                        cudaStream_t s);
// `out` must already hold a copy of data. Reduction kNone takes any dtype of 1/2/4/8 bytes (a
// duplicate index leaves one of the updates, unspecified which, as the spec allows); the
// reductions take f32, f16, bf16, i32, i64 and combine atomically.
Status launch_scatter_elements(DType dt, ScatterReduction r, const void* idx, bool idx_i64, const void* upd, void* out,
                               const ElementsDesc& d, cudaStream_t s);
Status launch_scatter_nd(DType dt, ScatterReduction r, const void* idx, bool idx_i64, const void* upd, void* out,
                         const NdDesc& d, cudaStream_t s);

// Range: integers out[i] = start + i * delta; floats accumulate in the element type as the
// spec's loop does (v = round(v + delta)), walked by one thread so the rounding matches exactly.
Status launch_range(DType dt, double start_f, double delta_f, int64_t start_i, int64_t delta_i, void* out, int64_t n,
                    cudaStream_t s);
// Fills n elements of `elem_size` bytes with the bytes at `pattern` (host memory).
Status launch_fill(size_t elem_size, const void* pattern, void* out, int64_t n, cudaStream_t s);
// y = cosh(x), computed in double and rounded once (f32, f16, bf16).
Status launch_cosh(DType dt, const void* x, void* y, int64_t n, cudaStream_t s);

}  // namespace gpuopt::cuda
