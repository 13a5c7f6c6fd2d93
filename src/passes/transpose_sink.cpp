// Transposes the exporters write around attention, moved and merged until they cancel or take
// the head-split form fuse_attention reads (Reshape [B,S,H,D] -> Transpose):
//
//  - chains: Transpose/Reshape/Squeeze/Unsqueeze runs (intermediates read once, or by Shape)
//    composed on dim atoms (movement.h) and written as at most Reshape -> Transpose -> Reshape,
//    when that has fewer Transposes (or as many and fewer nodes). torch's MultiheadAttention
//    (sequence-first [S, B*H, D] head splits) and the dynamo exporter's K^T (flattened to
//    [B*H, S, D], transposed, unflattened) become one head-split Transpose each;
//  - sinking: a Transpose whose readers are all MatMul by a 2-D matrix, an elementwise op with
//    a scalar or last-axis operand, or a Gather of one index (torchvision's packed q/k/v select)
//    goes below them, when what they feed is a movement chain it can join;
//  - hoisting: a Transpose after such an op (keeping the last axis) goes above it when the op
//    reads a movement chain;
//  - Reshape [M, K] -> Gemm -> Reshape [.., N] (torch's Linear on a 3-D tensor in the legacy
//    export) becomes MatMul + Add on the unflattened tensor, so the two steps above see through it.
//  - Shape of a Transpose reads the Transpose's input (a Gather of its dims);
//  - then a packed projection read by parts (q/k/v Gathers, a last-axis Split) becomes one
//    MatMul per part.
// Every rewrite is exact: the same elements in the same order for every value of the symbols.
#include "passes/movement.h"
#include "passes/passes.h"

#include <algorithm>

