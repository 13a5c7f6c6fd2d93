// Where the CUDA backend runs each node, decided from the CUDA op table alone (cuda_ops.h): no
// device is needed, so tests and tools can ask without a GPU. A node with no CUDA kernel for its
// op, opset, input dtypes or attributes runs on the CPU backend (a fallback), and compile()
// prints one warning line per op type naming those nodes and why:
//
//   const std::vector<NodePlace> place = cuda::cuda_placement(graph);
//   for (const std::string& line : cuda::cpu_fallback_warnings(graph, place)) GPUOPT_LOG(warn, "{}", line);
//   // cuda: 2 nodes run on the CPU inside the GPU graph: [ConvTranspose] '/up/ConvTranspose'
//   //   (the CUDA kernel does not take auto_pad=SAME_UPPER), '/up2/ConvTranspose' (...)
#pragma once

#include "backends/backend.h"
#include "ir/graph.h"

#include <string>
#include <vector>

namespace gpuopt::cuda {

// Whether a CUDA kernel runs this node (its op at the graph's opset, its input dtypes, its
// attributes).
bool cuda_supports(const Node& node, const Graph& graph);

// kDevice, kCpuFallback or kHostShapes (integer shape arithmetic kept on the host on purpose)
// for each node of the graph, in node order.
std::vector<NodePlace> cuda_placement(const Graph& graph);

// Why cuda_supports is false for this node, from the same decision: no kernel for the op, none
// for the model's opset of it, the kernel refuses the input dtypes (and which it would take), or
// it refuses this form of the op (the attributes or input count it was given). Empty when it is
// supported.
std::string cuda_fallback_reason(const Node& node, const Graph& graph);

// One line per op type with CPU-fallback nodes: how many, and each node's name and reason (the
// first few; "and N more" after them). Empty when every node is on the GPU or shape arithmetic.
std::vector<std::string> cpu_fallback_warnings(const Graph& graph, const std::vector<NodePlace>& place);

}  // namespace gpuopt::cuda
