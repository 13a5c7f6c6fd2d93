// What the pattern-matching fusion passes (GELU, attention, LayerNorm, epilogues, Conv+Relu) share:
// the producer of a value, its single reader, scalar constants, shape comparison. A Matcher is made once per
// pass run, after rebuild_producers(); nodes marked in `drop` are skipped as readers.
#pragma once

#include "ir/graph.h"
#include "passes/passes.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <string_view>
#include <vector>

namespace gpuopt {

// An op of the default ONNX domain.
inline bool is_default(const Node& n, std::string_view op) { return n.op_type == op && n.domain.empty(); }

// Both fully known (equal symbols count as equal sizes), of one rank and one dtype.
inline bool same_known_shape(const ValueInfo& a, const ValueInfo& b) {
  if (!a.rank_known || !b.rank_known || a.shape.size() != b.shape.size() || a.dtype != b.dtype) return false;
  for (size_t i = 0; i < a.shape.size(); ++i)
    if (a.shape[i] == kUnknownDim || a.shape[i] != b.shape[i]) return false;
  return true;
}

// A Reduce* node's axes, from the attribute (before opset 18) or a constant int64 second input,
// made non-negative for an input of rank `rank` and sorted; nullopt when they are not constant.
// Empty when absent (every axis, unless noop_with_empty_axes).
inline std::optional<std::vector<int64_t>> reduce_axes(const Graph& g, const Node& n, int64_t rank) {
  std::vector<int64_t> axes;
  if (n.inputs.size() > 1 && n.inputs[1] != kNoValue) {
    const Value& v = g.value(n.inputs[1]);
    if (!v.constant || v.constant->dtype() != DType::I64) return std::nullopt;
    for (int64_t i = 0; i < v.constant->numel(); ++i) axes.push_back(v.constant->data<int64_t>()[i]);
  } else {
    axes = n.attr_ints("axes");
  }
  for (int64_t& a : axes) a = a < 0 ? a + rank : a;
  std::sort(axes.begin(), axes.end());
  return axes;
}

// The two scalar constants are one value: the same node input (both absent counts), or equal
// constants of one element and one dtype.
inline bool same_scalar(const Graph& g, ValueId a, ValueId b) {
  if (a == b) return true;
  if (a == kNoValue || b == kNoValue) return false;
  const Value& va = g.value(a);
  const Value& vb = g.value(b);
  if (!va.constant || !vb.constant || va.constant->numel() != 1 || vb.constant->numel() != 1) return false;
  return va.constant->dtype() == vb.constant->dtype() && va.constant->get_f64(0) == vb.constant->get_f64(0);
}

class Matcher {
 public:
  explicit Matcher(Graph* g) : g_(g), consumers_(g->consumers()), drop_(g->nodes().size(), false) {}

  Graph& graph() { return *g_; }
  std::vector<bool>& drop() { return drop_; }
  // The end of a rewrite: erases the nodes marked dropped (nodes appended since stay) and sorts
  // the graph again.
  Status erase_dropped() {
    std::vector<bool> drop = drop_;
    drop.resize(g_->nodes().size(), false);
    erase_nodes(g_, drop);
    return g_->topo_sort();
  }

  // The node (default domain, op type `op`) that writes v, or nullptr.
  const Node* producer(ValueId v, std::string_view op) const {
    if (v == kNoValue) return nullptr;
    const int32_t p = g_->value(v).producer;
    if (p < 0 || drop_[static_cast<size_t>(p)]) return nullptr;
    const Node& n = g_->nodes()[static_cast<size_t>(p)];
    return n.op_type == op && n.domain.empty() ? &n : nullptr;
  }
  int32_t index_of(const Node* n) const { return static_cast<int32_t>(n - g_->nodes().data()); }

  // The nodes reading v (v not a graph output), else empty.
  std::vector<int32_t> readers(ValueId v) const {
    if (v == kNoValue || g_->value(v).is_graph_output) return {};
    std::vector<int32_t> r;
    for (int32_t c : consumers_[static_cast<size_t>(v)])
      if (!drop_[static_cast<size_t>(c)]) r.push_back(c);
    return r;
  }
  // The one node reading v, if it is of type `op` (default domain) and v is no graph output.
  const Node* sole_reader(ValueId v, std::string_view op) const {
    const auto r = readers(v);
    if (r.size() != 1) return nullptr;
    const Node& n = g_->nodes()[static_cast<size_t>(r[0])];
    return n.op_type == op && n.domain.empty() ? &n : nullptr;
  }

  // v is a constant with one element (any float or integer dtype): its value.
  bool scalar(ValueId v, double* out) const {
    if (v == kNoValue || !g_->value(v).constant || g_->value(v).constant->numel() != 1) return false;
    const Tensor& t = *g_->value(v).constant;
    if (t.dtype() == DType::String || t.dtype() == DType::Bool) return false;
    *out = t.get_f64(0);
    return true;
  }
  bool scalar_near(ValueId v, double want, double rel = 1e-4) const {
    double x;
    return scalar(v, &x) && std::abs(x - want) <= rel * std::abs(want);
  }
  // For a binary node reading `v`, its other input (kNoValue when both are v).
  static ValueId other(const Node& n, ValueId v) {
    if (n.inputs.size() != 2 || n.inputs[0] == n.inputs[1]) return kNoValue;
    return n.inputs[0] == v ? n.inputs[1] : n.inputs[1] == v ? n.inputs[0] : kNoValue;
  }
  void mark(const Node* n) { drop_[static_cast<size_t>(index_of(n))] = true; }

 private:
  Graph* g_;
  std::vector<std::vector<int32_t>> consumers_;
  std::vector<bool> drop_;
};

}  // namespace gpuopt
