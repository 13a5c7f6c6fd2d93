// Tensor plumbing for the batcher: concatenate requests along the batch dim (padding a sequence
// axis to a common length), and cut a batched output back into per-request pieces.
#pragma once

#include "core/status.h"
#include "core/tensor.h"

#include <functional>
#include <vector>

namespace gpuopt::server {

// Concatenates `parts` along dim 0. When axis > 0, each part's `axis` dim is padded to `length`
// with `pad` (parts must agree on every other non-batch dim). The result's memory comes from
// `alloc` when given (numeric dtypes), else Tensor::empty.
Tensor concat_rows(const std::vector<const Tensor*>& parts, int axis, int64_t length, double pad,
                   const std::function<Tensor(DType, const Shape&)>& alloc = {});

// Rows [row, row + rows) of `t`; when axis > 0 and `length` >= 0, also cut `axis` to `length`.
// Shares storage when no cut is needed and the dtype is numeric.
Tensor slice_rows(const Tensor& t, int64_t row, int64_t rows, int axis = 0, int64_t length = -1);

}  // namespace gpuopt::server
