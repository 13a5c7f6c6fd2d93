// Runs one node on the CPU reference: shape inference with every input value known, output
// allocation, then the kernel. Used by the CPU executor, constant folding and the op tests.
//
//   Node n; n.op = Op::Add; n.name = "add"; n.inputs = {0, 1}; n.outputs = {2};
//   GPUOPT_ASSIGN_OR_RETURN(std::vector<Tensor> out, eval_node(n, {&a, &b}, /*opset=*/17));
#pragma once

#include "ir/graph.h"

namespace gpuopt {

// `inputs[i]` may be nullptr for an absent optional input. Outputs follow node.outputs.
Result<std::vector<Tensor>> eval_node(const Node& node, const std::vector<const Tensor*>& inputs, int opset);

// Shape inference for one node from ValueInfos (load-time form).
Result<std::vector<ValueInfo>> infer_node(const Node& node, const std::vector<const ValueInfo*>& inputs, int opset);

}  // namespace gpuopt
