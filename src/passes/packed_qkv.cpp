// An Attention whose Q, K and V are the three parts of one packed projection, selected by
// Gathers after a head-split Transpose, reads the projection in place (window_attention.h).
// torchvision's Swin (and its window attention generally) writes
//
//   R = Reshape(qkv [S0, S1, 3*H*d], [S0, S1, 3, H, d]);  T = Transpose(R, [2, 0, 3, 1, 4])
//   q, k, v = Gather(T, 0), Gather(T, 1), Gather(T, 2)              each [S0, H, S1, d]
//   Y = Attention(q, k, v, bias)  ->  Transpose(Y, [0, 2, 1, 3])  ->  Reshape [S0, S1, H*d]
//
// which copies the projection twice (the Transpose, then the three Gathers) and the output once
// more. The Attention op's packed form (qkv_packed=1) reads Q, K and V as the three column ranges
// of [S0, S1, 3*H*d] and writes [S0, S1, H*d]: the same values, none of the copies.
#include "passes/match.h"
#include "passes/window_attention.h"

namespace gpuopt {
namespace {

struct PackedMatch {
  const Node* att = nullptr;
  const Node* gathers[3] = {nullptr, nullptr, nullptr};
  const Node* transpose = nullptr;
  const Node* out_t = nullptr;
  const Node* out_r = nullptr;
  ValueId r = kNoValue;  // [S0, S1, 3, H, d]
  int64_t s1 = 0, heads = 0, d = 0;
};

// The index a Gather on axis 0 selects by a scalar constant, else -1.
int64_t scalar_select(const Graph& g, const Node& n) {
  if (n.inputs.size() != 2 || n.attr_i("axis", 0) != 0) return -1;
  const Value& i = g.value(n.inputs[1]);
  if (!i.constant || i.constant->rank() != 0 || i.constant->numel() != 1) return -1;
  return static_cast<int64_t>(i.constant->get_f64(0));
}

std::optional<PackedMatch> match(const Matcher& m, const Node& att) {
  const Graph& g = const_cast<Matcher&>(m).graph();
  PackedMatch p;
  p.att = &att;
  if (att.attr_i("qkv_packed", 0) != 0 || att.inputs.size() < 3 || att.inputs.size() > 4 || att.outputs.size() != 1 ||
      att.attr_i("is_causal", 0) != 0 || att.attr_f("softcap", 0.f) != 0.f || att.has_attr("q_num_heads"))
    return std::nullopt;
  for (int i = 0; i < 3; ++i) {
    const Node* gi = m.producer(att.inputs[static_cast<size_t>(i)], "Gather");
    if (!gi || scalar_select(g, *gi) != i || m.readers(att.inputs[static_cast<size_t>(i)]).size() != 1) return std::nullopt;
    if (i > 0 && gi->inputs[0] != p.gathers[0]->inputs[0]) return std::nullopt;
    p.gathers[i] = gi;
  }
  p.transpose = m.producer(p.gathers[0]->inputs[0], "Transpose");
  if (!p.transpose || p.transpose->attr_ints("perm") != std::vector<int64_t>{2, 0, 3, 1, 4} ||
      m.readers(p.gathers[0]->inputs[0]).size() != 3)
    return std::nullopt;
  p.r = p.transpose->inputs[0];
  const ValueInfo& ri = g.value(p.r).info;
  if (!ri.rank_known || ri.shape.size() != 5 || ri.shape[2] != 3) return std::nullopt;
  p.s1 = ri.shape[1];
  p.heads = ri.shape[3];
  p.d = ri.shape[4];
  if (!dim_is_known(p.s1) || !dim_is_known(p.heads) || !dim_is_known(p.d)) return std::nullopt;
  // The output merged back: Transpose [0, 2, 1, 3] then a Reshape, each read once.
  p.out_t = m.sole_reader(att.outputs[0], "Transpose");
  if (!p.out_t || p.out_t->attr_ints("perm") != std::vector<int64_t>{0, 2, 1, 3}) return std::nullopt;
  p.out_r = m.sole_reader(p.out_t->outputs[0], "Reshape");
  if (!p.out_r || p.out_r->inputs[0] != p.out_t->outputs[0]) return std::nullopt;
  // A mask must broadcast over [S0, H, S1, S1] as it did over the 4-D Q.
  if (att.inputs.size() == 4 && att.inputs[3] != kNoValue) {
    const ValueInfo& mi = g.value(att.inputs[3]).info;
    if (!mi.rank_known || mi.shape.size() > 4) return std::nullopt;
  }
  return p;
}

ValueId i64s(Graph* g, const std::string& name, std::vector<int64_t> v) {
  const int64_t n = static_cast<int64_t>(v.size());
  return g->add_constant(name, Tensor::from_vector<int64_t>(DType::I64, {n}, std::move(v)));
}

}  // namespace

Result<PassStats> attention_reads_packed_qkv(Graph* g) {
  PassStats stats;
  const auto reshape = op_from_name("Reshape"), attention = op_from_name("Attention");
  if (!reshape || !attention) return stats;
  g->rebuild_producers();
  GPUOPT_RETURN_IF_ERROR(refine_reshape_shapes(g));  // the legacy exporter's computed head-split targets
  Matcher m(g);
  struct Todo {
    ValueId r, mask, out, target;
    int64_t s1, heads, d;
    AttributeMap attrs;
    std::string name;
  };
  std::vector<Todo> todo;
  for (const Node& n : g->nodes()) {
    if (!is_default(n, "Attention")) continue;
    auto p = match(m, n);
    if (!p) continue;
    Todo t{p->r, n.inputs.size() == 4 ? n.inputs[3] : kNoValue, p->out_r->outputs[0], p->out_r->inputs[1],
           p->s1, p->heads, p->d, n.attrs, n.name};
    for (const Node* d : {p->att, p->gathers[0], p->gathers[1], p->gathers[2], p->transpose, p->out_t, p->out_r}) m.mark(d);
    todo.push_back(std::move(t));
  }
  for (Todo& t : todo) {
    // [S0, S1, 3, H, d] -> [S0, S1, 3*H*d] (a view), the packed Attention, then the model's
    // own Reshape target on its [S0, S1, H*d] output (a view again).
    const ValueId x = g->add_node(*reshape, t.name + "/packed", {t.r, i64s(g, t.name + "/packed_shape", {0, t.s1, 3 * t.heads * t.d})}, 1)[0];
    AttributeMap attrs = t.attrs;
    attrs["qkv_packed"] = int_attr(1);
    attrs["q_num_heads"] = int_attr(t.heads);
    attrs["kv_num_heads"] = int_attr(t.heads);
    std::vector<ValueId> ins{x, kNoValue, kNoValue};
    if (t.mask != kNoValue) ins.push_back(t.mask);
    const ValueId y = g->add_node(*attention, t.name, ins, 1, attrs)[0];
    const ValueId out = g->add_node(*reshape, t.name + "/merged", {y, t.target}, 1)[0];
    g->nodes().back().outputs[0] = t.out;
    g->value(out).producer = -1;
    ++stats.rewritten;
    stats.removed += 5;
  }
  if (todo.empty()) return stats;
  GPUOPT_RETURN_IF_ERROR(m.erase_dropped());
  GPUOPT_ASSIGN_OR_RETURN(PassStats dead, remove_dead_nodes(g));
  (void)dead;
  GPUOPT_RETURN_IF_ERROR(g->infer_shapes());
  return stats;
}

}  // namespace gpuopt
