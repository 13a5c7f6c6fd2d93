// Graph passes, one per file. Each keeps the graph topologically sorted and its shapes inferred.
//
//   GPUOPT_RETURN_IF_ERROR(run_default_passes(&graph));   // what Session runs when optimize=true
#pragma once

#include "core/status.h"
#include "ir/graph.h"

namespace gpuopt {

struct PassStats {
  int removed = 0;  // nodes removed (dead, eliminated or folded)
};

// Nodes whose outputs reach no graph output; also drops constants nothing reads.
Result<PassStats> remove_dead_nodes(Graph* g);
// Identity, and Dropout in inference (no training_mode, or a false constant), rewired away.
Result<PassStats> eliminate_identity(Graph* g);
// Nodes whose inputs are all constants (and Shape/Size of a concrete shape) become constants,
// computed with the CPU reference kernels (eval_node).
Result<PassStats> fold_constants(Graph* g);

// Inference BatchNormalization after a Conv (constant parameters, the Conv output read only by
// the BN) folded into the Conv's weights and bias.
Result<PassStats> fold_batchnorm(Graph* g);

// Conv -> Relu, Conv -> Add(z) -> Relu and Conv -> Add(z) (z of the Conv output's known shape,
// every intermediate read once and not a graph output) become one com.microsoft FusedConv.
Result<PassStats> fuse_conv_activation(Graph* g);

// MatMul(X, W const [K,N]) -> Add(bias const [N]) (either order, the MatMul output read only by
// the Add) becomes one Gemm with C = bias, X flattened to [-1, K] and the result reshaped back.
Result<PassStats> fuse_matmul_bias(Graph* g);

// GELU written element by element (Erf or Tanh form, as torch exporters write it) becomes one
// ONNX Gelu node (approximate "none" or "tanh").
Result<PassStats> fuse_gelu(Graph* g);

// Scaled dot-product attention written as MatMul -> [scale] -> [causal Where] -> [mask Add] ->
// Softmax -> [NaN guard] -> MatMul, with 3-D or 4-D heads, becomes one ONNX Attention node.
Result<PassStats> fuse_attention(Graph* g);

// Which fusions run: GPUOPT_DISABLE_FUSION unset or empty = all; "1" or "all" = none; otherwise a
// comma-separated list of the fusions to leave out (conv, matmul_bias, gelu, attention).
// Unknown names are an error that lists the valid ones. Read once per run_default_passes call.
struct FusionSwitches {
  bool conv = true, matmul_bias = true, gelu = true, attention = true;
  static Result<FusionSwitches> from_env();
};

// Removes the nodes marked in `drop` (indexed like g->nodes()), keeping the order of the rest, and
// rebuilds the producer table. For passes that rewrite in place and then drop what they replaced.
void erase_nodes(Graph* g, const std::vector<bool>& drop);

// fold constants -> fold BatchNormalization -> identity -> dead -> fusions (Conv+Add+Relu, GELU,
// attention, MatMul+bias; each as FusionSwitches says), then shapes again.
Status run_default_passes(Graph* g);

}  // namespace gpuopt
