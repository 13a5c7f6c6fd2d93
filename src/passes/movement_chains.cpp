// Two rewrite steps of sink_transposes (transpose_sink.cpp): movement chains composed into at
// most Reshape -> Transpose -> Reshape, and Reshape [M, K] -> Gemm -> Reshape [.., N] made a
// MatMul (+ Add) on the unflattened tensor.
#include "passes/movement.h"
#include "passes/passes.h"

namespace gpuopt::movement {
namespace {

Mono product(const MShape& s, size_t from, size_t to) {
  Mono p;
  for (size_t i = from; i < to; ++i) p = mono_mul(p, s[i]);
  return p;
}

std::vector<int32_t> data_readers(const Round& R, ValueId v) {
  std::vector<int32_t> d;
  for (int32_t r : R.of(v))
    if (!is_plain_shape(R.node(r))) d.push_back(r);
  return d;
}

// Shape of a value inside a chain, as indices into [source dims..., constants...]: each dim is a
// constant or equal to a source dim. Nothing when one is neither.
std::optional<std::vector<int64_t>> shape_from_source(const MShape& dims, const MShape& src, std::vector<int64_t>* consts) {
  std::vector<int64_t> idx;
  for (const Mono& d : dims) {
    auto it = std::find(src.begin(), src.end(), d);
    if (it != src.end()) {
      idx.push_back(it - src.begin());
    } else if (d.is_const()) {
      idx.push_back(static_cast<int64_t>(src.size() + consts->size()));
      consts->push_back(d.c);
    } else {
      return std::nullopt;
    }
  }
  return idx;
}

// Whether v, through shape arithmetic, is read only as the shape input of the nodes `targets`.
bool only_shapes(const Round& R, ValueId v, const std::vector<int32_t>& targets, int depth) {
  if (depth > 8 || R.output(v) || R.of(v).empty()) return false;
  for (int32_t ri : R.of(v)) {
    const Node& n = R.node(ri);
    if (std::find(targets.begin(), targets.end(), ri) != targets.end() && n.inputs[0] != v) continue;
    static constexpr std::string_view kMath[] = {"Gather", "Slice", "Unsqueeze", "Squeeze", "Concat", "Cast", "Mul", "Div"};
    if (!n.domain.empty() || n.outputs.size() != 1 || std::find(std::begin(kMath), std::end(kMath), n.op_type) == std::end(kMath) ||
        !only_shapes(R, n.outputs[0], targets, depth + 1))
      return false;
  }
  return true;
}

// Whether every Shape reading w is read only for the shapes of the chain's own Reshapes.
bool shapes_die_with(const Round& R, ValueId w, const std::vector<int32_t>& chain) {
  for (int32_t ri : R.of(w))
    if (is_plain_shape(R.node(ri)) && !only_shapes(R, R.node(ri).outputs[0], chain, 0)) return false;
  return true;
}

bool compose(Round& R, const std::vector<int32_t>& chain, const MShape& src, AtomChain* c) {
  for (int32_t i : chain) {
    const Node& n = R.node(i);
    bool ok = false;
    if (n.op_type == "Transpose") {
      ok = c->transpose(perm_of(n, c->final_shape().size()));
    } else if (n.op_type == "Reshape") {
      auto out = R.shapes.shape(n.outputs[0]);
      ok = out && c->reshape(*out);
    } else {
      std::optional<std::vector<int64_t>> axes;
      if (n.inputs.size() > 1 && n.inputs[1] != kNoValue) {
        auto v = R.shapes.value(n.inputs[1]);
        if (v && std::all_of(v->begin(), v->end(), [](const Mono& m) { return m.is_const(); })) {
          axes.emplace();
          for (const Mono& m : *v) axes->push_back(m.c);
        }
      } else {
        axes = n.attr_ints("axes");
      }
      ok = axes && (n.op_type == "Squeeze" ? c->squeeze(*axes) : c->unsqueeze(*axes));
    }
    if (!ok) return false;
  }
  auto end = R.shapes.shape(R.node(chain.back()).outputs[0]);
  (void)src;
  return end && c->final_shape() == *end;
}

// Rewrites chain (node indices, source first) reading `src` as `plan`; Shape readers of the
// intermediates read the source.
void emit(Round& R, const std::vector<int32_t>& chain, ValueId src, const MShape& src_shape, const AtomChain::Plan& plan,
          const std::vector<std::vector<int64_t>>& targets) {
  Graph* g = R.g;
  const Node& last = R.node(chain.back());
  const ValueId end = last.outputs[0];
  const std::string base = base_name(last.name);
  // Shape readers of the intermediates.
  for (size_t k = 0; k + 1 < chain.size(); ++k) {
    const ValueId w = R.node(chain[k]).outputs[0];
    for (int32_t ri : R.of(w)) {
      if (!is_plain_shape(R.node(ri))) continue;
      std::vector<int64_t> consts;
      const auto ws = R.shapes.shape(w);
      const auto found = ws ? shape_from_source(*ws, src_shape, &consts) : std::nullopt;
      if (!found) continue;  // read only for the chain's own Reshape shapes: goes with the chain
      const std::vector<int64_t>& idx = *found;
      Node& s = g->nodes()[static_cast<size_t>(ri)];
      const std::string sname = s.name;
      const ValueId out = s.outputs[0];
      ValueId whole = g->add_value(sname + "/of_source");
      s.inputs[0] = src;
      s.outputs[0] = whole;
      if (!consts.empty())
        whole = g->add_node(Op::Concat, sname + "/with_consts", {whole, i64_const(g, sname + "/consts", consts)}, 1,
                            {{"axis", int_attr(0)}})[0];
      add_writing(g, Op::Gather, sname + "/dims", {whole, i64_const(g, sname + "/idx", idx)}, out, {{"axis", int_attr(0)}});
    }
  }
  std::vector<std::pair<Op, AttributeMap>> ops;
  size_t t = 0;
  if (plan.pre) ops.push_back({Op::Reshape, {}});
  if (!plan.perm.empty()) ops.push_back({Op::Transpose, {{"perm", ints_attr(plan.perm)}}});
  if (plan.post) ops.push_back({Op::Reshape, {}});
  R.drop[static_cast<size_t>(chain.back())] = true;
  if (ops.empty()) {  // the chain does nothing: its readers read the source
    for (int32_t ri : R.of(end))
      for (ValueId& in : g->nodes()[static_cast<size_t>(ri)].inputs)
        if (in == end) in = src;
    return;
  }
  ValueId x = src;
  for (size_t k = 0; k < ops.size(); ++k) {
    std::vector<ValueId> ins{x};
    const std::string name = base + (ops[k].first == Op::Transpose ? "/perm" : k == 0 ? "/split" : "/merge");
    if (ops[k].first == Op::Reshape) ins.push_back(i64_const(g, name + "/shape", targets[t++]));
    if (k + 1 == ops.size())
      add_writing(g, ops[k].first, name, ins, end, ops[k].second);
    else
      x = g->add_node(ops[k].first, name, ins, 1, ops[k].second)[0];
  }
}

// Whether every data reader of v (rank `rank`) is one sink() moves a Transpose through.
bool sinkable_readers(const Round& R, ValueId v, size_t rank) {
  const auto d = data_readers(R, v);
  if (d.empty() || R.output(v)) return false;
  for (int32_t ri : d) {
    const Node& n = R.node(ri);
    const bool gather = is_op(n, "Gather") && n.inputs.size() == 2 && n.inputs[0] == v && R.g->value(n.inputs[1]).constant &&
                        R.g->value(n.inputs[1]).constant->numel() == 1;
    if (!gather && !(R.last_axis_op(n, v, false) && rank > 0)) return false;
  }
  return true;
}

}  // namespace

int canonicalize_chains(Graph* g) {
  Round R(g);
  const size_t n0 = g->nodes().size();
  for (size_t ei = 0; ei < n0; ++ei) {
    const Node& e = R.node(static_cast<int32_t>(ei));
    if (!is_movement(e) || R.touched[ei]) continue;
    const ValueId end = e.outputs[0];
    const auto dr = data_readers(R, end);
    if (!R.output(end) && dr.size() == 1 && is_movement(R.node(dr[0])) && R.node(dr[0]).inputs[0] == end) continue;
    std::vector<int32_t> chain{static_cast<int32_t>(ei)};
    ValueId src = e.inputs[0];
    while (chain.size() < 16) {
      const int32_t p = g->value(src).producer;
      if (!R.old(p) || !is_movement(R.node(p)) || R.output(src) || R.touched[static_cast<size_t>(p)]) break;
      const auto d = data_readers(R, src);
      if (d.size() != 1 || d[0] != chain.front() || R.node(chain.front()).inputs[0] != src) break;
      chain.insert(chain.begin(), p);
      src = R.node(p).inputs[0];
    }
    // Cut the chain after an intermediate whose Shape cannot be said from the source's.
    std::optional<MShape> src_shape;
    for (bool cut = true; cut;) {
      cut = false;
      src_shape = R.shapes.shape(src);
      if (!src_shape) break;
      for (size_t k = chain.size() - 1; k-- > 0;) {
        const ValueId w = R.node(chain[k]).outputs[0];
        std::vector<int64_t> consts;
        const auto ws = R.shapes.shape(w);
        if (data_readers(R, w).size() == R.of(w).size()) continue;
        if (ws && shape_from_source(*ws, *src_shape, &consts)) continue;
        if (shapes_die_with(R, w, chain)) continue;
        chain.erase(chain.begin(), chain.begin() + static_cast<std::ptrdiff_t>(k) + 1);
        src = w;
        cut = true;
        break;
      }
    }
    if (!src_shape) continue;
    AtomChain c(*src_shape);
    if (!compose(R, chain, *src_shape, &c)) continue;
    const AtomChain::Plan plan = c.plan();
    int old_t = 0;
    for (int32_t i : chain) old_t += R.node(i).op_type == "Transpose";
    const int new_t = plan.perm.empty() ? 0 : 1;
    const int new_n = (plan.pre ? 1 : 0) + new_t + (plan.post ? 1 : 0);
    // As many nodes, but the Transpose last where what reads the chain can take it further down
    // (torchvision's packed q/k/v: Transpose -> Reshape -> Gathers).
    const bool late = !plan.perm.empty() && !plan.post && R.node(chain.back()).op_type != "Transpose" &&
                      sinkable_readers(R, end, plan.perm.size());
    if (!(new_t < old_t || (new_t == old_t && new_n < static_cast<int>(chain.size())) ||
          (new_t == old_t && new_n == static_cast<int>(chain.size()) && late)))
      continue;
    if (new_n == 0 && R.output(end)) continue;
    if (chain.size() == 1 && new_t == old_t) continue;  // one Reshape alone is a view already
    std::vector<std::vector<int64_t>> targets;
    MShape cur = *src_shape;
    bool ok = true;
    if (plan.pre) {
      auto t = reshape_target(cur, *plan.pre);
      ok = ok && t;
      if (t) targets.push_back(*t);
      cur = *plan.pre;
    }
    if (!plan.perm.empty()) {
      MShape p;
      for (int64_t a : plan.perm) p.push_back(cur[static_cast<size_t>(a)]);
      cur = p;
    }
    if (plan.post) {
      auto t = reshape_target(cur, *plan.post);
      ok = ok && t;
      if (t) targets.push_back(*t);
    }
    if (!ok) continue;
    for (int32_t i : chain) R.touched[static_cast<size_t>(i)] = true;
    ++R.changes;
    emit(R, chain, src, *src_shape, plan, targets);
  }
  if (R.changes) {
    R.drop.resize(g->nodes().size(), false);
    erase_nodes(g, R.drop);
  }
  return R.changes;
}

namespace {

Tensor transposed_2d(const Tensor& b) {
  const int64_t rows = b.shape()[0], cols = b.shape()[1];
  Tensor t = Tensor::empty(b.dtype(), {cols, rows});
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) t.set_f64(j * rows + i, b.get_f64(i * cols + j));
  return t;
}

}  // namespace

