// Shifted-window attention (Swin) in the plain form fuse_attention reads. torchvision writes the
// scores of a shifted block as
//
//   S = MatMul(q [BW, H, N, d], K^T)                 BW = B * nW windows, N tokens per window
//   A = Add(S, bias [1, H, N, N])                    relative-position bias, a constant
//   R = Reshape(A, [B, nW, H, N, N])
//   M = Add(R, mask [1, nW, 1, N, N])                the shift mask, a constant
//   P = Softmax(Reshape(M, [BW, H, N, N]))  ->  Y = MatMul(P, v [BW, H, N, dv])
//
// The mask depends on the window (the batch index modulo nW), which no attention mask broadcast
// over [BW, H, N, N] can express. Viewed with the windows among the heads, [B, nW * H, N, d]
// (a Reshape of contiguous q, k, v: no copy), bias and mask are one constant
// [1, nW * H, N, N] that broadcasts over B:
//
//   Y = Reshape(MatMul(Softmax(Add(MatMul(q', k'^T), bias + mask)), v'), [BW, H, N, dv])
//
// which fuse_attention makes one Attention node. The scale Mul on q and the Transpose making
// K^T stay next to the MatMul (moved after the new Reshapes) so that fuse_attention folds them
// in as it does for the unshifted blocks. The sum bias + mask is rounded once where the model
// rounds twice; everything else is exact.
#include "passes/match.h"
#include "passes/passes.h"
#include "passes/window_attention.h"
#include "ir/eval.h"

#include <optional>

