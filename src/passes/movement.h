// What transpose_sink.cpp reasons with: dims as monomials (a constant times symbolic dims, so
// 4*batch is known to be batch's 4 heads), the monomial shapes and shape values of a graph's
// tensors (derived through Reshape/Transpose/Squeeze/Unsqueeze and the shape arithmetic that
// builds Reshape targets, where ValueInfo keeps only "unknown"), and a chain of data-movement
// ops composed into atoms: each dim split into its smallest pieces, the pieces permuted, then
// grouped again. Such a chain is at most Reshape -> Transpose -> Reshape.
#pragma once

#include "ir/graph.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <optional>
#include <vector>

namespace gpuopt {

struct Mono {
  int64_t c = 1;              // a constant (a literal -1 or 0 in a Reshape target too)
  std::vector<int64_t> syms;  // symbolic dims (kFirstSymbolDim - k), sorted, with repeats
  bool operator==(const Mono&) const = default;
  bool is_const() const { return syms.empty(); }
  bool is_one() const { return c == 1 && syms.empty(); }
};
Mono mono_mul(const Mono& a, const Mono& b);
// a / b when b divides a exactly (constant and symbols), else nothing.
std::optional<Mono> mono_div(const Mono& a, const Mono& b);
using MShape = std::vector<Mono>;

// Monomial shapes and shape values, memoized; the graph must have inferred shapes.
class MonoShapes {
 public:
  explicit MonoShapes(const Graph& g) : g_(g) {}
  std::optional<MShape> shape(ValueId v);
  // The elements of a small integer tensor (a constant, a dims_value, or shape arithmetic over
  // Shape/Gather/Slice/Concat/Unsqueeze/Squeeze/Cast/Mul/Div).
  std::optional<MShape> value(ValueId v);

 private:
  std::optional<MShape> derive_shape(const Node& n, ValueId v);
  std::optional<MShape> derive_value(const Node& n);
  const Graph& g_;
  std::map<ValueId, std::optional<MShape>> shapes_, values_;
  int depth_ = 0;
};

// A chain of Transpose/Reshape/Squeeze/Unsqueeze applied to a tensor of shape `src`.
class AtomChain {
 public:
  explicit AtomChain(const MShape& src);
  bool transpose(const std::vector<int64_t>& perm);
  bool reshape(const MShape& out);
  bool squeeze(std::vector<int64_t> axes);
  bool unsqueeze(std::vector<int64_t> axes);

  // The same movement as [Reshape] -> [Transpose] -> [Reshape] (each absent when not needed).
  struct Plan {
    std::optional<MShape> pre;        // Reshape of the source to the permuted blocks
    std::vector<int64_t> perm;        // empty: no Transpose
    std::optional<MShape> post;       // Reshape to the final shape
  };
  Plan plan() const;
  MShape final_shape() const;

