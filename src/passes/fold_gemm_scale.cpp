// fold_gemm_scale: Gemm -> [Reshape] -> [Transpose] -> Mul(g) with a constant g that scales each
// of the Gemm's output columns (ConvNeXt's layer scale: a [C, 1, 1] Parameter times the block's
// last Linear, after the permute back to NCHW) becomes the Gemm alone, with g folded into its
// constant B and C:  (alpha A B + beta C) * g[n] = alpha A (B * g[n]) + beta (C * g[n]).
// On the GPU that is one elementwise pass over the block's output less per block (18 in
// ConvNeXt-T).
//
// Conditions: B constant 2-D; C absent, or constant with one element or a last dim of N; every
// intermediate read only by the next node of the chain and no graph output; g a float constant of
// B's dtype, of rank at most the Mul input's, whose dims are 1 except on the axis the Gemm's
// column axis lands on (through the Transpose's perm), where it is N or 1; after a Reshape, the
// reshaped value's last dim must be N (known). New constants are made: B and C may be shared.
#include "passes/match.h"
#include "passes/passes.h"

#include <string>

namespace gpuopt {
namespace {

const Tensor* constant_of(const Graph& g, ValueId v) {
  if (v == kNoValue) return nullptr;
  const auto& c = g.value(v).constant;
  return c ? &*c : nullptr;
}

// The per-column factors s[n] of g, or empty when g is not a per-column scale of x (rank r) whose
// column axis is `col`.
std::vector<double> column_scale(const Tensor& g, size_t r, size_t col, int64_t n_cols) {
  const Shape& gs = g.shape();
  if (gs.size() > r) return {};
  int64_t along = 1;
  for (size_t i = 0; i < gs.size(); ++i) {
    const size_t axis = r - gs.size() + i;  // aligned to the right, as ONNX broadcasting
    if (gs[i] == 1) continue;
    if (axis != col || gs[i] != n_cols) return {};
    along = gs[i];
  }
  std::vector<double> s(static_cast<size_t>(n_cols));
  for (int64_t c = 0; c < n_cols; ++c) s[static_cast<size_t>(c)] = g.get_f64(along == 1 ? 0 : c);
  return s;
}

}  // namespace

Result<PassStats> fold_gemm_scale(Graph* g) {
  PassStats stats;
  g->rebuild_producers();
  Matcher m(g);
  std::vector<bool>& drop = m.drop();
  auto sole = [&](ValueId v) {
    const auto r = m.readers(v);
    return r.size() == 1 ? r[0] : -1;
  };
  for (size_t mi = 0; mi < g->nodes().size(); ++mi) {
    const Node& mul = g->nodes()[mi];
    if (!is_default(mul, "Mul") || mul.inputs.size() != 2 || mul.outputs.size() != 1) continue;
    const int gi = constant_of(*g, mul.inputs[1]) ? 1 : constant_of(*g, mul.inputs[0]) ? 0 : -1;
    if (gi < 0) continue;
    const ValueId x = mul.inputs[static_cast<size_t>(1 - gi)];
    const Tensor& scale = *constant_of(*g, mul.inputs[static_cast<size_t>(gi)]);
    if (x == kNoValue || constant_of(*g, x) || sole(x) != static_cast<int32_t>(mi)) continue;
    // Walk back: [Transpose] <- [Reshape] <- Gemm, each value read only by the next node.
    std::vector<int64_t> perm;
    int32_t last = g->value(x).producer;  // the chain's last node: it will write the Mul's output
    int32_t pi = last;
    if (pi >= 0 && is_default(g->nodes()[static_cast<size_t>(pi)], "Transpose")) {
      const Node& t = g->nodes()[static_cast<size_t>(pi)];
      perm = t.attr_ints("perm");
      if (perm.empty() || sole(t.inputs[0]) != pi) continue;
      pi = g->value(t.inputs[0]).producer;
    }
    ValueId gemm_like_out = kNoValue;  // the value whose last axis is the Gemm's columns
    if (pi >= 0 && is_default(g->nodes()[static_cast<size_t>(pi)], "Reshape")) {
      const Node& r = g->nodes()[static_cast<size_t>(pi)];
      gemm_like_out = r.outputs[0];
      if (sole(r.inputs[0]) != pi) continue;
      pi = g->value(r.inputs[0]).producer;
    }
    if (pi < 0 || drop[static_cast<size_t>(pi)]) continue;
    const Node& gemm = g->nodes()[static_cast<size_t>(pi)];
    if (!is_default(gemm, "Gemm") || gemm.inputs.size() < 2 || gemm.outputs.size() != 1) continue;
    if (gemm_like_out == kNoValue) gemm_like_out = gemm.outputs[0];
    const Tensor* b = constant_of(*g, gemm.inputs[1]);
    const Tensor* c = gemm.inputs.size() > 2 ? constant_of(*g, gemm.inputs[2]) : nullptr;
    const bool has_c = gemm.inputs.size() > 2 && gemm.inputs[2] != kNoValue;
    if (!b || b->rank() != 2 || !dtype_is_float(b->dtype()) || scale.dtype() != b->dtype() || (has_c && !c)) continue;
    const bool trans_b = gemm.attr_i("transB", 0) != 0;
    const int64_t n_cols = b->shape()[trans_b ? 0 : 1];
    const ValueInfo& yi = g->value(gemm_like_out).info;
    if (!yi.rank_known || yi.shape.empty() || yi.shape.back() != n_cols) continue;
    const size_t r = yi.shape.size();
    size_t col = r - 1;
    if (!perm.empty()) {
      if (perm.size() != r) continue;
      col = r;
      for (size_t j = 0; j < r; ++j)
        if (perm[j] == static_cast<int64_t>(r) - 1) col = j;
      if (col == r) continue;
    }
    const std::vector<double> s = column_scale(scale, r, col, n_cols);
    if (s.empty()) continue;
    if (has_c && c->numel() != 1 && (c->rank() == 0 || c->shape().back() != n_cols)) continue;

    Tensor nb = b->clone();
    const int64_t k = b->shape()[trans_b ? 1 : 0];
    for (int64_t i = 0; i < n_cols; ++i)
      for (int64_t j = 0; j < k; ++j) {
        const int64_t at = trans_b ? i * k + j : j * n_cols + i;
        nb.set_f64(at, nb.get_f64(at) * s[static_cast<size_t>(i)]);
      }
    Tensor nc;
    if (has_c) {
      nc = c->numel() == 1 ? Tensor::empty(c->dtype(), {n_cols}) : c->clone();
      for (int64_t i = 0; i < nc.numel(); ++i)
        nc.set_f64(i, (c->numel() == 1 ? c->get_f64(0) : nc.get_f64(i)) * s[static_cast<size_t>(i % n_cols)]);
    }
    // add_constant may move the graph's values: b, c and scale are not used past this point.
    const std::string tag = "/scaled_by_" + (mul.name.empty() ? std::to_string(mi) : mul.name);
    Node& gm = g->nodes()[static_cast<size_t>(pi)];
    const std::string b_name = g->value(gm.inputs[1]).name;
    gm.inputs[1] = g->add_constant(b_name + tag, std::move(nb));
    if (has_c) {
      const std::string c_name = g->value(gm.inputs[2]).name;
      gm.inputs[2] = g->add_constant(c_name + tag, std::move(nc));
    }
    // The Mul's output value moves to the chain's last node.
    g->nodes()[static_cast<size_t>(last)].outputs[0] = g->nodes()[mi].outputs[0];
    drop[mi] = true;
    ++stats.removed;
  }
  if (stats.removed > 0) erase_nodes(g, drop);
  return stats;
}

}  // namespace gpuopt
