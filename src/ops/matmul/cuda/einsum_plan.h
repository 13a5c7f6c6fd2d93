// Host side of the CUDA Einsum: the plan for a node and its operand shapes (the CPU reference's
// label binding, output labels first, per-operand strides).
#pragma once

#include "ops/matmul/cuda/einsum.h"
#include "ir/graph.h"

#include <vector>

namespace gpuopt::cuda {

Result<EinsumDesc> make_einsum_desc(const Node& node, const std::vector<Shape>& shapes);

}  // namespace gpuopt::cuda
