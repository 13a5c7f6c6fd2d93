// Runs one node on the CPU reference: shape inference with every input value known, output
// allocation, then the kernel. Used by the CPU executor, constant folding and the op tests.
//
//   Node n; n.op = Op::Add; n.name = "add"; n.inputs = {0, 1}; n.outputs = {2};
//   GPUOPT_ASSIGN_OR_RETURN(std::vector<Tensor> out, eval_node(n, {&a, &b}, /*opset=*/17));
#pragma once

#include "ir/graph.h"

#include <functional>

namespace gpuopt {

// `opset` is the model's opset for the node's domain (Graph::opset_for): it picks the op's
// version (op_table.h); outside every range of the op, the error names op, opset and node.
// `inputs[i]` may be nullptr for an absent optional input. Outputs follow node.outputs.
// An output larger than `max_tensor_bytes` (0: physical memory) is refused before anything is
// allocated, and an allocation that fails is an out-of-memory Status, never an abort.
Result<std::vector<Tensor>> eval_node(const Node& node, const std::vector<const Tensor*>& inputs, int opset,
                                      size_t max_tensor_bytes = 0);

// Like eval_node, but output i's storage comes from `alloc(i, inferred info)` (a view into the
// executor's memory plan, say); it must have the inferred dtype and shape. eval_node is this
// with Tensor::try_empty.
using OutputAllocFn = std::function<Result<Tensor>(size_t index, const ValueInfo& info)>;
Result<std::vector<Tensor>> eval_node_into(const Node& node, const std::vector<const Tensor*>& inputs, int opset,
                                           size_t max_tensor_bytes, const OutputAllocFn& alloc);
// The output types and shapes eval_node allocates: inference with every input's value known.
Result<std::vector<ValueInfo>> infer_from_tensors(const Node& node, const std::vector<const Tensor*>& inputs, int opset,
                                                  size_t max_tensor_bytes = 0);

// The check infer_node applies to each output: "[Op] node 'n': output 0 f32 [..] needs X, more than Y".
Status check_output_size(const Node& node, size_t index, const ValueInfo& vi, size_t max_tensor_bytes);

// Shape inference for one node from ValueInfos (load-time form). A concrete output shape whose
// size overflows or exceeds `max_tensor_bytes` (0: physical memory) is an error naming the node,
// the shape and the bytes.
Result<std::vector<ValueInfo>> infer_node(const Node& node, const std::vector<const ValueInfo*>& inputs, int opset,
                                          size_t max_tensor_bytes = 0);

// Runs a subgraph (Attribute::g) on the CPU reference, node by node: `inputs` in the order of
// g.inputs() (formal inputs, then captured outer values); returns g.outputs()' values.
Result<std::vector<Tensor>> run_graph(const Graph& g, const std::vector<Tensor>& inputs, size_t max_tensor_bytes = 0);

}  // namespace gpuopt