namespace gpuopt {
namespace {

using namespace movement;

// Shape(Transpose(x, p)) -> Gather(Shape(x), p).
void shape_through(Round& R, Node& shape, ValueId x, const std::vector<int64_t>& p) {
  const ValueId out = shape.outputs[0];
  const ValueId s = R.g->add_value(shape.name + "/of_input");
  shape.inputs[0] = x;
  shape.outputs[0] = s;
  const std::string base = shape.name;
  add_writing(R.g, Op::Gather, base + "/perm", {s, i64_const(R.g, base + "/perm_idx", p)}, out, {{"axis", int_attr(0)}});
}

int sink(Graph* g) {
  Round R(g);
  const size_t n0 = g->nodes().size();
  for (size_t ti = 0; ti < n0; ++ti) {
    const Node& t = R.node(static_cast<int32_t>(ti));
    if (!is_op(t, "Transpose") || R.touched[ti] || t.inputs.empty() || R.output(t.outputs[0])) continue;
    const ValueId x = t.inputs[0], w = t.outputs[0];
    const size_t r = R.rank(x);
    if (r == SIZE_MAX || r == 0) continue;
    const std::vector<int64_t> p = perm_of(t, r);
    const bool keeps_last = p.back() == static_cast<int64_t>(r) - 1;
    const auto rs = R.of(w);
    bool ok = !rs.empty(), any_data = false;
    for (int32_t ri : rs) {
      const Node& n = R.node(ri);
      if (R.touched[static_cast<size_t>(ri)]) ok = false;
      if (is_plain_shape(n)) continue;
      any_data = true;
      const bool gather = is_op(n, "Gather") && n.inputs.size() == 2 && n.inputs[0] == w && n.inputs[1] != w &&
                          g->value(n.inputs[1]).constant && g->value(n.inputs[1]).constant->numel() == 1;
      if (!(gather || R.last_axis_op(n, w, keeps_last)) || !R.reaches_movement(n.outputs[0], 0)) ok = false;
    }
    if (!ok || !any_data) continue;
    R.touched[ti] = true;
    for (int32_t ri : rs) R.touched[static_cast<size_t>(ri)] = true;
    ++R.changes;
    for (int32_t ri : rs) {
      Node& n = g->nodes()[static_cast<size_t>(ri)];
      if (is_plain_shape(n)) {
        shape_through(R, n, x, p);
        continue;
      }
      std::vector<int64_t> q = p;
      if (is_op(n, "Gather")) {
        int64_t a = n.attr_i("axis", 0);
        if (a < 0) a += static_cast<int64_t>(r);
        a = std::clamp<int64_t>(a, 0, static_cast<int64_t>(r) - 1);  // shape inference checked it
        n.attrs["axis"] = int_attr(p[static_cast<size_t>(a)]);
        if (g->value(n.inputs[1]).constant->shape().empty()) {  // one index: the axis goes
          const int64_t gone = p[static_cast<size_t>(a)];
          q.erase(q.begin() + a);
          for (int64_t& j : q) j -= j > gone;
        }
      }
      for (ValueId& in : n.inputs)
        if (in == w) in = x;
      const ValueId y = n.outputs[0];
      const ValueId pre = g->add_value(n.name + "/unpermuted");
      n.outputs[0] = pre;
      const std::string name = base_name(n.name) + "/permute";
      add_writing(g, Op::Transpose, name, {pre}, y, {{"perm", ints_attr(q)}});
    }
  }
  return R.changes;
}

int hoist(Graph* g) {
  Round R(g);
  const size_t n0 = g->nodes().size();
  for (size_t ti = 0; ti < n0; ++ti) {
    const Node& t = R.node(static_cast<int32_t>(ti));
    if (!is_op(t, "Transpose") || t.inputs.empty()) continue;
    const ValueId v = t.inputs[0];
    const int32_t li = g->value(v).producer;
    const size_t r = R.rank(v);
    if (!R.old(li) || r == SIZE_MAX || r == 0 || R.of(v).size() != 1 || R.output(v) || R.touched[static_cast<size_t>(li)]) continue;
    const std::vector<int64_t> p = perm_of(t, r);
    if (p.back() != static_cast<int64_t>(r) - 1) continue;
    const Node& l = R.node(li);
    ValueId u = kNoValue;
    for (ValueId in : l.inputs)
      if (in != kNoValue && !g->value(in).constant && R.rank(in) == r && R.last_axis_op(l, in, true)) u = in;
    if (u == kNoValue || !R.from_movement(u, 0)) continue;
    R.touched[ti] = R.touched[static_cast<size_t>(li)] = true;
    R.drop[ti] = true;
    ++R.changes;
    const std::string name = t.name;
    const ValueId w = t.outputs[0];
    const ValueId moved = g->add_node(Op::Transpose, base_name(name) + "/hoisted", {u}, 1, {{"perm", ints_attr(p)}})[0];
    Node& lm = g->nodes()[static_cast<size_t>(li)];
    for (ValueId& in : lm.inputs)
      if (in == u) in = moved;
    lm.outputs[0] = w;
  }
  if (R.changes) {
    R.drop.resize(g->nodes().size(), false);
    erase_nodes(g, R.drop);
  }
  return R.changes;
}

// Columns [from, from + n) of a constant [K, N] matrix, or elements of a [N] vector.
Tensor columns(const Tensor& t, int64_t from, int64_t n) {
  const bool vec = t.shape().size() == 1;
  const int64_t rows = vec ? 1 : t.shape()[0], cols = vec ? t.shape()[0] : t.shape()[1];
  Tensor out = Tensor::empty(t.dtype(), vec ? Shape{n} : Shape{rows, n});
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < n; ++c) out.set_f64(r * n + c, t.get_f64(r * cols + from + c));
  return out;
}

// y = MatMul(x, W [K, N] constant) [+ b [N] constant], the MatMul's output read once.
struct Packed {
  ValueId x = kNoValue;
  Tensor w;
  std::optional<Tensor> b;
};
std::optional<Packed> packed_projection(const Round& R, ValueId y) {
  const Graph& g = *R.g;
  Packed p;
  if (const int32_t a = g.value(y).producer; R.old(a) && is_op(R.node(a), "Add") && R.of(y).size() == 1 && !R.output(y)) {
    const Node& add = R.node(a);
    ValueId mm = kNoValue;
    for (size_t side = 0; side < 2 && add.inputs.size() == 2; ++side)
      if (g.value(add.inputs[side]).constant && R.rank(add.inputs[side]) == 1) {
        p.b = *g.value(add.inputs[side]).constant;
        mm = add.inputs[1 - side];
      }
    if (!p.b) return std::nullopt;
    y = mm;
  }
  const int32_t mi = g.value(y).producer;
  if (!R.old(mi) || !is_op(R.node(mi), "MatMul") || R.of(y).size() != 1 || R.output(y)) return std::nullopt;
  const Node& mm = R.node(mi);
  if (!g.value(mm.inputs[1]).constant || R.rank(mm.inputs[1]) != 2) return std::nullopt;
  p.x = mm.inputs[0];
  p.w = *g.value(mm.inputs[1]).constant;
  if (p.b && p.b->numel() != p.w.shape()[1]) return std::nullopt;
  return p;
}

// Writes `out` as MatMul(x, W[:, from:from+n]) + b[from:from+n] (a zero bias when there is none:
// MatMul + Add is what fuse_matmul_bias makes one flat Gemm of, and the bias is free there).
void emit_part(Graph* g, const Packed& p, ValueId out, int64_t from, int64_t n, const std::string& name) {
  const ValueId wi = g->add_constant(name + "/weight", columns(p.w, from, n));
  const ValueId bi = g->add_constant(name + "/b", p.b ? columns(*p.b, from, n) : Tensor::zeros(p.w.dtype(), {n}));
  const ValueId mm = g->add_node(Op::MatMul, name + "/proj", {p.x, wi}, 1)[0];
  add_writing(g, Op::Add, name + "/bias", {mm, bi}, out);
}

// A packed projection read by parts becomes one MatMul per part, so q, k and v are written where
// they are read instead of one GEMM and a copy per part:
//  - Gather(Reshape(y, [.., P, E]), i, axis -2) for every reader (torchvision's in_proj [E, 3E],
//    q/k/v selected once the Transposes went);
//  - Split(y, last axis) (GPT-2's c_attn, both exporters).
int split_packed(Graph* g) {
  Round R(g);
  const size_t n0 = g->nodes().size();
  for (size_t ni = 0; ni < n0; ++ni) {
    const Node& n = R.node(static_cast<int32_t>(ni));
    const bool split = is_op(n, "Split"), select = is_op(n, "Reshape") && n.inputs.size() == 2;
    if (!(split || select) || n.inputs[0] == kNoValue || R.of(n.inputs[0]).size() != 1) continue;
    const ValueId y = n.inputs[0];
    const auto packed = packed_projection(R, y);
    if (!packed) continue;
    const int64_t total = packed->w.shape()[1];
    const size_t r = R.rank(y);
    if (r == SIZE_MAX || r < 2) continue;
    std::vector<std::tuple<ValueId, int64_t, int64_t, std::string>> parts;  // out, from, size, name
    std::vector<int32_t> replaced;
    if (select) {
      const auto ps = R.shapes.shape(n.outputs[0]), ys = R.shapes.shape(y);
      if (!ps || !ys || ps->size() != r + 1 || !ps->back().is_const() || !(*ps)[r - 1].is_const() ||
          !std::equal(ys->begin(), ys->end() - 1, ps->begin()) || (*ps)[r - 1].c * ps->back().c != total || R.output(n.outputs[0]))
        continue;
      const int64_t np = (*ps)[r - 1].c, e = ps->back().c;
      replaced = R.of(n.outputs[0]);
      bool ok = !replaced.empty();
      for (int32_t gi : replaced) {
        const Node& s = R.node(gi);
        int64_t axis = s.attr_i("axis", 0), i = -np - 1;
        if (axis < 0) axis += static_cast<int64_t>(r) + 1;
        const Value* idx = s.inputs.size() == 2 ? &g->value(s.inputs[1]) : nullptr;
        if (idx && idx->constant && idx->constant->shape().empty()) i = idx->constant->get_i64(0);
        ok = ok && is_op(s, "Gather") && s.inputs[0] == n.outputs[0] && axis == static_cast<int64_t>(r) - 1 && i >= -np &&
             i < np && !R.touched[static_cast<size_t>(gi)];
        if (ok) parts.emplace_back(s.outputs[0], (i < 0 ? i + np : i) * e, e, s.name);
      }
      if (!ok) continue;
    } else {
      int64_t axis = n.attr_i("axis", 0);
      if (axis < 0) axis += static_cast<int64_t>(r);
      if (axis != static_cast<int64_t>(r) - 1) continue;
      std::vector<int64_t> sizes = n.attr_ints("split");
      if (n.inputs.size() > 1 && n.inputs[1] != kNoValue) {
        const auto& c = g->value(n.inputs[1]).constant;
        if (!c) continue;
        sizes.clear();
        for (int64_t i = 0; i < c->numel(); ++i) sizes.push_back(c->get_i64(i));
      }
      const int64_t k = static_cast<int64_t>(n.outputs.size());
      if (sizes.empty() && total % k == 0) sizes.assign(static_cast<size_t>(k), total / k);
      if (sizes.size() != n.outputs.size()) continue;
      int64_t from = 0;
      for (size_t j = 0; j < sizes.size(); ++j) {
        if (n.outputs[j] != kNoValue) parts.emplace_back(n.outputs[j], from, sizes[j], n.name + "/" + std::to_string(j));
        from += sizes[j];
      }
      if (from != total || std::any_of(sizes.begin(), sizes.end(), [](int64_t v) { return v <= 0; })) continue;
      replaced = {static_cast<int32_t>(ni)};
    }
    for (int32_t i : replaced) R.touched[static_cast<size_t>(i)] = R.drop[static_cast<size_t>(i)] = true;
    ++R.changes;
    for (const auto& [out, from, size, name] : parts) emit_part(g, *packed, out, from, size, name);
  }
  if (R.changes) {
    R.drop.resize(g->nodes().size(), false);
    erase_nodes(g, R.drop);
  }
  return R.changes;
}

}  // namespace

Result<PassStats> sink_transposes(Graph* g) {
  PassStats stats;
  auto settle = [&]() -> Status {
    GPUOPT_RETURN_IF_ERROR(g->topo_sort());
    GPUOPT_RETURN_IF_ERROR(g->infer_shapes());
    GPUOPT_ASSIGN_OR_RETURN(PassStats dead, remove_dead_nodes(g));
    stats.removed += dead.removed;
    return Status::Ok();
  };
  GPUOPT_RETURN_IF_ERROR(g->topo_sort());
  for (int round = 0; round < 8; ++round) {
    int changes = 0;
    for (auto* step : {&unflatten_gemms, &canonicalize_chains, &sink, &canonicalize_chains, &hoist,
                       &canonicalize_chains}) {
      const int c = step(g);
      if (c > 0) GPUOPT_RETURN_IF_ERROR(settle());
      changes += c;
    }
    stats.rewritten += changes;
    if (changes == 0) break;
  }
  if (const int c = split_packed(g); c > 0) {
    GPUOPT_RETURN_IF_ERROR(settle());
    stats.rewritten += c;
  }
  return stats;
}

}  // namespace gpuopt
