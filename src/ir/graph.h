// The IR: a Graph owns Values (edges) and Nodes (ops) in topological order.
//
//   Graph g;
//   ValueId x = g.add_input("x", DType::F32, {kFirstSymbolDim, 3});   // symbolic batch "N"
//   ValueId y = g.add_node(Op::Relu, "relu1", {x}, 1)[0];
//   g.mark_output(y);
//   GPUOPT_RETURN_IF_ERROR(g.infer_shapes());
#pragma once

#include "core/status.h"
#include "core/tensor.h"
#include "ir/attribute.h"
#include "ir/op_table.h"

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace gpuopt {

using ValueId = int32_t;
constexpr ValueId kNoValue = -1;  // absent optional input

struct Value {
  std::string name;
  ValueInfo info;                 // dtype/shape; info.value stays null here (see `constant`)
  std::optional<Tensor> constant; // initializer, Constant node output, or folded
  ValueInfo declared;             // type/shape the model declared (inputs, outputs, value_info)
  int32_t producer = -1;          // index of producing node, -1 for inputs/constants
  bool is_graph_input = false;
  bool is_graph_output = false;
};

// Int attribute of a node with subgraphs (If, Loop, Scan): how many of its inputs, at the end,
// are outer values its subgraphs read (Attribute::g). Written by the importer.
constexpr std::string_view kCapturesAttr = "gpuopt.captures";

struct Node {
  Op op{};
  std::string name;
  std::string op_type;  // as written in the model
  std::string domain;   // "" = default ONNX domain
  std::vector<ValueId> inputs;
  std::vector<ValueId> outputs;
  AttributeMap attrs;

  bool has_attr(std::string_view n) const { return attrs.find(n) != attrs.end(); }
  int64_t attr_i(std::string_view n, int64_t def) const;
  float attr_f(std::string_view n, float def) const;
  std::string attr_s(std::string_view n, const std::string& def) const;
  std::vector<int64_t> attr_ints(std::string_view n, std::vector<int64_t> def = {}) const;
  std::vector<float> attr_floats(std::string_view n, std::vector<float> def = {}) const;
  const Attribute* attr(std::string_view n) const;
};

class Graph {
 public:
  ValueId add_value(std::string name);
  ValueId add_input(std::string name, DType dtype, Shape shape);
  ValueId add_constant(std::string name, Tensor value);
  // Appends a node with fresh output values named "<node>:<i>" unless names are given.
  std::vector<ValueId> add_node(Op op, std::string name, std::vector<ValueId> inputs, size_t num_outputs,
                                AttributeMap attrs = {}, std::vector<std::string> output_names = {});
  void mark_output(ValueId v);

  Value& value(ValueId id) { return values_[static_cast<size_t>(id)]; }
  const Value& value(ValueId id) const { return values_[static_cast<size_t>(id)]; }
  std::optional<ValueId> find_value(std::string_view name) const;
  std::vector<Value>& values() { return values_; }
  const std::vector<Value>& values() const { return values_; }
  std::vector<Node>& nodes() { return nodes_; }
  const std::vector<Node>& nodes() const { return nodes_; }
  const std::vector<ValueId>& inputs() const { return inputs_; }
  const std::vector<ValueId>& outputs() const { return outputs_; }
  std::vector<ValueId>& mutable_inputs() { return inputs_; }
  std::vector<ValueId>& mutable_outputs() { return outputs_; }

  // Symbolic dimension names: id kFirstSymbolDim - k <-> symbols()[k].
  int64_t symbol_dim(const std::string& name);
  const std::vector<std::string>& symbols() const { return symbols_; }
  std::string shape_string(const Shape& s) const;  // "[N,3,224,224]"
  std::string symbol_name(int64_t dim) const;      // "N" for a symbolic dim, "?" unknown, "3"
  // Replaces symbolic dim `name` by `value` in every value's info and declared shape (then call
  // infer_shapes). Returns false when the graph has no such symbol.
  bool bind_symbol(const std::string& name, int64_t value);

  // Recomputes Value::producer from the node list (after passes edit nodes).
  void rebuild_producers();
  // For each value, the indices of the nodes that read it.
  std::vector<std::vector<int32_t>> consumers() const;
  // Value::info plus the constant (as ValueInfo::value) when the value has one.
  ValueInfo info_with_value(ValueId id) const;

  int opset = 17;                              // the default domain's ("" / ai.onnx)
  std::map<std::string, int> domain_opsets;    // the other domains the model imports
  // The model's opset for the node's domain: it picks the node's op version (op_table.h).
  // A domain the model does not import (a node a pass wrote in com.microsoft / ai.gpuopt) is 1.
  int opset_for(const Node& node) const;
  int64_t ir_version = 0;
  std::string producer_name;
  std::string name;

  // Sorts nodes topologically; error names a cycle or a value with no producer.
  Status topo_sort();
  // Runs every node's shape function in order (nodes must be topologically sorted), filling
  // Value::info; dims inference leaves unknown are taken from Value::declared. A graph input or
  // a value whose concrete shape would take more than `max_tensor_bytes` (0: physical memory)
  // refuses the model, naming the input or node, the shape and the bytes.
  Status infer_shapes(size_t max_tensor_bytes = 0);
  // The same size check over the graph as it stands (after passes and precision conversion):
  // every input and node output with a concrete shape must fit in `max_tensor_bytes`.
  Status check_tensor_sizes(size_t max_tensor_bytes) const;

 private:
  std::vector<Value> values_;
  std::vector<Node> nodes_;
  std::vector<ValueId> inputs_;
  std::vector<ValueId> outputs_;
  std::vector<std::string> symbols_;
};

}  // namespace gpuopt
