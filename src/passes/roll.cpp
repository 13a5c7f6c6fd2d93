// Cyclic shifts as one Gather (window_attention.h). torch exports torch.roll(x, s, dim) as
//
//   Concat(Slice(x, [n - s, end) on a), Slice(x, [0, n - s) on a), axis a)
//
// two copies out and one back in, three launches per axis; Swin rolls its [B, H, W, C] map on H
// and W before every shifted block's windows and back after. The pair is Gather(x, idx, a) with
// the constant index map idx = [n - s, .., n - 1, 0, .., n - s - 1]; a roll on axis a followed
// by one on axis a + 1 (the next Gather reading only the first) is one Gather over the two axes
// flattened, between Reshapes (views): one copy for the whole shift.
#include "passes/match.h"
#include "passes/window_attention.h"

#include <numeric>

namespace gpuopt {

std::optional<ConstSlice> constant_slice(const Graph& g, const Node& n) {
  if (!is_default(n, "Slice") || n.inputs.empty() || n.inputs[0] == kNoValue) return std::nullopt;
  const ValueInfo& in = g.value(n.inputs[0]).info;
  if (!in.rank_known) return std::nullopt;
  const int64_t r = static_cast<int64_t>(in.shape.size());
  auto input = [&](size_t i) -> std::optional<std::vector<int64_t>> {
    if (i >= n.inputs.size() || n.inputs[i] == kNoValue) return std::vector<int64_t>{};
    const Value& v = g.value(n.inputs[i]);
    if (!v.constant) return std::nullopt;
    return v.constant->to_i64_vector();
  };
  ConstSlice s;
  if (n.has_attr("starts")) {  // Slice-1
    s.starts = n.attr_ints("starts");
    s.ends = n.attr_ints("ends");
    s.axes = n.attr_ints("axes");
  } else {
    auto st = input(1), en = input(2), ax = input(3), sp = input(4);
    if (!st || !en || !ax || !sp) return std::nullopt;
    s.starts = *st;
    s.ends = *en;
    s.axes = *ax;
    s.steps = *sp;
  }
  const size_t k = s.starts.size();
  if (s.axes.empty()) {
    s.axes.resize(k);
    std::iota(s.axes.begin(), s.axes.end(), 0);
  }
  if (s.steps.empty()) s.steps.assign(k, 1);
  if (s.ends.size() != k || s.axes.size() != k || s.steps.size() != k) return std::nullopt;
  for (int64_t& a : s.axes) {
    if (a < 0) a += r;
    if (a < 0 || a >= r) return std::nullopt;
  }
  return s;
}

namespace {

// The index map of Concat(Slice(x, [c, end)), Slice(x, [0, c))) along its axis, or nullopt.
std::optional<std::vector<int64_t>> roll_indices(const Matcher& m, const Node& cat, int64_t* axis, ValueId* src,
                                                 const Node** slices) {
  const Graph& g = const_cast<Matcher&>(m).graph();
  if (cat.inputs.size() != 2 || cat.inputs[0] == cat.inputs[1]) return std::nullopt;
  const Node* hi = m.producer(cat.inputs[0], "Slice");
  const Node* lo = m.producer(cat.inputs[1], "Slice");
  if (!hi || !lo || hi->inputs[0] != lo->inputs[0] || m.readers(cat.inputs[0]).size() != 1 ||
      m.readers(cat.inputs[1]).size() != 1)
    return std::nullopt;
  const ValueInfo& x = g.value(hi->inputs[0]).info;
  const auto h = constant_slice(g, *hi), l = constant_slice(g, *lo);
  if (!x.rank_known || !h || !l || h->starts.size() != 1 || l->starts.size() != 1 || h->axes[0] != l->axes[0] ||
      h->steps[0] != 1 || l->steps[0] != 1)
    return std::nullopt;
  int64_t a = cat.attr_i("axis", 0);
  const int64_t r = static_cast<int64_t>(x.shape.size());
  if (a < 0) a += r;
  if (a != h->axes[0]) return std::nullopt;
  const int64_t n = x.shape[static_cast<size_t>(a)];
  if (!dim_is_known(n) || n < 2) return std::nullopt;
  auto clamp = [n](int64_t v) { return std::clamp<int64_t>(v < 0 ? v + n : v, 0, n); };
  const int64_t c = clamp(h->starts[0]);
  if (c <= 0 || c >= n || clamp(h->ends[0]) != n || clamp(l->starts[0]) != 0 || clamp(l->ends[0]) != c) return std::nullopt;
  std::vector<int64_t> idx(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) idx[static_cast<size_t>(i)] = (c + i) % n;
  *axis = a;
  *src = hi->inputs[0];
  slices[0] = hi;
  slices[1] = lo;
  return idx;
}

ValueId i64s(Graph* g, const std::string& name, std::vector<int64_t> v) {
  const int64_t n = static_cast<int64_t>(v.size());
  return g->add_constant(name, Tensor::from_vector<int64_t>(DType::I64, {n}, std::move(v)));
}

// Two Gathers on adjacent axes a, a + 1 of x (the first read only by the second) as one over
// the two axes flattened. Returns the number of pairs merged.
Result<int> merge_adjacent(Graph* g) {
  g->rebuild_producers();
  Matcher m(g);
  struct Pair {
    ValueId x, y;
    int64_t axis;
    std::vector<int64_t> flat, dims, idx;  // x flattened and the result, 0 before `axis`; the index map
    std::string name;
  };
  std::vector<Pair> todo;
  for (const Node& outer : g->nodes()) {
    if (!is_default(outer, "Gather") || outer.inputs.size() != 2) continue;
    const Node* inner = m.producer(outer.inputs[0], "Gather");
    if (!inner || inner->inputs.size() != 2 || m.readers(outer.inputs[0]).size() != 1) continue;
    const ValueInfo& x = g->value(inner->inputs[0]).info;
    const Value& i1 = g->value(inner->inputs[1]);
    const Value& i2 = g->value(outer.inputs[1]);
    if (!x.rank_known || !i1.constant || !i2.constant || i1.constant->rank() != 1 || i2.constant->rank() != 1) continue;
    const int64_t r = static_cast<int64_t>(x.shape.size());
    int64_t a = inner->attr_i("axis", 0), b = outer.attr_i("axis", 0);
    a = a < 0 ? a + r : a;
    b = b < 0 ? b + r : b;
    if (b != a + 1 || b >= r) continue;
    bool known = true;  // and not empty: a 0 in a Reshape target copies the input's dim
    for (int64_t d = a; d < r; ++d) known = known && dim_is_known(x.shape[static_cast<size_t>(d)]) && x.shape[static_cast<size_t>(d)] > 0;
    if (!known) continue;
    const int64_t na = x.shape[static_cast<size_t>(a)], nb = x.shape[static_cast<size_t>(b)];
    std::vector<int64_t> v1 = i1.constant->to_i64_vector(), v2 = i2.constant->to_i64_vector();
    bool in_range = true;
    for (int64_t& v : v1) in_range = in_range && (v += v < 0 ? na : 0) >= 0 && v < na;
    // The outer Gather indexes the inner's output, whose axis b still has x's extent nb.
    for (int64_t& v : v2) in_range = in_range && (v += v < 0 ? nb : 0) >= 0 && v < nb;
    if (!in_range) continue;
    Pair p;
    p.x = inner->inputs[0];
    p.y = outer.outputs[0];
    p.axis = a;
    p.name = outer.name.empty() ? inner->name + "/merged" : outer.name + "/merged";
    if (v1.empty() || v2.empty()) continue;
    p.flat.assign(static_cast<size_t>(a), 0);
    p.flat.push_back(na * nb);
    p.dims.assign(static_cast<size_t>(a), 0);
    p.dims.push_back(static_cast<int64_t>(v1.size()));
    p.dims.push_back(static_cast<int64_t>(v2.size()));
    for (int64_t d = b + 1; d < r; ++d) {
      p.flat.push_back(x.shape[static_cast<size_t>(d)]);
      p.dims.push_back(x.shape[static_cast<size_t>(d)]);
    }
    for (int64_t u : v1)
      for (int64_t w : v2) p.idx.push_back(u * nb + w);
    m.mark(inner);
    m.mark(&outer);
    todo.push_back(std::move(p));
  }
  for (const Pair& p : todo) {
    const ValueId xf = g->add_node(Op::Reshape, p.name + "/flat", {p.x, i64s(g, p.name + "/flat_shape", p.flat)}, 1)[0];
    const ValueId gi = i64s(g, p.name + "/indices", p.idx);
    const ValueId yf = g->add_node(Op::Gather, p.name, {xf, gi}, 1, {{"axis", int_attr(p.axis)}})[0];
    const ValueId y = g->add_node(Op::Reshape, p.name + "/unflat", {yf, i64s(g, p.name + "/shape", p.dims)}, 1)[0];
    g->nodes().back().outputs[0] = p.y;
    g->value(y).producer = -1;
  }
  if (!todo.empty()) GPUOPT_RETURN_IF_ERROR(m.erase_dropped());
  return static_cast<int>(todo.size());
}

}  // namespace

Result<PassStats> rolls_as_gathers(Graph* g) {
  PassStats stats;
  g->rebuild_producers();
  Matcher m(g);
  for (Node& n : g->nodes()) {
    if (!is_default(n, "Concat")) continue;
    int64_t axis = 0;
    ValueId src = kNoValue;
    const Node* slices[2] = {nullptr, nullptr};
    auto idx = roll_indices(m, n, &axis, &src, slices);
    if (!idx) continue;
    m.mark(slices[0]);
    m.mark(slices[1]);
    // The Concat becomes the Gather in place (same output value and name).
    const int64_t len = static_cast<int64_t>(idx->size());
    const ValueId iv = g->add_constant(n.name + "/roll_indices", Tensor::from_vector<int64_t>(DType::I64, {len}, std::move(*idx)));
    n.op_type = "Gather";
    n.op = Op::Gather;
    n.inputs = {src, iv};
    n.attrs = {{"axis", int_attr(axis)}};
    ++stats.rewritten;
    stats.removed += 2;
  }
  if (stats.rewritten == 0) return stats;
  GPUOPT_RETURN_IF_ERROR(m.erase_dropped());
  GPUOPT_ASSIGN_OR_RETURN(const int merged, merge_adjacent(g));
  stats.rewritten += merged;
  GPUOPT_RETURN_IF_ERROR(g->infer_shapes());
  return stats;
}

}  // namespace gpuopt
