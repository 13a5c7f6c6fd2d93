// Host side of the CUDA Resize: the plan for a node (kept out of resize.h so the kernel file
// does not compile the graph headers).
#pragma once

#include "ops/resize/cuda/resize.h"
#include "core/tensor.h"
#include "ir/graph.h"
#include "ops/resize/resize_form.h"

#include <vector>

namespace gpuopt::cuda {

// The plan for a Resize or Upsample node of form `form` (the opset picks it: resize_form.h):
// per-axis scale, roi and identity flags as the CPU reference computes them; `host` holds the
// node's inputs known on the host (roi, scales, sizes), `out` the inferred output shape.
Result<ResizeDesc> make_resize_desc(const Node& node, ResizeForm form, const Shape& in, const Shape& out,
                                    const std::vector<const Tensor*>& host);

}  // namespace gpuopt::cuda
