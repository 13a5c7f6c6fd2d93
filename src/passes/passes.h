// Graph passes, one per file. Each keeps the graph topologically sorted and its shapes inferred.
//
//   GPUOPT_RETURN_IF_ERROR(run_default_passes(&graph));   // what Session runs when optimize=true
#pragma once

#include "core/status.h"
#include "ir/graph.h"

#include <string>
#include <string_view>
#include <vector>

namespace gpuopt {

struct PassStats {
  int removed = 0;    // nodes removed (dead, eliminated or folded)
  int rewritten = 0;  // nodes rewritten in place (layout_nhwc: nodes made channels-last)
  int added = 0;      // nodes added (layout_nhwc: transposes at region edges)
};

// Nodes whose outputs reach no graph output; also drops constants nothing reads.
Result<PassStats> remove_dead_nodes(Graph* g);
// Identity, and Dropout in inference (no training_mode, or a false constant), rewired away.
Result<PassStats> eliminate_identity(Graph* g);
// A node equal to an earlier one (op, domain, attributes, inputs) rewired to it (cse.cpp).
Result<PassStats> eliminate_common_subexpressions(Graph* g);
// Nodes whose inputs are all constants (and Shape/Size of a concrete shape) become constants,
// computed with the CPU reference kernels (eval_node).
Result<PassStats> fold_constants(Graph* g);

// Inference BatchNormalization after a Conv (constant parameters, the Conv output read only by
// the BN) folded into the Conv's weights and bias.
Result<PassStats> fold_batchnorm(Graph* g);

// Conv -> Relu, Conv -> Add(z) -> Relu and Conv -> Add(z) (z of the Conv output's known shape,
// every intermediate read once and not a graph output) become one com.microsoft FusedConv.
// 1-D Convs (rank-3 input and weight) as 2-D ones of unit height between Reshapes, which cancel
// across elementwise ops between two such convs (passes/conv1d_as_2d.cpp).
Result<PassStats> conv1d_as_2d(Graph* g);
Result<PassStats> fuse_conv_activation(Graph* g);

// MatMul(X, W const [K,N]) -> Add(bias const [N]) (either order, the MatMul output read only by
// the Add) becomes one Gemm with C = bias, X flattened to [-1, K] and the result reshaped back.
Result<PassStats> fuse_matmul_bias(Graph* g);

// GELU written element by element (Erf or Tanh form, as torch exporters write it) becomes one
// ONNX Gelu node (approximate "none" or "tanh").
Result<PassStats> fuse_gelu(Graph* g);

// Transposes around attention moved and merged (transpose_sink.cpp): Transpose/Reshape/Squeeze/
// Unsqueeze chains composed into at most Reshape -> Transpose -> Reshape, Transposes sunk below
// (or hoisted above) MatMul by a matrix, last-axis elementwise ops and one-index Gathers when
// that joins them to such a chain, Reshape -> Gemm -> Reshape made a MatMul on the unflattened
// tensor; then a packed projection read by parts (q/k/v Gathers, a last-axis Split) becomes one
// MatMul per part. Leaves the head splits in the form fuse_attention reads (torch's
// MultiheadAttention, the dynamo exporter's K^T).
Result<PassStats> sink_transposes(Graph* g);

// Scaled dot-product attention written as MatMul -> [scale] -> [causal Where] -> [mask Add] ->
// Softmax -> [NaN guard] -> MatMul, with 3-D or 4-D heads, becomes one ONNX Attention node.
Result<PassStats> fuse_attention(Graph* g);

// LayerNorm written op by op (ReduceMean, Sub, Pow, ReduceMean, Add eps, Sqrt, Div [, Mul gamma]
// [, Add beta], last axis) becomes one ONNX LayerNormalization; fuse_layernorm.cpp.
Result<PassStats> fuse_layernorm(Graph* g);

// Gemm -> [Reshape] -> Relu|Gelu becomes one com.microsoft FusedGemm (the activation in the
// GEMM's epilogue on the GPU); fuse_epilogue.cpp.
Result<PassStats> fuse_gemm_activation(Graph* g);

// Gemm -> [Reshape] -> [Transpose] -> Mul(per-column constant) folded into the Gemm's B and C
// (ConvNeXt's layer scale; fold_gemm_scale.cpp).
Result<PassStats> fold_gemm_scale(Graph* g);

// Add(a, b) -> LayerNormalization (last axis, a and b of one shape) becomes one com.microsoft
// SkipLayerNormalization, which also writes the sum when something else reads it.
Result<PassStats> fuse_skip_layernorm(Graph* g);

// Removes the nodes marked in `drop` (indexed like g->nodes()), keeping the order of the rest, and
// rebuilds the producer table. For passes that rewrite in place and then drop what they replaced.
void erase_nodes(Graph* g, const std::vector<bool>& drop);

// Channels-last convolutions for the CUDA backend (run on fp16/bf16 graphs after
// convert_precision): maximal connected regions of 2-D Conv/FusedConv (fp16/bf16, constant W,
// attributes conv2d_attrs_supported takes; Relu or no activation), MaxPool (2-D, no Indices,
// explicit pads or VALID), GlobalAveragePool and elementwise ops between them
// (Relu, Clip, Add, Mul, Cast, ... with every input 4-D or a one-element constant) that hold at
// least one conv keep their activations NHWC: Conv/FusedConv become ai.gpuopt NhwcFusedConv
// (W transposed to [M, kH, kW, C/group] here, once), MaxPool NhwcMaxPool, GlobalAveragePool a
// ReduceMean over axes [1, 2]. Transposes are inserted only at region edges, one per value.
Result<PassStats> layout_nhwc(Graph* g);
// After layout_nhwc: a region's entry Transpose from a float NCHW value and the Cast before it
// become one ai.gpuopt ToNhwc; an RGB input read only by stem convs is padded to 4 channels there
// (zero weights added), which cuDNN's stem kernel takes without its own padding pass
// (nhwc_entry.cpp). GPUOPT_DISABLE_FUSION=nhwc_entry.
Result<PassStats> pack_nhwc_entries(Graph* g);

// QDQ pairs around MatMul/Gemm -> Int8Gemm (ai.gpuopt): int8 GEMM with the dequantize, bias and
// Relu fused (fold_qdq.cpp); with `convs`, QDQ Conv -> Int8Conv (ai.gpuopt, NCHW until
// layout_nhwc makes it channels-last): int8 conv with the dequantize, bias, Relu and the
// following QuantizeLinear fused. run_session_passes runs it for --precision int8 on the GPU
// (convs unless GPUOPT_INT8_CONV=0, and with the nhwc pass on).
Result<PassStats> fold_qdq(Graph* g, bool convs = false);

// An Int8Conv whose int8 output only an Int8Add reads -> one Int8Conv in its residual form, the
// add's other addend its input Z (fuse_int8_residual.cpp); run after layout_nhwc on the GPU.
Result<PassStats> fuse_int8_residual(Graph* g);
// At int8 on the GPU, after the default passes: each Int8Gemm takes over a following Relu or
// Gelu, residual Add and per-tensor int8 QuantizeLinear where each is the only reader (then it
// writes int8): fuse_int8_epilogue.cpp. GPUOPT_DISABLE_FUSION=int8_epilogue turns it off.
Result<PassStats> fuse_int8_epilogue(Graph* g);
// And a SkipLayerNormalization read by such a QuantizeLinear writes the int8 tensor itself (its
// output 4): fuse_int8_norm, same file. GPUOPT_DISABLE_FUSION=int8_norm.
Result<PassStats> fuse_int8_norm(Graph* g);

// At int8 on the GPU: Q -> DQ round trips in front of a MatMul of two activations (an attention's
// Q.K^T, P.V) bypassed, so the attention fuses and runs in fp16 (qdq_attention.cpp).
Result<PassStats> qdq_attention_in_float(Graph* g);
// At int8 on the GPU: MaxPool(DQ(Q(x))) -> DQ(Q(MaxPool(x))), the round trip on the pooled tensor
// (exact: qdq_pool.cpp). GPUOPT_DISABLE_FUSION=qdq_pool.
Result<PassStats> pool_before_qdq(Graph* g);
// At int8 on the GPU: Q(DQ(q)) with one scale and zero point is q; its readers read q (exact:
// qdq_requant.cpp). GPUOPT_DISABLE_FUSION=qdq_requant.
Result<PassStats> drop_requantize(Graph* g);

// GPUOPT_DISABLE_FUSION, read once per pipeline: "1" (or "all") turns every fusion pass off;
// otherwise a comma-separated list of fusion names to turn off (the names: passes/fusions.h); a
// name with a leading '+' turns ON an opt-in pass (int8_residual, on by default since its 1x1
// form got a CUTLASS kernel: '+int8_residual' is still accepted). validate() names an unknown one
// (the pipelines call it first).
//
//   const FusionSwitches sw = FusionSwitches::from_env();
//   if (sw.enabled("nhwc")) ...
//   if (sw.opted_in("int8_residual")) ...
struct FusionSwitches {
  bool all_off = false;
  std::vector<std::string> off;
  std::vector<std::string> on;  // opt-in passes named with '+'
  static FusionSwitches from_env();
  static FusionSwitches parse(std::string_view value);
  bool enabled(std::string_view pass) const;
  bool opted_in(std::string_view pass) const;
  Status validate() const;
};

// fold constants -> fold BatchNormalization -> identity -> dead -> fuse Conv+Add+Relu ("conv"),
// GELU ("gelu"), attention ("attention") and MatMul+bias ("matmul_bias"), each skipped when
// GPUOPT_DISABLE_FUSION names it, then shapes.
Status run_default_passes(Graph* g, const FusionSwitches& sw = FusionSwitches::from_env());

// What Session::init runs (and `inspect --optimized`): run_default_passes when `optimize`, the
// precision conversion ("fp32", "fp16" or "bf16"), then the device's layout pass (layout_nhwc
// for a CUDA device at fp16/bf16, unless "nhwc" is turned off).
Status run_session_passes(Graph* g, const Device& device, std::string_view precision, bool optimize);

}  // namespace gpuopt
