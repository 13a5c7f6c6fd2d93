#include "ir/graph.h"

#include "core/log.h"
#include "ir/eval.h"

#include <algorithm>
#include <queue>

namespace gpuopt {

ValueId Graph::add_value(std::string name) {
  Value v;
  v.name = std::move(name);
  values_.push_back(std::move(v));
  return static_cast<ValueId>(values_.size() - 1);
}

ValueId Graph::add_input(std::string name, DType dtype, Shape shape) {
  ValueId id = add_value(std::move(name));
  Value& v = value(id);
  v.info.dtype = dtype;
  v.info.rank_known = true;
  v.info.shape = std::move(shape);
  v.is_graph_input = true;
  inputs_.push_back(id);
  return id;
}

ValueId Graph::add_constant(std::string name, Tensor t) {
  ValueId id = add_value(std::move(name));
  Value& v = value(id);
  v.info.dtype = t.dtype();
  v.info.rank_known = true;
  v.info.shape = t.shape();
  v.constant = std::move(t);
  return id;
}

std::vector<ValueId> Graph::add_node(Op op, std::string name, std::vector<ValueId> inputs, size_t num_outputs,
                                     AttributeMap attrs, std::vector<std::string> output_names) {
  Node n;
  n.op = op;
  n.name = std::move(name);
  n.op_type = std::string(op_name(op));
  n.inputs = std::move(inputs);
  n.attrs = std::move(attrs);
  const int32_t index = static_cast<int32_t>(nodes_.size());
  for (size_t i = 0; i < num_outputs; ++i) {
    std::string vname = i < output_names.size() ? output_names[i] : fmt::format("{}:{}", n.name, i);
    ValueId id = add_value(std::move(vname));
    values_[static_cast<size_t>(id)].producer = index;
    n.outputs.push_back(id);
  }
  nodes_.push_back(std::move(n));
  return nodes_.back().outputs;
}

void Graph::mark_output(ValueId v) {
  value(v).is_graph_output = true;
  outputs_.push_back(v);
}

std::optional<ValueId> Graph::find_value(std::string_view name) const {
  for (size_t i = 0; i < values_.size(); ++i)
    if (values_[i].name == name) return static_cast<ValueId>(i);
  return std::nullopt;
}

int64_t Graph::symbol_dim(const std::string& name) {
  for (size_t k = 0; k < symbols_.size(); ++k)
    if (symbols_[k] == name) return kFirstSymbolDim - static_cast<int64_t>(k);
  symbols_.push_back(name);
  return kFirstSymbolDim - static_cast<int64_t>(symbols_.size() - 1);
}

std::string Graph::symbol_name(int64_t dim) const {
  if (dim >= 0) return fmt::format("{}", dim);
  if (dim == kUnknownDim) return "?";
  const size_t k = static_cast<size_t>(kFirstSymbolDim - dim);
  return k < symbols_.size() ? symbols_[k] : fmt::format("s{}", k);
}

bool Graph::bind_symbol(const std::string& name, int64_t value) {
  int64_t id = 0;
  bool found = false;
  for (size_t k = 0; k < symbols_.size(); ++k)
    if (symbols_[k] == name) {
      id = kFirstSymbolDim - static_cast<int64_t>(k);
      found = true;
    }
  if (!found) return false;
  for (Value& v : values_)
    for (Shape* s : {&v.info.shape, &v.declared.shape})
      for (int64_t& d : *s)
        if (d == id) d = value;
  return true;
}

std::string Graph::shape_string(const Shape& s) const {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) out += ",";
    out += symbol_name(s[i]);
  }
  return out + "]";
}

void Graph::rebuild_producers() {
  for (Value& v : values_) v.producer = -1;
  for (size_t n = 0; n < nodes_.size(); ++n)
    for (ValueId o : nodes_[n].outputs)
      if (o != kNoValue) values_[static_cast<size_t>(o)].producer = static_cast<int32_t>(n);
}

std::vector<std::vector<int32_t>> Graph::consumers() const {
  std::vector<std::vector<int32_t>> users(values_.size());
  for (size_t n = 0; n < nodes_.size(); ++n)
    for (ValueId in : nodes_[n].inputs)
      if (in != kNoValue) users[static_cast<size_t>(in)].push_back(static_cast<int32_t>(n));
  return users;
}

