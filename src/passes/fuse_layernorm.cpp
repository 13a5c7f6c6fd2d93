// LayerNorm written op by op, as torch's exporters write it below opset 17 (and as many
// hand-built graphs do), becomes one ONNX LayerNormalization over the last axis:
//
//   mean = ReduceMean(x, [-1]);  d = Sub(x, mean);  v = ReduceMean(Pow(d, 2) | Mul(d, d), [-1])
//   y = Div(d, Sqrt(Add(v, eps))) [* gamma] [+ beta]
//
// Both ReduceMeans keep dims and reduce only the last axis (the `axes` attribute before opset 18,
// a constant input from 18); eps, gamma and beta are constants, gamma and beta with one value per
// element of the last axis (any leading 1s). Every intermediate is read only inside the pattern
// and is no graph output; x may have other readers (the residual). Without gamma the scale is a
// constant of ones. The LayerNorm kernels then read the row once instead of nine passes; the
// skip_layernorm fusion that runs after this one can take the residual Add before it too.
#include "passes/match.h"
#include "passes/passes.h"

#include <algorithm>

namespace gpuopt {
namespace {

// A ReduceMean over the last axis only, keeping dims.
bool last_axis_mean(const Graph& g, const Node& n) {
  if (n.op_type != "ReduceMean" || !n.domain.empty() || n.inputs.empty() || n.attr_i("keepdims", 1) != 1) return false;
  std::vector<int64_t> axes = n.attr_ints("axes");
  if (n.inputs.size() > 1 && n.inputs[1] != kNoValue) {
    const auto& c = g.value(n.inputs[1]).constant;
    if (!c || c->numel() != 1) return false;
    axes = {static_cast<int64_t>(c->get_f64(0))};
  }
  if (axes.size() != 1) return false;
  const ValueInfo& x = g.value(n.inputs[0]).info;
  return axes[0] == -1 || (x.rank_known && axes[0] == static_cast<int64_t>(x.shape.size()) - 1);
}

// A constant with one value per element of the last axis (shape [.., 1, H]): as a 1-D tensor.
std::optional<Tensor> per_channel(const Graph& g, ValueId v, int64_t h) {
  if (v == kNoValue || !g.value(v).constant) return std::nullopt;
  const Tensor& t = *g.value(v).constant;
  if (t.rank() == 0 || t.shape().back() != t.numel() || (dim_is_known(h) && t.numel() != h)) return std::nullopt;
  if (!dtype_is_float(t.dtype())) return std::nullopt;
  Tensor out = Tensor::empty(t.dtype(), {t.numel()});
  for (int64_t i = 0; i < t.numel(); ++i) out.set_f64(i, t.get_f64(i));
  return out;
}

struct LnMatch {
  ValueId x = kNoValue;
  double eps = 0;
  std::optional<Tensor> gamma, beta;
  std::vector<const Node*> nodes;  // the last one writes the result
};

bool match(Matcher& m, const Node& mean_node, LnMatch* out) {
  const Graph& g = m.graph();
  if (!last_axis_mean(g, mean_node)) return false;
  const ValueId x = mean_node.inputs[0];
  const ValueInfo& xi = g.value(x).info;
  if (!dtype_is_float(xi.dtype) || !xi.rank_known || xi.shape.empty()) return false;
  const int64_t h = xi.shape.back();
  const Node* sub = m.sole_reader(mean_node.outputs[0], "Sub");
  if (!sub || sub->inputs.size() != 2 || sub->inputs[0] != x || sub->inputs[1] != mean_node.outputs[0]) return false;
  const ValueId d = sub->outputs[0];
  auto d_readers = m.readers(d);  // Mul(d, d) reads d twice: one reader
  std::sort(d_readers.begin(), d_readers.end());
  d_readers.erase(std::unique(d_readers.begin(), d_readers.end()), d_readers.end());
  if (d_readers.size() != 2) return false;
  const Node* sq = nullptr;
  const Node* div = nullptr;
  for (int32_t r : d_readers) {
    const Node& n = g.nodes()[static_cast<size_t>(r)];
    if (!n.domain.empty()) return false;
    if (n.op_type == "Pow" && n.inputs.size() == 2 && n.inputs[0] == d && m.scalar_near(n.inputs[1], 2.0, 0.0))
      sq = &n;
    else if (n.op_type == "Mul" && n.inputs.size() == 2 && n.inputs[0] == d && n.inputs[1] == d)
      sq = &n;
    else if (n.op_type == "Div" && n.inputs.size() == 2 && n.inputs[0] == d)
      div = &n;
  }
  if (!sq || !div) return false;
  const auto var_readers = m.readers(sq->outputs[0]);
  if (var_readers.size() != 1) return false;
  const Node& var = g.nodes()[static_cast<size_t>(var_readers[0])];
  if (!last_axis_mean(g, var) || var.inputs[0] != sq->outputs[0]) return false;
  const Node* add_eps = m.sole_reader(var.outputs[0], "Add");
  if (!add_eps || !m.scalar(Matcher::other(*add_eps, var.outputs[0]), &out->eps) || out->eps < 0) return false;
  const Node* sqrt = m.sole_reader(add_eps->outputs[0], "Sqrt");
  if (!sqrt || m.sole_reader(sqrt->outputs[0], "Div") != div || div->inputs[1] != sqrt->outputs[0]) return false;
  out->nodes = {&mean_node, sub, sq, &var, add_eps, sqrt, div};
  out->x = x;
  ValueId y = div->outputs[0];
  if (const Node* mul = m.sole_reader(y, "Mul")) {
    if (auto gamma = per_channel(g, Matcher::other(*mul, y), h)) {
      out->gamma = std::move(gamma);
      out->nodes.push_back(mul);
      y = mul->outputs[0];
      if (const Node* add = m.sole_reader(y, "Add"))
        if (auto beta = per_channel(g, Matcher::other(*add, y), h)) {
          out->beta = std::move(beta);
          out->nodes.push_back(add);
        }
    }
  }
  if (!out->gamma && !dim_is_known(h)) return false;  // ones need the width
  const DType dt = xi.dtype;
  return g.value(out->nodes.back()->outputs[0]).info.dtype == dt && (!out->gamma || out->gamma->dtype() == dt) &&
         (!out->beta || out->beta->dtype() == dt);
}

}  // namespace

Result<PassStats> fuse_layernorm(Graph* g) {
  PassStats stats;
  const auto ln_op = op_from_name("LayerNormalization");
  if (!ln_op) return stats;
  g->rebuild_producers();
  Matcher m(g);
  std::vector<LnMatch> found;
  for (const Node& n : g->nodes()) {
    LnMatch lm;
    if (!match(m, n, &lm)) continue;
    for (const Node* d : lm.nodes) m.mark(d);
    found.push_back(std::move(lm));
  }
  for (LnMatch& lm : found) {
    const int32_t last = m.index_of(lm.nodes.back());
    const Node& old = g->nodes()[static_cast<size_t>(last)];
    const std::string base = old.name.empty() ? "layernorm" : old.name;
    const ValueId y = old.outputs[0];
    const DType dt = g->value(lm.x).info.dtype;
    if (!lm.gamma) {
      lm.gamma = Tensor::empty(dt, {g->value(lm.x).info.shape.back()});
      for (int64_t i = 0; i < lm.gamma->numel(); ++i) lm.gamma->set_f64(i, 1.0);
    }
    std::vector<ValueId> ins{lm.x, g->add_constant(base + "/scale", std::move(*lm.gamma))};
    if (lm.beta) ins.push_back(g->add_constant(base + "/bias", std::move(*lm.beta)));
    Node ln;
    ln.op = *ln_op;
    ln.op_type = "LayerNormalization";
    ln.name = base;
    ln.attrs["axis"] = int_attr(-1);
    ln.attrs["epsilon"] = float_attr(static_cast<float>(lm.eps));
    ln.inputs = std::move(ins);
    ln.outputs = {y};
    m.drop()[static_cast<size_t>(last)] = false;
    g->nodes()[static_cast<size_t>(last)] = std::move(ln);
    stats.removed += static_cast<int>(lm.nodes.size()) - 1;
  }
  if (!found.empty()) erase_nodes(g, m.drop());
  return stats;
}

}  // namespace gpuopt
