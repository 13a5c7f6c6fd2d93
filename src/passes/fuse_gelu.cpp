// GELU as exporters write it, element by element, becomes one ONNX Gelu node (opset 20):
//
//   exact:  x * 0.5 * (1 + Erf(x / 1.41421))                    (Div by sqrt 2, or Mul by 1/sqrt 2)
//   tanh:   x * 0.5 * (1 + Tanh(0.79788 * (x + 0.044715 * x^3)))  (Pow(x, 3) or x * x * x)
//
// with the three ways of writing the outer products: ((x * t) * 0.5), ((t * 0.5) * x) and
// ((x * 0.5) * t), where t = 1 + Erf(...) or 1 + Tanh(...). BERT-base has 12 of the first
// (five elementwise passes over a [batch, 128, 3072] tensor each, a quarter of its time at batch
// 256), GPT-2 12 of the second (eight passes). Every intermediate must be read once and not be a
// graph output; constants must match to 1e-4 relative.
#include "passes/match.h"
#include "passes/passes.h"

#include <optional>

namespace gpuopt {
namespace {

constexpr double kSqrt2 = 1.4142135623730951, kSqrt2OverPi = 0.7978845608028654, kCubic = 0.044715;

struct GeluMatch {
  ValueId x = kNoValue;
  std::vector<const Node*> nodes;  // every node the Gelu replaces; the last writes the result
};

// u = x / sqrt2 or x * (1/sqrt2): x.
std::optional<ValueId> erf_argument(const Matcher& m, ValueId u, GeluMatch* g) {
  if (const Node* d = m.producer(u, "Div"); d && d->inputs.size() == 2 && m.scalar_near(d->inputs[1], kSqrt2)) {
    g->nodes.push_back(d);
    return d->inputs[0];
  }
  if (const Node* mu = m.producer(u, "Mul"); mu && mu->inputs.size() == 2) {
    for (int s = 0; s < 2; ++s)
      if (m.scalar_near(mu->inputs[1 - s], 1.0 / kSqrt2)) {
        g->nodes.push_back(mu);
        return mu->inputs[s];
      }
  }
  return std::nullopt;
}

// p = x^3 as Pow(x, 3) or Mul(Mul(x, x), x) (either order): x.
std::optional<ValueId> cube_of(const Matcher& m, ValueId p, GeluMatch* g) {
  if (const Node* pw = m.producer(p, "Pow"); pw && pw->inputs.size() == 2 && m.scalar_near(pw->inputs[1], 3.0)) {
    g->nodes.push_back(pw);
    return pw->inputs[0];
  }
  if (const Node* outer = m.producer(p, "Mul"); outer && outer->inputs.size() == 2) {
    for (int s = 0; s < 2; ++s) {
      const Node* sq = m.producer(outer->inputs[s], "Mul");
      const ValueId x = outer->inputs[1 - s];
      if (sq && sq->inputs.size() == 2 && sq->inputs[0] == x && sq->inputs[1] == x && m.readers(sq->outputs[0]).size() == 1) {
        g->nodes.push_back(outer);
        g->nodes.push_back(sq);
        return x;
      }
    }
  }
  return std::nullopt;
}

// u = 0.79788 * (x + 0.044715 * x^3): x.
std::optional<ValueId> tanh_argument(const Matcher& m, ValueId u, GeluMatch* g) {
  const Node* scale = m.producer(u, "Mul");
  if (!scale || scale->inputs.size() != 2) return std::nullopt;
  for (int s = 0; s < 2; ++s) {
    if (!m.scalar_near(scale->inputs[1 - s], kSqrt2OverPi)) continue;
    const ValueId inner = scale->inputs[s];
    const Node* add = m.producer(inner, "Add");
    if (!add || add->inputs.size() != 2 || m.readers(inner).size() != 1) continue;
    for (int a = 0; a < 2; ++a) {
      const ValueId x = add->inputs[a], term = add->inputs[1 - a];
      const Node* mul = m.producer(term, "Mul");
      if (!mul || mul->inputs.size() != 2 || m.readers(term).size() != 1) continue;
      for (int c = 0; c < 2; ++c) {
        if (!m.scalar_near(mul->inputs[1 - c], kCubic) || m.readers(mul->inputs[c]).size() != 1) continue;
        GeluMatch inner_g;
        if (auto cx = cube_of(m, mul->inputs[c], &inner_g); cx && *cx == x) {
          g->nodes.insert(g->nodes.end(), {scale, add, mul});
          g->nodes.insert(g->nodes.end(), inner_g.nodes.begin(), inner_g.nodes.end());
          return x;
        }
      }
    }
  }
  return std::nullopt;
}

// t = Erf/Tanh output -> Add(t, 1) -> the outer products with x and 0.5; fills g->nodes with
// the Add and the products (the result's writer last).
bool outer_products(const Matcher& m, ValueId t, ValueId x, GeluMatch* g) {
  const Node* one = m.sole_reader(t, "Add");
  if (!one || !m.scalar_near(Matcher::other(*one, t), 1.0)) return false;
  const ValueId sum = one->outputs[0];
  const Node* m1 = m.sole_reader(sum, "Mul");
  if (!m1) return false;
  const ValueId o = Matcher::other(*m1, sum);
  g->nodes.push_back(one);
  g->nodes.push_back(m1);
  if (o == x || m.scalar_near(o, 0.5)) {  // ((x * t) * 0.5) or ((t * 0.5) * x)
    const Node* m2 = m.sole_reader(m1->outputs[0], "Mul");
    if (!m2) return false;
    const ValueId o2 = Matcher::other(*m2, m1->outputs[0]);
    if (!(o == x ? m.scalar_near(o2, 0.5) : o2 == x)) return false;
    g->nodes.push_back(m2);
    return true;
  }
  // ((x * 0.5) * t)
  const Node* half = m.producer(o, "Mul");
  if (!half || m.readers(o).size() != 1 || Matcher::other(*half, x) == kNoValue ||
      !m.scalar_near(Matcher::other(*half, x), 0.5))
    return false;
  g->nodes.insert(g->nodes.end() - 1, half);  // the result's writer stays last
  return true;
}

}  // namespace

Result<PassStats> fuse_gelu(Graph* g) {
  PassStats stats;
  g->rebuild_producers();
  const auto gelu_op = op_from_name("Gelu");
  if (!gelu_op) return stats;
  Matcher m(g);
  std::vector<std::pair<GeluMatch, bool>> found;  // (match, tanh)
  for (const Node& n : g->nodes()) {
    const bool is_erf = n.op_type == "Erf", is_tanh = n.op_type == "Tanh";
    if (!n.domain.empty() || !(is_erf || is_tanh) || n.inputs.size() != 1 || m.readers(n.inputs[0]).size() != 1)
      continue;
    GeluMatch gm;
    const auto x = is_erf ? erf_argument(m, n.inputs[0], &gm) : tanh_argument(m, n.inputs[0], &gm);
    if (!x) continue;
    gm.nodes.push_back(&n);
    if (!outer_products(m, n.outputs[0], *x, &gm)) continue;
    const DType dt = g->value(*x).info.dtype;
    if (!dtype_is_float(dt) || g->value(gm.nodes.back()->outputs[0]).info.dtype != dt) continue;
    gm.x = *x;
    for (const Node* d : gm.nodes) m.mark(d);
    found.emplace_back(std::move(gm), is_tanh);
  }
  for (auto& [gm, tanh] : found) {
    const int32_t last = m.index_of(gm.nodes.back());
    Node gelu;
    gelu.op = *gelu_op;
    gelu.op_type = "Gelu";
    gelu.name = g->nodes()[static_cast<size_t>(last)].name;
    if (tanh) gelu.attrs["approximate"] = string_attr("tanh");
    gelu.inputs = {gm.x};
    gelu.outputs = {g->nodes()[static_cast<size_t>(last)].outputs[0]};
    m.drop()[static_cast<size_t>(last)] = false;
    g->nodes()[static_cast<size_t>(last)] = std::move(gelu);
    stats.removed += static_cast<int>(gm.nodes.size()) - 1;
  }
  if (!found.empty()) erase_nodes(g, m.drop());
  return stats;
}

}  // namespace gpuopt