namespace gpuopt {
namespace {

struct WindowMatch {
  const Node* mm1 = nullptr;
  const Node* add_bias = nullptr;
  const Node* reshape_w = nullptr;
  const Node* add_mask = nullptr;
  const Node* reshape_b = nullptr;
  const Node* softmax = nullptr;
  const Node* mm2 = nullptr;
  ValueId bias = kNoValue, mask = kNoValue;
  int64_t windows = 0, heads = 0, n = 0;
};

// The Add's input that is not `v` when it is a constant.
ValueId constant_other(const Graph& g, const Node& add, ValueId v) {
  const ValueId o = Matcher::other(add, v);
  return o != kNoValue && g.value(o).constant ? o : kNoValue;
}

// Dims of `t` right-aligned to `rank` (1s in front); nullopt when t has more.
std::optional<std::vector<int64_t>> aligned(const Shape& t, size_t rank) {
  if (t.size() > rank) return std::nullopt;
  std::vector<int64_t> d(rank - t.size(), 1);
  d.insert(d.end(), t.begin(), t.end());
  return d;
}

bool known_is(int64_t d, int64_t want) { return dim_is_known(d) && d == want; }

// q, K^T and v are Gathers of one scalar index on axis 0 of one tensor (torchvision's q/k/v
// select), seen through a scalar Mul (q's scale) and a Transpose that keeps axis 0 (K^T): then
// their first dims are one extent whatever shape inference knows.
bool selected_from_one(const Matcher& m, std::initializer_list<ValueId> vs) {
  const Graph& g = const_cast<Matcher&>(m).graph();
  ValueId src = kNoValue;
  for (ValueId v : vs) {
    double c;
    if (const Node* mul = m.producer(v, "Mul"); mul && mul->inputs.size() == 2 && m.scalar(mul->inputs[1], &c)) v = mul->inputs[0];
    if (const Node* t = m.producer(v, "Transpose"); t && !t->attr_ints("perm").empty() && t->attr_ints("perm")[0] == 0)
      v = t->inputs[0];
    const Node* gather = m.producer(v, "Gather");
    if (!gather || gather->inputs.size() != 2 || gather->attr_i("axis", 0) != 0) return false;
    const Value& idx = g.value(gather->inputs[1]);
    if (!idx.constant || idx.constant->rank() != 0) return false;
    if (src != kNoValue && gather->inputs[0] != src) return false;
    src = gather->inputs[0];
  }
  return true;
}

std::optional<WindowMatch> match(const Matcher& m, const Node& sm, int opset) {
  const Graph& g = const_cast<Matcher&>(m).graph();
  WindowMatch w;
  w.softmax = &sm;
  if (sm.inputs.size() != 1) return std::nullopt;
  const int64_t axis = sm.attr_i("axis", opset >= 13 ? -1 : 1);
  if (axis != -1 && axis != 3) return std::nullopt;
  w.reshape_b = m.producer(sm.inputs[0], "Reshape");
  if (!w.reshape_b || m.readers(sm.inputs[0]).size() != 1) return std::nullopt;
  w.add_mask = m.producer(w.reshape_b->inputs[0], "Add");
  if (!w.add_mask || m.readers(w.reshape_b->inputs[0]).size() != 1) return std::nullopt;
  for (ValueId in : w.add_mask->inputs) {
    const Node* r = m.producer(in, "Reshape");
    if (r && m.readers(in).size() == 1 && constant_other(g, *w.add_mask, in) != kNoValue) {
      w.reshape_w = r;
      w.mask = constant_other(g, *w.add_mask, in);
    }
  }
  if (!w.reshape_w) return std::nullopt;
  w.add_bias = m.producer(w.reshape_w->inputs[0], "Add");
  if (!w.add_bias || m.readers(w.reshape_w->inputs[0]).size() != 1) return std::nullopt;
  for (ValueId in : w.add_bias->inputs) {
    const Node* mm = m.producer(in, "MatMul");
    if (mm && m.readers(in).size() == 1 && constant_other(g, *w.add_bias, in) != kNoValue) {
      w.mm1 = mm;
      w.bias = constant_other(g, *w.add_bias, in);
    }
  }
  if (!w.mm1 || w.mm1->inputs.size() != 2) return std::nullopt;
  w.mm2 = m.sole_reader(sm.outputs[0], "MatMul");
  if (!w.mm2 || w.mm2->inputs.size() != 2 || w.mm2->inputs[0] != sm.outputs[0]) return std::nullopt;

  // Shapes: S [BW, H, N, N]; R [BW/nW, nW, H, N, N]; the Softmax input [BW, H, N, N] again.
  const ValueInfo& s = g.value(w.mm1->outputs[0]).info;
  const ValueInfo& r = g.value(w.reshape_w->outputs[0]).info;
  const ValueInfo& b = g.value(w.reshape_b->outputs[0]).info;
  const ValueInfo& q = g.value(w.mm1->inputs[0]).info;
  const ValueInfo& v = g.value(w.mm2->inputs[1]).info;
  if (!s.rank_known || s.shape.size() != 4 || !r.rank_known || r.shape.size() != 5 || !b.rank_known ||
      b.shape.size() != 4 || !q.rank_known || q.shape.size() != 4 || !v.rank_known || v.shape.size() != 4)
    return std::nullopt;
  w.heads = s.shape[1];
  w.n = s.shape[2];
  w.windows = r.shape[1];
  if (!dim_is_known(w.heads) || !dim_is_known(w.n) || !known_is(s.shape[3], w.n) || !dim_is_known(w.windows) ||
      w.windows < 1)
    return std::nullopt;
  // The Reshapes split the first dim as [BW / nW, nW] and merge it back (the rest is [H, N, N]
  // on both sides: with that, element counts fix the first dims).
  for (size_t i = 0; i < 3; ++i)
    if (!known_is(r.shape[2 + i], s.shape[1 + i]) || !known_is(b.shape[1 + i], s.shape[1 + i])) return std::nullopt;
  if (!dtype_is_float(s.dtype) || s.dtype != q.dtype || s.dtype != v.dtype) return std::nullopt;
  // q, K^T and v are [BW, H, ...] themselves (no MatMul broadcasting), so they split by window.
  const ValueInfo& kt = g.value(w.mm1->inputs[1]).info;
  if (!kt.rank_known || kt.shape.size() != 4 || !known_is(q.shape[1], w.heads) || !known_is(q.shape[2], w.n) ||
      !known_is(kt.shape[1], w.heads) || !known_is(kt.shape[3], w.n) || !known_is(v.shape[1], w.heads) ||
      !known_is(v.shape[2], w.n) || !dim_is_known(q.shape[3]) || !dim_is_known(v.shape[3]))
    return std::nullopt;
  // Their first dims: equal and known or one symbol, or all three selected from one tensor.
  const int64_t bw = s.shape[0];
  const bool same = bw != kUnknownDim && q.shape[0] == bw && kt.shape[0] == bw && v.shape[0] == bw;
  if (!same && !selected_from_one(m, {w.mm1->inputs[0], w.mm1->inputs[1], w.mm2->inputs[1]})) return std::nullopt;
  // The bias may vary over heads and tokens only, the mask over windows and tokens only.
  const auto bd = aligned(g.value(w.bias).constant->shape(), 4);
  const auto md = aligned(g.value(w.mask).constant->shape(), 5);
  if (!bd || !md || (*bd)[0] != 1 || (*md)[0] != 1) return std::nullopt;
  const int64_t want_b[4] = {1, w.heads, w.n, w.n}, want_m[5] = {1, w.windows, w.heads, w.n, w.n};
  for (size_t i = 0; i < 4; ++i)
    if ((*bd)[i] != 1 && (*bd)[i] != want_b[i]) return std::nullopt;
  for (size_t i = 0; i < 5; ++i)
    if ((*md)[i] != 1 && (*md)[i] != want_m[i]) return std::nullopt;
  if (!dtype_is_float(g.value(w.bias).constant->dtype()) || !dtype_is_float(g.value(w.mask).constant->dtype()))
    return std::nullopt;
  return w;
}

// bias [.., H, N, N] + mask [1, nW, .., N, N] as [1, nW * H, N, N] in `dt`.
Tensor combined_bias(const Tensor& bias, const Tensor& mask, const WindowMatch& w, DType dt) {
  const auto bd = *aligned(bias.shape(), 4);
  const auto md = *aligned(mask.shape(), 5);
  Tensor out = Tensor::empty(dt, {1, w.windows * w.heads, w.n, w.n});
  auto bstride = [](const std::vector<int64_t>& d) {  // element strides, 0 along size-1 dims
    std::vector<int64_t> st(d.size(), 0);
    int64_t s = 1;
    for (size_t i = d.size(); i-- > 0;) {
      st[i] = d[i] == 1 ? 0 : s;
      s *= d[i];
    }
    return st;
  };
  const auto bs = bstride(bd), ms = bstride(md);
  int64_t o = 0;
  for (int64_t win = 0; win < w.windows; ++win)
    for (int64_t h = 0; h < w.heads; ++h)
      for (int64_t i = 0; i < w.n; ++i)
        for (int64_t j = 0; j < w.n; ++j)
          out.set_f64(o++, bias.get_f64(h * bs[1] + i * bs[2] + j * bs[3]) +
                               mask.get_f64(win * ms[1] + h * ms[2] + i * ms[3] + j * ms[4]));
  return out;
}

ValueId i64s(Graph* g, const std::string& name, std::vector<int64_t> v) {
  const int64_t n = static_cast<int64_t>(v.size());
  return g->add_constant(name, Tensor::from_vector<int64_t>(DType::I64, {n}, std::move(v)));
}

// Copies of what the rewrite reads from a match (add_node may move the node list).
struct Rewrite {
  ValueId q = kNoValue, kt = kNoValue, v = kNoValue, y = kNoValue, bias = kNoValue, mask = kNoValue;
  // q = Mul(q_src, scale) and K^T = Transpose(k_src, [0,1,3,2]) when the model wrote them so.
  ValueId q_src = kNoValue, q_scale = kNoValue, k_src = kNoValue;
  int64_t softmax_axis = -1, d = 0, dv = 0;
  WindowMatch w;
  std::string base;
};

void rewrite(Graph* g, const Rewrite& r) {
  const WindowMatch& w = r.w;
  const int64_t wh = w.windows * w.heads;
  const DType dt = g->value(r.q).info.dtype;
  const ValueId comb =
      g->add_constant(r.base + "/window_bias", combined_bias(*g->value(r.bias).constant, *g->value(r.mask).constant, w, dt));
  auto view = [&](ValueId x, const char* what, int64_t a, int64_t b) {
    return g->add_node(Op::Reshape, r.base + "/" + what + "_by_window", {x, i64s(g, r.base + "/" + what + "_shape", {-1, wh, a, b})},
                       1)[0];
  };
  ValueId q = r.q_src != kNoValue ? g->add_node(Op::Mul, r.base + "/q_scaled", {view(r.q_src, "q", w.n, r.d), r.q_scale}, 1)[0]
                                  : view(r.q, "q", w.n, r.d);
  ValueId kt = r.k_src != kNoValue ? g->add_node(Op::Transpose, r.base + "/k_t", {view(r.k_src, "k", w.n, r.d)}, 1,
                                                 {{"perm", ints_attr({0, 1, 3, 2})}})[0]
                                   : view(r.kt, "kt", r.d, w.n);
  const ValueId v = view(r.v, "v", w.n, r.dv);
  const ValueId s = g->add_node(Op::MatMul, r.base + "/scores", {q, kt}, 1)[0];
  const ValueId sb = g->add_node(Op::Add, r.base + "/biased", {s, comb}, 1)[0];
  const ValueId p = g->add_node(Op::Softmax, r.base + "/softmax", {sb}, 1, {{"axis", int_attr(-1)}})[0];
  const ValueId y = g->add_node(Op::MatMul, r.base + "/context", {p, v}, 1)[0];
  const ValueId out = g->add_node(Op::Reshape, r.base + "/by_batch", {y, i64s(g, r.base + "/y_shape", {-1, w.heads, w.n, r.dv})}, 1)[0];
  // The last node writes the old MatMul's value, so its readers and name stay.
  g->nodes().back().outputs[0] = r.y;
  g->value(out).producer = -1;
}

}  // namespace

namespace {

// The dims a Reshape's target fixes when it is a Concat of one-element pieces, some constant
// (torch.onnx's legacy exporter: [B * nW, N, 3, H, d] with B * nW read from a Shape at run time):
// kUnknownDim where a piece is computed. nullopt when the target is not such a Concat.
std::optional<Shape> partial_target(const Graph& g, const Node& reshape) {
  const int32_t p = g.value(reshape.inputs[1]).producer;
  if (p < 0) return std::nullopt;
  const Node& cat = g.nodes()[static_cast<size_t>(p)];
  if (!is_default(cat, "Concat")) return std::nullopt;
  const ValueInfo& in = g.value(reshape.inputs[0]).info;
  Shape out;
  for (ValueId piece : cat.inputs) {
    const Value& v = g.value(piece);
    if (!v.info.rank_known || v.info.shape != Shape{1}) return std::nullopt;
    int64_t d = v.constant ? v.constant->to_i64_vector()[0] : kUnknownDim;
    if (d == 0 && reshape.attr_i("allowzero", 0) == 0)
      d = in.rank_known && out.size() < in.shape.size() ? in.shape[out.size()] : kUnknownDim;
    out.push_back(d > 0 ? d : kUnknownDim);  // -1: left unknown
  }
  return out;
}

}  // namespace

Status refine_reshape_shapes(Graph* g) {
  for (const Node& n : g->nodes()) {
    std::vector<ValueInfo> infos(n.inputs.size());
    std::vector<const ValueInfo*> ptrs(n.inputs.size(), nullptr);
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      if (n.inputs[i] == kNoValue) continue;
      infos[i] = g->info_with_value(n.inputs[i]);
      ptrs[i] = &infos[i];
    }
    auto outs = infer_node(n, ptrs, g->opset_for(n));
    if (!outs.ok()) continue;  // left as it was
    if (is_default(n, "Reshape") && n.inputs.size() == 2 && !outs->empty()) {
      if (auto t = partial_target(*g, n); t && (!(*outs)[0].rank_known || (*outs)[0].shape.size() == t->size())) {
        if (!(*outs)[0].rank_known) (*outs)[0].shape.assign(t->size(), kUnknownDim);
        (*outs)[0].rank_known = true;
        for (size_t d = 0; d < t->size(); ++d)
          if ((*outs)[0].shape[d] == kUnknownDim) (*outs)[0].shape[d] = (*t)[d];
      }
    }
    for (size_t i = 0; i < n.outputs.size() && i < outs->size(); ++i) {
      if (n.outputs[i] == kNoValue) continue;
      ValueInfo& vi = g->value(n.outputs[i]).info;
      ValueInfo o = std::move((*outs)[i]);
      o.value = nullptr;
      if (!o.rank_known && vi.rank_known) continue;
      if (o.dtype == DType::Undefined) o.dtype = vi.dtype;
      if (o.rank_known && vi.rank_known && o.shape.size() == vi.shape.size())
        for (size_t d = 0; d < vi.shape.size(); ++d)
          if (o.shape[d] == kUnknownDim) o.shape[d] = vi.shape[d];
      vi = std::move(o);
    }
  }
  return Status::Ok();
}