// Kahn's algorithm; among ready nodes the one earliest in the current order goes first, so an
// already sorted graph keeps its order (and its node indices) exactly.
Status Graph::topo_sort() {
  rebuild_producers();
  const size_t n = nodes_.size();
  std::vector<int> missing(n, 0);
  std::vector<std::vector<int32_t>> dependents(n);
  for (size_t i = 0; i < n; ++i) {
    for (ValueId in : nodes_[i].inputs) {
      if (in == kNoValue) continue;
      if (in < 0 || static_cast<size_t>(in) >= values_.size())
        return Status::Internal("{}: input value id {} out of range", node_label(nodes_[i]), in);
      const Value& v = values_[static_cast<size_t>(in)];
      if (v.producer >= 0) {
        ++missing[i];
        dependents[static_cast<size_t>(v.producer)].push_back(static_cast<int32_t>(i));
      } else if (!v.is_graph_input && !v.constant) {
        return Status::InvalidArgument("{}: input '{}' is not a graph input, an initializer or the output of any node",
                                       node_label(nodes_[i]), v.name);
      }
    }
  }
  std::priority_queue<int32_t, std::vector<int32_t>, std::greater<>> ready;
  for (size_t i = 0; i < n; ++i)
    if (missing[i] == 0) ready.push(static_cast<int32_t>(i));
  std::vector<int32_t> order;
  order.reserve(n);
  while (!ready.empty()) {
    int32_t i = ready.top();
    ready.pop();
    order.push_back(i);
    for (int32_t d : dependents[static_cast<size_t>(i)])
      if (--missing[static_cast<size_t>(d)] == 0) ready.push(d);
  }
  if (order.size() != n) {
    for (size_t i = 0; i < n; ++i)
      if (missing[i] > 0)
        return Status::InvalidArgument("{}: the graph has a cycle through this node", node_label(nodes_[i]));
  }
  for (ValueId o : outputs_) {
    const Value& v = values_[static_cast<size_t>(o)];
    if (v.producer < 0 && !v.is_graph_input && !v.constant)
      return Status::InvalidArgument("graph output '{}' is not produced by any node", v.name);
  }
  std::vector<Node> sorted;
  sorted.reserve(n);
  for (int32_t i : order) sorted.push_back(std::move(nodes_[static_cast<size_t>(i)]));
  nodes_ = std::move(sorted);
  rebuild_producers();
  return Status::Ok();
}

namespace {

// Keeps what the model declared where inference knows less (a dim it could not compute).
void merge_declared(ValueInfo* inferred, const ValueInfo& declared) {
  if (inferred->dtype == DType::Undefined) inferred->dtype = declared.dtype;
  if (!declared.rank_known) return;
  if (!inferred->rank_known) {
    inferred->rank_known = true;
    inferred->shape = declared.shape;
    return;
  }
  if (inferred->shape.size() != declared.shape.size()) return;
  for (size_t d = 0; d < declared.shape.size(); ++d)
    if (inferred->shape[d] == kUnknownDim) inferred->shape[d] = declared.shape[d];
}

}  // namespace

int Graph::opset_for(const Node& node) const {
  if (node.domain.empty() || node.domain == "ai.onnx") return opset;
  auto it = domain_opsets.find(node.domain);
  return it == domain_opsets.end() ? 1 : it->second;
}

ValueInfo Graph::info_with_value(ValueId id) const {
  const Value& v = value(id);
  ValueInfo vi = v.info;
  if (v.constant) {
    vi.dtype = v.constant->dtype();
    vi.rank_known = true;
    vi.shape = v.constant->shape();
    vi.value = &*v.constant;
  }
  return vi;
}

namespace {
Status check_input_size(const Value& v, size_t max_tensor_bytes) {
  if (!v.info.rank_known) return Status::Ok();
  const Status st = check_tensor_size(v.info.dtype, v.info.shape, max_tensor_bytes);
  return st.ok() ? st : Status(st.code(), fmt::format("input '{}': {}", v.name, st.message()));
}
}  // namespace

Status Graph::check_tensor_sizes(size_t max_tensor_bytes) const {
  for (ValueId in : inputs_) GPUOPT_RETURN_IF_ERROR(check_input_size(value(in), max_tensor_bytes));
  for (const Node& node : nodes_)
    for (size_t i = 0; i < node.outputs.size(); ++i)
      if (node.outputs[i] != kNoValue)
        GPUOPT_RETURN_IF_ERROR(check_output_size(node, i, value(node.outputs[i]).info, max_tensor_bytes));
  return Status::Ok();
}

Status Graph::infer_shapes(size_t max_tensor_bytes) {
  for (ValueId in : inputs_) GPUOPT_RETURN_IF_ERROR(check_input_size(value(in), max_tensor_bytes));
  std::vector<ValueInfo> in_infos;
  std::vector<const ValueInfo*> in_ptrs;
  for (const Node& node : nodes_) {
    in_infos.assign(node.inputs.size(), ValueInfo{});
    in_ptrs.assign(node.inputs.size(), nullptr);
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      if (node.inputs[i] == kNoValue) continue;
      in_infos[i] = info_with_value(node.inputs[i]);
      in_ptrs[i] = &in_infos[i];
    }
    // Trailing absent optional inputs are dropped so `num_inputs()` counts what is present.
    while (!in_ptrs.empty() && in_ptrs.back() == nullptr) in_ptrs.pop_back();
    GPUOPT_ASSIGN_OR_RETURN(std::vector<ValueInfo> outs, infer_node(node, in_ptrs, opset_for(node), max_tensor_bytes));
    for (size_t i = 0; i < node.outputs.size() && i < outs.size(); ++i) {
      if (node.outputs[i] == kNoValue) continue;
      Value& v = value(node.outputs[i]);
      outs[i].value = nullptr;
      merge_declared(&outs[i], v.declared);
      GPUOPT_RETURN_IF_ERROR(check_output_size(node, i, outs[i], max_tensor_bytes));
      v.info = std::move(outs[i]);
    }
  }
  return Status::Ok();
}

}  // namespace gpuopt
