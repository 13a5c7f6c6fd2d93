// Pieces of the ONNX importer shared between its files (not a public interface).
#pragma once

#include "onnx/importer.h"

namespace onnx {
class AttributeProto;
class NodeProto;
}  // namespace onnx

namespace gpuopt::onnx_detail {

// `where` prefixes errors: "[Conv] node 'conv1'".
Result<Attribute> convert_attribute(const onnx::AttributeProto& a, const std::string& where, const std::string& model_dir);
// The tensor a Constant node produces, from whichever value_* attribute it carries.
Result<Tensor> constant_node_value(const onnx::NodeProto& n, const std::string& where, const std::string& model_dir);

}  // namespace gpuopt::onnx_detail

namespace onnx {
class GraphProto;
}  // namespace onnx

namespace gpuopt::onnx_detail {

// ONNX Runtime's contrib ops that the importer reads as standard nodes (contrib_ops.cpp):
// com.microsoft Attention, MultiHeadAttention, RotaryEmbedding, Gelu, FastGelu, BiasGelu,
// EmbedLayerNormalization and SkipSimplifiedLayerNormalization, and the default-domain
// SimplifiedLayerNormalization ONNX Runtime registers.
bool is_expanded_contrib_op(const std::string& domain, const std::string& op);
bool has_expanded_contrib_ops(const onnx::GraphProto& gp);
// The graph's node indices, each node after the producers of its inputs (a node that cannot be
// placed so, in a cycle or reading a missing value, keeps its place after the others).
std::vector<int> proto_node_order(const onnx::GraphProto& gp);
// Shape inference for the node just added at `index` (its inputs already inferred).
Status infer_added_node(Graph& g, size_t index);

// One contrib node as read: inputs kNoValue where absent, outputs by name ("" not requested).
struct ContribNode {
  std::string op_type, name, domain;
  AttributeMap attrs;
  std::vector<ValueId> inputs;
  std::vector<std::string> outputs;
};
// Adds the standard nodes that compute `n` (its inputs' shapes inferred) and returns the value of
// each of its outputs (kNoValue for one not requested); what gpuopt cannot read exactly (a KV
// cache, do_rotary, ...) is one error naming the node.
Result<std::vector<ValueId>> expand_contrib_node(Graph& g, const ContribNode& n);

}  // namespace gpuopt::onnx_detail