namespace {

// Some Softmax reads Reshape(Add(Reshape(Add(...)))): the window form's skeleton, before shapes.
bool has_window_skeleton(Graph* g) {
  g->rebuild_producers();
  Matcher m(g);
  for (const Node& n : g->nodes()) {
    if (!is_default(n, "Softmax") || n.inputs.size() != 1) continue;
    const Node* r2 = m.producer(n.inputs[0], "Reshape");
    const Node* a2 = r2 ? m.producer(r2->inputs[0], "Add") : nullptr;
    if (!a2) continue;
    for (ValueId in : a2->inputs) {
      const Node* r1 = m.producer(in, "Reshape");
      if (r1 && m.producer(r1->inputs[0], "Add")) return true;
    }
  }
  return false;
}

}  // namespace

Result<PassStats> unfold_window_attention(Graph* g) {
  PassStats stats;
  if (!has_window_skeleton(g)) return stats;
  // The window partition's Reshape targets are shape arithmetic (torch.onnx's legacy exporter)
  // that folds only once the passes before made the partition's shapes known: fold again, so the
  // scores' and q/k/v's shapes the match checks (and the packed form after) are known.
  // Refined first, so that Shape(x)[i] of a refined x folds (folding keeps what is known).
  GPUOPT_RETURN_IF_ERROR(g->infer_shapes());
  g->rebuild_producers();
  GPUOPT_RETURN_IF_ERROR(refine_reshape_shapes(g));
  GPUOPT_RETURN_IF_ERROR(fold_constants(g).status());
  GPUOPT_RETURN_IF_ERROR(remove_dead_nodes(g).status());
  GPUOPT_RETURN_IF_ERROR(refine_reshape_shapes(g));
  Matcher m(g);
  std::vector<Rewrite> todo;
  for (const Node& n : g->nodes()) {
    if (!is_default(n, "Softmax")) continue;
    auto w = match(m, n, g->opset_for(n));
    if (!w) continue;
    Rewrite r;
    r.w = *w;
    r.q = w->mm1->inputs[0];
    r.kt = w->mm1->inputs[1];
    r.v = w->mm2->inputs[1];
    r.y = w->mm2->outputs[0];
    r.bias = w->bias;
    r.mask = w->mask;
    r.d = g->value(r.q).info.shape[3];
    r.dv = g->value(r.v).info.shape[3];
    r.base = w->mm2->name.empty() ? n.name + "/window_attention" : w->mm2->name;
    for (const Node* d : {w->mm1, w->add_bias, w->reshape_w, w->add_mask, w->reshape_b, w->softmax, w->mm2}) m.mark(d);
    double c;
    if (const Node* mul = m.producer(r.q, "Mul");
        mul && mul->inputs.size() == 2 && m.readers(r.q).empty() && mul->inputs[0] != mul->inputs[1] &&
        m.scalar(mul->inputs[1], &c)) {
      r.q_src = mul->inputs[0];
      r.q_scale = mul->inputs[1];
      m.mark(mul);
    }
    if (const Node* t = m.producer(r.kt, "Transpose");
        t && m.readers(r.kt).empty() && t->attr_ints("perm") == std::vector<int64_t>{0, 1, 3, 2}) {
      r.k_src = t->inputs[0];
      m.mark(t);
    }
    todo.push_back(std::move(r));
    stats.rewritten += 1;
    stats.removed += 7;
  }
  if (todo.empty()) return stats;
  for (const Rewrite& r : todo) rewrite(g, r);
  GPUOPT_RETURN_IF_ERROR(m.erase_dropped());
  // The Reshapes' shape math and the old constants have no readers left.
  GPUOPT_ASSIGN_OR_RETURN(PassStats dead, remove_dead_nodes(g));
  stats.removed += dead.removed;
  GPUOPT_RETURN_IF_ERROR(g->infer_shapes());
  return stats;
}

}  // namespace gpuopt
