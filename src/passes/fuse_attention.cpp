// Scaled dot-product attention as exporters write it, node by node, becomes one ONNX Attention
// node (opset 23), which the CUDA backend runs as one flash-attention kernel:
//
//   Q [* c_q]  ─┐
//               MatMul ─ [Mul|Div by c] ─ [Where(causal, ., fill)] ─ [Add mask] ─ Softmax ─┐
//   K^T [* c_k] ┘                                     [Where(IsNaN(p), 0, p)] ─ MatMul(., V) ─ Y
//
// Q, K^T and V are 4-D [batch, heads, seq, head] (K^T [batch, heads, head, seq]) or 3-D
// [batch*heads, seq, head] (torch's MultiheadAttention), wrapped to 4-D with Unsqueeze/Squeeze.
// K^T usually comes from a Transpose: the fused node reads K through the same Transpose with its
// last two axes swapped back. The scale is the product of the constants found (1 when none); a
// causal Where becomes an additive mask Where(cond, 0, fill) added to the mask; a NaN guard after
// the Softmax (torch's SDPA export: rows whose every key is masked give 0, not NaN) becomes the
// fused node's attribute nan_to_zero=1 (gpuopt's own: NaN outputs written as 0, which is what the
// guard computes for such rows), applied inside the kernel instead of two passes over Y.
//
// The torch SDPA export of BERT-base does this in 11 nodes per layer over [batch, 12, 128, 128]
// scores; at batch 256 they took a third of the run. Every intermediate must be read once and not
// be a graph output; all values one float dtype.
#include "passes/match.h"
#include "passes/passes.h"
#include "passes/window_attention.h"

#include <algorithm>
#include <optional>