int unflatten_gemms(Graph* g) {
  Round R(g);
  const size_t n0 = g->nodes().size();
  for (size_t gi = 0; gi < n0; ++gi) {
    const Node& gm = R.node(static_cast<int32_t>(gi));
    if (!is_op(gm, "Gemm") || gm.inputs.size() < 2 || gm.attr_i("transA", 0) != 0 || gm.attr_f("alpha", 1) != 1.0f ||
        gm.attr_f("beta", 1) != 1.0f)
      continue;
    const ValueId a = gm.inputs[0], b = gm.inputs[1], y = gm.outputs[0];
    const ValueId c = gm.inputs.size() > 2 ? gm.inputs[2] : kNoValue;
    const bool trans_b = gm.attr_i("transB", 0) != 0;
    const int32_t r1 = g->value(a).producer;
    if (!R.old(r1) || !is_op(R.node(r1), "Reshape") || R.of(a).size() != 1 || R.output(a) || R.output(y)) continue;
    if (R.rank(b) != 2 || (trans_b && !g->value(b).constant) || (c != kNoValue && R.rank(c) > 1)) continue;
    int32_t r2 = -1;
    for (int32_t ri : R.of(y))
      if (is_op(R.node(ri), "Reshape") && R.node(ri).inputs[0] == y) r2 = r2 < 0 ? ri : -2;
    if (r2 < 0 || R.touched[static_cast<size_t>(r2)]) continue;
    bool others_ok = true;  // Shape readers of the Gemm's output (read a [-1, N] view of the result)
    for (int32_t ri : R.of(y)) others_ok = others_ok && (ri == r2 || is_plain_shape(R.node(ri)));
    const ValueId x = R.node(r1).inputs[0];
    const auto xs = R.shapes.shape(x), mk = R.shapes.shape(a), out = R.shapes.shape(R.node(r2).outputs[0]);
    if (!others_ok || !xs || !mk || !out || mk->size() != 2 || out->size() < 2) continue;
    if (!out->back().is_const()) continue;
    MShape lead(out->begin(), out->end() - 1);
    if (!(product(lead, 0, lead.size()) == (*mk)[0])) continue;
    size_t j = xs->size();
    while (j > 0 && !(product(*xs, j, xs->size()) == (*mk)[1])) --j;
    if (j == 0 || !(product(*xs, 0, j) == (*mk)[0])) continue;
    MShape want = lead;
    want.push_back((*mk)[1]);
    std::optional<std::vector<int64_t>> target;
    if (!(want == *xs) && !(target = reshape_target(*xs, want))) continue;
    R.touched[gi] = R.touched[static_cast<size_t>(r2)] = true;
    R.drop[static_cast<size_t>(r2)] = true;
    ++R.changes;
    const std::string base = gm.name;
    const ValueId result = R.node(r2).outputs[0];
    const int64_t n_out = out->back().c;
    const std::vector<int32_t> shape_readers = R.of(y);
    ValueId in = x;
    if (target) in = g->add_node(Op::Reshape, base + "/unflatten_in", {x, i64_const(g, base + "/in_shape", *target)}, 1)[0];
    ValueId w = b;
    if (trans_b) w = g->add_constant(base + "/weight_t", transposed_2d(*g->value(b).constant));
    // Without a bias, a zero one: MatMul + Add is what fuse_matmul_bias makes one flat Gemm of
    // (a [B, S, K] x [K, N] MatMul would run as B strided GEMMs), and a bias is free in its epilogue.
    const ValueId bias = c != kNoValue ? c : g->add_constant(base + "/zero_bias", Tensor::zeros(g->value(b).info.dtype, {n_out}));
    const ValueId mm = g->add_node(Op::MatMul, base + "/matmul", {in, w}, 1)[0];
    add_writing(g, Op::Add, base + "/bias", {mm, bias}, result);
    for (int32_t ri : shape_readers) {
      if (ri == r2) continue;
      const ValueId flat = g->add_node(Op::Reshape, base + "/flat_view", {result, i64_const(g, base + "/flat", {-1, n_out})}, 1)[0];
      g->nodes()[static_cast<size_t>(ri)].inputs[0] = flat;
    }
  }
  if (R.changes) {
    R.drop.resize(g->nodes().size(), false);
    erase_nodes(g, R.drop);
  }
  return R.changes;
}

}  // namespace gpuopt::movement