 private:
  Mono size_of(const std::vector<int>& atoms) const;
  void split(int atom, const Mono& first);
  std::vector<Mono> atom_;
  std::vector<std::vector<int>> src_, cur_;  // atom ids per source dim / per current dim
};

// A Reshape target for `in` -> `out`: a dim equal to the input's at the same place is 0 (copy),
// a constant is itself, at most one other dim is -1. Nothing when that cannot say `out`.
std::optional<std::vector<int64_t>> reshape_target(const MShape& in, const MShape& out);

// What the rewrite steps of transpose_sink.cpp and movement_chains.cpp share.
namespace movement {

inline bool is_op(const Node& n, std::string_view op) { return n.op_type == op && n.domain.empty(); }

inline bool is_movement(const Node& n) {
  if (!n.domain.empty() || n.outputs.size() != 1 || n.inputs.empty() || n.inputs[0] == kNoValue) return false;
  return n.op_type == "Transpose" || (n.op_type == "Reshape" && n.inputs.size() == 2) || n.op_type == "Squeeze" ||
         n.op_type == "Unsqueeze";
}

inline bool is_unary(const Node& n) {
  static constexpr std::string_view kOps[] = {"Relu", "Gelu", "Erf", "Tanh", "Sigmoid", "Cast", "Neg", "Sqrt", "Exp", "Abs"};
  return n.domain.empty() && n.inputs.size() == 1 && n.outputs.size() == 1 &&
         std::find(std::begin(kOps), std::end(kOps), n.op_type) != std::end(kOps);
}

inline bool is_binary(const Node& n) {
  return n.domain.empty() && n.inputs.size() == 2 && n.outputs.size() == 1 &&
         (n.op_type == "Add" || n.op_type == "Sub" || n.op_type == "Mul" || n.op_type == "Div");
}

inline bool is_plain_shape(const Node& n) { return is_op(n, "Shape") && !n.has_attr("start") && !n.has_attr("end"); }

inline std::vector<int64_t> perm_of(const Node& t, size_t rank) {
  std::vector<int64_t> p = t.attr_ints("perm");
  if (p.empty())
    for (size_t i = rank; i-- > 0;) p.push_back(static_cast<int64_t>(i));
  return p;
}

inline ValueId i64_const(Graph* g, const std::string& name, const std::vector<int64_t>& v) {
  return g->add_constant(name, Tensor::from_vector<int64_t>(DType::I64, {static_cast<int64_t>(v.size())}, v));
}

// A node name without the suffixes these rewrites add, so a node moved twice is not named
// ".../hoisted/hoisted/perm".
inline std::string base_name(std::string name) {
  static constexpr std::string_view kSuffixes[] = {"/perm", "/split", "/merge", "/hoisted", "/permute"};
  for (bool again = true; again;) {
    again = false;
    for (std::string_view s : kSuffixes)
      if (name.size() > s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0) {
        name.resize(name.size() - s.size());
        again = true;
      }
  }
  return name;
}

// Appends a node whose one output is the existing value `out`.
inline void add_writing(Graph* g, Op op, const std::string& name, std::vector<ValueId> ins, ValueId out, AttributeMap attrs = {}) {
  const ValueId fresh = g->add_node(op, name, std::move(ins), 1, std::move(attrs))[0];
  g->nodes().back().outputs[0] = out;
  g->value(fresh).producer = -1;
}

// The state one rewrite round works on: readers and monomial shapes of the graph as it was at the
// start of the round; nodes touched this round are not looked at again.
struct Round {
  Graph* g;
  std::vector<std::vector<int32_t>> readers;
  MonoShapes shapes;
  std::vector<bool> touched, drop;
  int changes = 0;
  explicit Round(Graph* graph)
      : g(graph), readers(graph->consumers()), shapes(*graph), touched(graph->nodes().size(), false),
        drop(graph->nodes().size(), false) {}
  const Node& node(int32_t i) const { return g->nodes()[static_cast<size_t>(i)]; }
  // A node of the graph as the round found it (not one appended by this round's rewrites).
  bool old(int32_t i) const { return i >= 0 && static_cast<size_t>(i) < touched.size(); }
  std::vector<int32_t> of(ValueId v) const {
    return v >= 0 && static_cast<size_t>(v) < readers.size() ? readers[static_cast<size_t>(v)] : std::vector<int32_t>{};
  }
  bool output(ValueId v) const { return g->value(v).is_graph_output; }
  size_t rank(ValueId v) const {
    const ValueInfo& i = g->value(v).info;
    return i.rank_known ? i.shape.size() : SIZE_MAX;
  }
  bool one_element(ValueId v) const {
    const ValueInfo& i = g->value(v).info;
    return i.rank_known && std::all_of(i.shape.begin(), i.shape.end(), [](int64_t d) { return d == 1; });
  }
  // An op acting on the last axis alone (the rest are batch), reading `v` as its data input.
  bool last_axis_op(const Node& n, ValueId v, bool keeps_last) const {
    if (is_unary(n)) return n.inputs[0] == v;
    if (is_op(n, "MatMul") && n.inputs.size() == 2)
      return n.inputs[0] == v && n.inputs[1] != v && rank(n.inputs[1]) == 2 && keeps_last;
    if (is_binary(n)) {
      const ValueId other = other_input(n, v);
      if (other == kNoValue) return false;
      return one_element(other) || (rank(other) <= 1 && keeps_last);
    }
    return false;
  }
  static ValueId other_input(const Node& n, ValueId v) {
    if (n.inputs[0] == n.inputs[1]) return kNoValue;
    return n.inputs[0] == v ? n.inputs[1] : n.inputs[1] == v ? n.inputs[0] : kNoValue;
  }
  // Whether v flows, through last-axis ops read once, into a movement op.
  bool reaches_movement(ValueId v, int depth) const {
    if (output(v) || depth > 6) return false;
    int data = 0;
    for (int32_t r : of(v)) {
      const Node& n = node(r);
      if (is_plain_shape(n)) continue;
      ++data;
      if (is_movement(n) && n.inputs[0] == v) continue;
      if (is_op(n, "Gather") && n.inputs[0] == v) continue;
      if (last_axis_op(n, v, true) && reaches_movement(n.outputs[0], depth + 1)) continue;
      return false;
    }
    return data > 0;
  }
  // Whether v comes, through last-axis ops whose output is read once, from a movement op.
  bool from_movement(ValueId v, int depth) const {
    const int32_t p = g->value(v).producer;
    if (!old(p) || depth > 6) return false;
    const Node& n = node(p);
    if (is_movement(n)) return true;
    if (n.inputs.empty() || of(v).size() != 1 || output(v)) return false;
    for (ValueId in : n.inputs)
      if (in != kNoValue && !g->value(in).constant && last_axis_op(n, in, true)) return from_movement(in, depth + 1);
    return false;
  }
};

// The rewrite steps (each returns how many rewrites it made; the caller sorts, infers and
// removes dead nodes after each).
int canonicalize_chains(Graph* g);
int unflatten_gemms(Graph* g);

}  // namespace movement
}  // namespace gpuopt