namespace gpuopt {
namespace {

struct AttnMatch {
  ValueId q = kNoValue, kt = kNoValue, v = kNoValue, y = kNoValue;
  const Node* kt_transpose = nullptr;  // the Transpose writing K^T, when K^T comes from one
  double scale = 1.0;
  ValueId mask = kNoValue;                              // additive mask (Add's other input)
  ValueId causal_cond = kNoValue, causal_fill = kNoValue;  // Where(cond, scores, fill)
  bool guard = false;
  size_t rank = 4;
  // The heads form: Q, K^T, V are head splits (Reshape [B,S,H,D] of a [B,S,H*D] tensor, then
  // Transpose) and Y is merged back the same way. The fused node then takes the 3-D tensors
  // (ONNX Attention's 3-D form, q_num_heads/kv_num_heads) and writes the merged output: the
  // four Transposes per layer go.
  ValueId q3 = kNoValue, k3 = kNoValue, v3 = kNoValue, y3 = kNoValue;
  int64_t q_heads = 0, kv_heads = 0;
  std::vector<const Node*> nodes;  // replaced (MatMul2, the result's writer, first)
};

int64_t softmax_axis(const Node& sm, int opset, size_t rank) {
  int64_t a = sm.attr_i("axis", opset >= 13 ? -1 : 1);
  return a < 0 ? a + static_cast<int64_t>(rank) : a;
}

// Walks back from the Softmax input through [Add mask] <- [Where causal] <- [Mul|Div scale] to
// the first MatMul.
const Node* scores_matmul(const Matcher& m, ValueId s, AttnMatch* a) {
  if (const Node* add = m.producer(s, "Add"); add && add->inputs.size() == 2) {
    for (int side = 0; side < 2; ++side) {
      const ValueId sc = add->inputs[side];
      if (m.readers(sc).size() != 1 || add->inputs[1 - side] == sc) continue;
      if (m.producer(sc, "MatMul") || m.producer(sc, "Mul") || m.producer(sc, "Div") || m.producer(sc, "Where")) {
        a->mask = add->inputs[1 - side];
        a->nodes.push_back(add);
        s = sc;
        break;
      }
    }
    if (a->mask == kNoValue) return nullptr;
  }
  if (const Node* w = m.producer(s, "Where"); w && w->inputs.size() == 3) {
    double fill;
    if (!m.scalar(w->inputs[2], &fill) || m.readers(w->inputs[1]).size() != 1) return nullptr;
    a->causal_cond = w->inputs[0];
    a->causal_fill = w->inputs[2];
    a->nodes.push_back(w);
    s = w->inputs[1];
  }
  for (const char* op : {"Mul", "Div"}) {
    const Node* n = m.producer(s, op);
    if (!n || n->inputs.size() != 2) continue;
    double c;
    if (!m.scalar(n->inputs[1], &c) || c == 0 || m.readers(n->inputs[0]).size() != 1) continue;
    a->scale *= op[0] == 'D' ? 1.0 / c : c;
    a->nodes.push_back(n);
    s = n->inputs[0];
    break;
  }
  const Node* mm = m.producer(s, "MatMul");
  if (mm) a->nodes.push_back(mm);
  return mm;
}

// An operand of the first MatMul, with a scalar Mul/Div (read only there) peeled off.
ValueId unscaled(const Matcher& m, ValueId x, AttnMatch* a) {
  for (const char* op : {"Mul", "Div"}) {
    const Node* n = m.producer(x, op);
    double c;
    if (!n || n->inputs.size() != 2 || m.readers(x).size() != 1 || !m.scalar(n->inputs[1], &c) || c == 0) continue;
    a->scale *= op[0] == 'D' ? 1.0 / c : c;
    a->nodes.push_back(n);
    return n->inputs[0];
  }
  return x;
}

bool same_float_dtype(const Graph& g, std::initializer_list<ValueId> vs) {
  const DType dt = g.value(*vs.begin()).info.dtype;
  if (!dtype_is_float(dt)) return false;
  for (ValueId v : vs)
    if (v != kNoValue && g.value(v).info.dtype != dt) return false;
  return true;
}

// A dim known or symbolic: two such dims that are equal are the same extent at run time.
bool dim_is_named(int64_t d) { return d != kUnknownDim; }

// x4 = Transpose(Reshape(x3 [B, S, H*D]), perm): x3 and H when the Reshape splits the last dim
// of a 3-D tensor into [H, D] (H and D known from x4's shape).
std::pair<ValueId, int64_t> head_split(const Matcher& m, ValueId x4, std::vector<int64_t> perm, int head_axis,
                                       int dim_axis) {
  const Graph& g = const_cast<Matcher&>(m).graph();
  const Node* t = m.producer(x4, "Transpose");
  if (!t || t->attr_ints("perm") != perm) return {kNoValue, 0};
  const Node* r = m.producer(t->inputs[0], "Reshape");
  if (!r || r->inputs.size() != 2) return {kNoValue, 0};
  const ValueInfo& x3 = g.value(r->inputs[0]).info;
  const ValueInfo& xi = g.value(x4).info;
  const ValueInfo& ri = g.value(t->inputs[0]).info;
  if (!x3.rank_known || x3.shape.size() != 3 || !xi.rank_known || !ri.rank_known || ri.shape.size() != 4) return {kNoValue, 0};
  const int64_t h = xi.shape[static_cast<size_t>(head_axis)], d = xi.shape[static_cast<size_t>(dim_axis)];
  if (!dim_is_known(h) || !dim_is_known(d) || !dim_is_known(x3.shape[2]) || x3.shape[2] != h * d) return {kNoValue, 0};
  // The Reshape keeps batch and sequence: [B, S, H, D] from [B, S, H*D] (S known or the same symbol
  // on both sides, so the first dim is B whatever the Reshape's target computes it from).
  if (ri.shape[2] != h || ri.shape[3] != d || !dim_is_named(x3.shape[1]) || ri.shape[1] != x3.shape[1])
    return {kNoValue, 0};
  return {r->inputs[0], h};
}

// Whether every use of shape value v (through Gather/Slice/Unsqueeze/Squeeze/Concat/Cast) ends as
// Reshape r's target, so that v's nodes are dead once r is replaced.
// The nodes on the way are added to `chain` (once each).
bool only_feeds_target(const Matcher& m, ValueId v, const Node& r, int depth, std::vector<const Node*>* chain) {
  const Graph& g = const_cast<Matcher&>(m).graph();
  const auto rs = m.readers(v);
  if (depth > 8 || rs.empty() || g.value(v).is_graph_output) return false;
  for (int32_t ri : rs) {
    const Node& n = g.nodes()[static_cast<size_t>(ri)];
    if (&n == &r) {
      if (r.inputs.size() < 2 || r.inputs[1] != v || r.inputs[0] == v) return false;
      continue;
    }
    static const char* const kShapeMath[] = {"Gather", "Slice", "Unsqueeze", "Squeeze", "Concat", "Cast"};
    bool math = false;
    for (const char* op : kShapeMath) math = math || n.op_type == op;
    if (!math || !n.domain.empty() || n.outputs.size() != 1 || !only_feeds_target(m, n.outputs[0], r, depth + 1, chain))
      return false;
    if (std::find(chain->begin(), chain->end(), &n) == chain->end()) chain->push_back(&n);
  }
  return true;
}

void match_heads(const Matcher& m, AttnMatch* a) {
  const Graph& g = const_cast<Matcher&>(m).graph();
  const auto [q3, hq] = head_split(m, a->q, {0, 2, 1, 3}, 1, 3);
  const auto [k3, hk] = head_split(m, a->kt, {0, 2, 3, 1}, 1, 2);
  const auto [v3, hv] = head_split(m, a->v, {0, 2, 1, 3}, 1, 3);
  if (q3 == kNoValue || k3 == kNoValue || v3 == kNoValue || hk != hv) return;
  const Node* t = m.sole_reader(a->y, "Transpose");
  if (!t || t->attr_ints("perm") != std::vector<int64_t>{0, 2, 1, 3}) return;
  // The merge Reshape; Shape nodes may read the merged heads too when all they compute is its
  // target (GPT-2: Shape(y)[0], Shape(y)[1] -> Concat(b, s, H*D)): they die with it.
  const Node* r = nullptr;
  for (int32_t ri : m.readers(t->outputs[0])) {
    const Node& n = g.nodes()[static_cast<size_t>(ri)];
    if (n.op_type == "Reshape" && n.domain.empty() && n.inputs[0] == t->outputs[0] && !r) r = &n;
  }
  if (!r) return;
  std::vector<const Node*> shape_chain;
  for (int32_t ri : m.readers(t->outputs[0])) {
    const Node& n = g.nodes()[static_cast<size_t>(ri)];
    if (&n == r) continue;
    if (!(n.op_type == "Shape" && n.domain.empty() && only_feeds_target(m, n.outputs[0], *r, 0, &shape_chain))) return;
    shape_chain.push_back(&n);
  }
  const ValueInfo& yi = g.value(a->y).info;
  const ValueInfo& y3 = g.value(r->outputs[0]).info;
  if (!y3.rank_known || y3.shape.size() != 3 || !dim_is_known(yi.shape[1]) || !dim_is_known(yi.shape[3]) ||
      y3.shape[2] != yi.shape[1] * yi.shape[3] || !dim_is_named(yi.shape[2]) || y3.shape[1] != yi.shape[2])
    return;
  a->q3 = q3;
  a->k3 = k3;
  a->v3 = v3;
  a->y3 = r->outputs[0];
  a->q_heads = hq;
  a->kv_heads = hk;
  a->nodes.push_back(t);
  a->nodes.push_back(r);
  a->nodes.insert(a->nodes.end(), shape_chain.begin(), shape_chain.end());
}

std::optional<AttnMatch> match(const Matcher& m, const Node& sm, int opset) {
  const Graph& g = const_cast<Matcher&>(m).graph();
  AttnMatch a;
  const ValueInfo& si = g.value(sm.inputs[0]).info;
  if (sm.inputs.size() != 1 || !si.rank_known || (si.shape.size() != 3 && si.shape.size() != 4)) return std::nullopt;
  a.rank = si.shape.size();
  if (softmax_axis(sm, opset, a.rank) != static_cast<int64_t>(a.rank) - 1) return std::nullopt;
  // After the Softmax: MatMul(p, V), or the NaN guard first.
  ValueId p = sm.outputs[0];
  const auto readers = m.readers(p);
  if (readers.size() == 2) {
    const Node* isnan = nullptr;
    const Node* guard = nullptr;
    for (int32_t r : readers) {
      const Node& n = g.nodes()[static_cast<size_t>(r)];
      if (n.op_type == "IsNaN" && n.domain.empty()) isnan = &n;
      if (n.op_type == "Where" && n.domain.empty()) guard = &n;
    }
    if (!isnan || !guard || guard->inputs.size() != 3 || guard->inputs[0] != isnan->outputs[0] ||
        guard->inputs[2] != p || !m.scalar_near(guard->inputs[1], 0.0, 0.0) || m.readers(isnan->outputs[0]).size() != 1)
      return std::nullopt;
    a.guard = true;
    a.nodes = {isnan, guard};
    p = guard->outputs[0];
  } else if (readers.size() != 1) {
    return std::nullopt;
  }
  const Node* mm2 = m.sole_reader(p, "MatMul");
  if (!mm2 || mm2->inputs.size() != 2 || mm2->inputs[0] != p) return std::nullopt;
  a.nodes.insert(a.nodes.begin(), mm2);
  a.nodes.push_back(&sm);
  a.v = mm2->inputs[1];
  a.y = mm2->outputs[0];
  const Node* mm1 = scores_matmul(m, sm.inputs[0], &a);
  if (!mm1 || mm1->inputs.size() != 2) return std::nullopt;
  a.q = unscaled(m, mm1->inputs[0], &a);
  a.kt = unscaled(m, mm1->inputs[1], &a);
  for (ValueId x : {a.q, a.kt, a.v, a.y}) {
    const ValueInfo& xi = g.value(x).info;
    if (!xi.rank_known || xi.shape.size() != a.rank) return std::nullopt;
  }
  if (!same_float_dtype(g, {a.q, a.kt, a.v, a.y, a.mask})) return std::nullopt;
  if (a.mask != kNoValue) {
    const ValueInfo& mi = g.value(a.mask).info;
    if (!mi.rank_known || mi.shape.size() > a.rank) return std::nullopt;
  }
  if (const Node* t = m.producer(a.kt, "Transpose"); t && t->attr_ints("perm").size() == a.rank)
    a.kt_transpose = t;
  if (a.rank == 4) match_heads(m, &a);
  return a;
}

ValueId constant_like(Graph* g, const std::string& name, DType dt, double v) {
  Tensor t = Tensor::empty(dt, {});
  t.set_f64(0, v);
  return g->add_constant(name, std::move(t));
}

void rewrite(Graph* g, const AttnMatch& a, const std::string& base, Op attention) {
  const DType dt = g->value(a.q).info.dtype;
  const size_t r = a.rank;
  if (a.q3 != kNoValue) {  // the heads form: 3-D in, 3-D out, no Transposes
    ValueId mask = a.mask;
    if (a.causal_cond != kNoValue) {
      const ValueId zero = constant_like(g, base + "/zero", dt, 0.0);
      ValueId bias = g->add_node(Op::Where, base + "/causal_bias", {a.causal_cond, zero, a.causal_fill}, 1)[0];
      mask = mask == kNoValue ? bias : g->add_node(Op::Add, base + "/mask", {bias, mask}, 1)[0];
    }
    std::vector<ValueId> ins{a.q3, a.k3, a.v3};
    if (mask != kNoValue) ins.push_back(mask);
    ValueId y = g->add_node(attention, base, ins, 1,
                            {{"scale", float_attr(static_cast<float>(a.scale))},
                             {"q_num_heads", int_attr(a.q_heads)},
                             {"kv_num_heads", int_attr(a.kv_heads)}})[0];
    if (a.guard) g->nodes().back().attrs["nan_to_zero"] = int_attr(1);
    g->nodes().back().outputs[0] = a.y3;
    g->value(y).producer = -1;
    return;
  }
  // K [.., seq, head] from K^T [.., head, seq].
  std::vector<int64_t> perm(r);
  for (size_t i = 0; i < r; ++i) perm[i] = static_cast<int64_t>(i);
  ValueId k_src = a.kt;
  if (a.kt_transpose) {
    perm = a.kt_transpose->attr_ints("perm");
    k_src = a.kt_transpose->inputs[0];
  }
  std::swap(perm[r - 2], perm[r - 1]);
  bool identity = true;
  for (size_t i = 0; i < r; ++i) identity = identity && perm[i] == static_cast<int64_t>(i);
  ValueId k = identity ? k_src : g->add_node(Op::Transpose, base + "/k", {k_src}, 1, {{"perm", ints_attr(perm)}})[0];
  ValueId mask = a.mask;
  if (a.causal_cond != kNoValue) {
    const ValueId zero = constant_like(g, base + "/zero", dt, 0.0);
    ValueId bias = g->add_node(Op::Where, base + "/causal_bias", {a.causal_cond, zero, a.causal_fill}, 1)[0];
    mask = mask == kNoValue ? bias : g->add_node(Op::Add, base + "/mask", {bias, mask}, 1)[0];
  }
  ValueId q = a.q, v = a.v;
  const ValueId axes0 = r == 3 ? g->add_constant(base + "/axis0", Tensor::from_vector<int64_t>(DType::I64, {1}, {0})) : kNoValue;
  auto to4 = [&](ValueId x, const char* what) {
    return g->add_node(Op::Unsqueeze, base + "/" + what + "4d", {x, axes0}, 1)[0];
  };
  if (r == 3) {
    q = to4(q, "q");
    k = to4(k, "k");
    v = to4(v, "v");
    if (mask != kNoValue && g->value(mask).info.shape.size() == 3) mask = to4(mask, "mask");
  }
  std::vector<ValueId> ins{q, k, v};
  if (mask != kNoValue) ins.push_back(mask);
  ValueId y = g->add_node(attention, base, ins, 1, {{"scale", float_attr(static_cast<float>(a.scale))}})[0];
  if (a.guard) g->nodes().back().attrs["nan_to_zero"] = int_attr(1);
  if (r == 3) y = g->add_node(Op::Squeeze, base + "/3d", {y, axes0}, 1)[0];
  // The last node writes the MatMul's output value instead of its fresh one, so the readers and
  // the name stay.
  g->nodes().back().outputs[0] = a.y;
  g->value(y).producer = -1;
}

}  // namespace

Result<PassStats> fuse_attention(Graph* g) {
  GPUOPT_ASSIGN_OR_RETURN(PassStats stats, unfold_window_attention(g));  // Swin's shifted windows first
  stats.rewritten = 0;
  g->rebuild_producers();
  const auto attention_op = op_from_name("Attention");
  if (!attention_op) return stats;
  Matcher m(g);
  std::vector<std::pair<AttnMatch, std::string>> found;
  for (const Node& n : g->nodes()) {
    if (n.op_type != "Softmax" || !n.domain.empty()) continue;
    auto a = match(m, n, g->opset);
    if (!a) continue;
    for (const Node* d : a->nodes) m.mark(d);
    const Node& mm2 = *a->nodes.front();
    found.emplace_back(std::move(*a), mm2.name.empty() ? n.name + "/attention" : mm2.name);
  }
  // Copies of what the rewrite reads from the matched nodes: add_node may move the node list.
  std::vector<std::pair<AttnMatch, std::string>> todo;
  std::vector<Node> kt_transposes;
  for (auto& [a, name] : found) {
    stats.removed += static_cast<int>(a.nodes.size());
    if (a.kt_transpose) {
      kt_transposes.push_back(*a.kt_transpose);
      if (m.readers(a.kt).size() == 1) m.mark(a.kt_transpose);  // read only by the scores MatMul
    }
    todo.emplace_back(std::move(a), std::move(name));
  }
  std::vector<bool> drop = m.drop();
  size_t t = 0;
  for (auto& [a, name] : todo) {
    a.nodes.clear();
    if (a.kt_transpose) a.kt_transpose = &kt_transposes[t++];
    rewrite(g, a, name, *attention_op);
  }
  if (!todo.empty()) {
    drop.resize(g->nodes().size(), false);
    erase_nodes(g, drop);
    // The head splits the fused node now reads around (Reshape, Transpose) have no readers left;
    // dead-node removal walks the nodes in reverse topological order, and ours were appended.
    GPUOPT_RETURN_IF_ERROR(g->topo_sort());
    GPUOPT_ASSIGN_OR_RETURN(PassStats dead, remove_dead_nodes(g));
    stats.removed += dead.removed;
    GPUOPT_RETURN_IF_ERROR(g->infer_shapes());  // what the packed form reads: the head split's shapes
    GPUOPT_ASSIGN_OR_RETURN(PassStats packed, attention_reads_packed_qkv(g));  // Swin's q/k/v selects
    stats.removed += packed.removed;
  }
  return stats;
}

}  // namespace gpuopt
