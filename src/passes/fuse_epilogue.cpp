// Epilogues: the elementwise work after a GEMM and before a LayerNorm folded into the kernels
// that already read the data.
//
// fuse_gemm_activation: Gemm -> [Reshape] -> Relu | Gelu becomes one com.microsoft FusedGemm
// (activation "Relu", or "Gelu" with Gelu's `approximate`), ahead of the Reshape when there is
// one (an elementwise op commutes with a reshape). On the GPU the activation then runs in the
// cuBLASLt epilogue: BERT-base's 12 GELUs over [batch*128, 3072] were each a full pass.
//
// fuse_skip_layernorm: Add(a, b) -> LayerNormalization over the last axis becomes one
// com.microsoft SkipLayerNormalization(a, b, scale, bias): the kernel adds as it reads the row.
// When something else reads the sum (a pre-LN transformer's residual stream), the fused node
// writes it as its fourth output, input_skip_bias_sum; otherwise the sum never reaches memory.
// a and b must have one known shape (equal symbols count as equal), and the LayerNorm's Mean and
// InvStdDev outputs must be unused.
//
// Intermediates are fused only where nothing else reads them and they are not graph outputs.
#include "passes/match.h"
#include "passes/passes.h"

namespace gpuopt {
namespace {

// Output `out` of n is absent, or no node reads it and it is no graph output.
bool unused(const Graph& g, const Matcher& m, const Node& n, size_t out) {
  if (n.outputs.size() <= out || n.outputs[out] == kNoValue) return true;
  return !g.value(n.outputs[out]).is_graph_output && m.readers(n.outputs[out]).empty();
}

// The one node reading v (v no graph output), else -1.
int32_t sole(const Matcher& m, ValueId v) {
  const auto r = m.readers(v);
  return r.size() == 1 ? r[0] : -1;
}

}  // namespace

Result<PassStats> fuse_gemm_activation(Graph* g) {
  PassStats stats;
  const auto fused_op = op_from_name("FusedGemm");
  if (!fused_op) return stats;
  g->rebuild_producers();
  Matcher m(g);
  std::vector<bool>& drop = m.drop();
  for (size_t ai = 0; ai < g->nodes().size(); ++ai) {
    const Node& act = g->nodes()[ai];
    const bool relu = is_default(act, "Relu"), gelu = is_default(act, "Gelu");
    if ((!relu && !gelu) || act.inputs.size() != 1 || act.outputs.size() != 1) continue;
    const ValueId x = act.inputs[0];
    if (x == kNoValue || sole(m, x) != static_cast<int32_t>(ai)) continue;
    int32_t pi = g->value(x).producer;
    int32_t reshape = -1;
    if (pi >= 0 && is_default(g->nodes()[static_cast<size_t>(pi)], "Reshape")) {
      reshape = pi;
      const ValueId r_in = g->nodes()[static_cast<size_t>(pi)].inputs[0];
      if (sole(m, r_in) != reshape) continue;
      pi = g->value(r_in).producer;
    }
    if (pi < 0 || drop[static_cast<size_t>(pi)]) continue;
    Node& gemm = g->nodes()[static_cast<size_t>(pi)];
    const ValueId y = act.outputs[0];
    // The activation's dtype: a Gemm that fuse_matmul_bias just wrote has no inferred type yet.
    if (!is_default(gemm, "Gemm") || gemm.outputs.size() != 1 || !dtype_is_float(g->value(y).info.dtype)) continue;
    Attribute approx = string_attr(act.attr_s("approximate", "none"));
    gemm.op = *fused_op;
    gemm.op_type = "FusedGemm";
    gemm.domain = "com.microsoft";
    gemm.attrs["activation"] = string_attr(relu ? "Relu" : "Gelu");
    if (gelu) gemm.attrs["approximate"] = std::move(approx);
    // The activation's output value moves to the node that now writes it.
    Node& last = reshape >= 0 ? g->nodes()[static_cast<size_t>(reshape)] : gemm;
    last.outputs[0] = y;
    drop[ai] = true;
    ++stats.removed;
  }
  if (stats.removed > 0) erase_nodes(g, drop);
  return stats;
}

Result<PassStats> fuse_skip_layernorm(Graph* g) {
  PassStats stats;
  const auto fused_op = op_from_name("SkipLayerNormalization");
  if (!fused_op) return stats;
  g->rebuild_producers();
  Matcher m(g);
  std::vector<bool>& drop = m.drop();
  for (size_t li = 0; li < g->nodes().size(); ++li) {
    const Node& ln = g->nodes()[li];
    if (!is_default(ln, "LayerNormalization") || ln.inputs.size() < 2 || ln.outputs.empty()) continue;
    if (!unused(*g, m, ln, 1) || !unused(*g, m, ln, 2) || ln.attr_i("stash_type", 1) != 1) continue;
    const ValueId s = ln.inputs[0];
    const ValueInfo& si = g->value(s).info;
    if (s == kNoValue || !si.rank_known || si.shape.empty()) continue;
    const int64_t axis = ln.attr_i("axis", -1);
    if (axis != -1 && axis != static_cast<int64_t>(si.shape.size()) - 1) continue;
    // Scale and bias must be 1-D over the hidden size (LayerNormalization also allows broadcasts).
    bool params_ok = true;
    for (size_t i = 1; i < ln.inputs.size() && i <= 2; ++i) {
      if (ln.inputs[i] == kNoValue) continue;
      const ValueInfo& p = g->value(ln.inputs[i]).info;
      params_ok &= p.rank_known && p.shape.size() == 1 && p.shape[0] == si.shape.back() && dim_is_known(p.shape[0]);
    }
    const int32_t ai = g->value(s).producer;
    if (!params_ok || ai < 0 || drop[static_cast<size_t>(ai)]) continue;
    const Node& add = g->nodes()[static_cast<size_t>(ai)];
    if (!is_default(add, "Add") || add.inputs.size() != 2 || add.inputs[0] == kNoValue || add.inputs[1] == kNoValue)
      continue;
    if (!same_known_shape(g->value(add.inputs[0]).info, si) || !same_known_shape(g->value(add.inputs[1]).info, si))
      continue;
    const bool sum_read = sole(m, s) != static_cast<int32_t>(li);
    Node fused;
    fused.op = *fused_op;
    fused.op_type = "SkipLayerNormalization";
    fused.domain = "com.microsoft";
    fused.name = ln.name;
    fused.attrs["epsilon"] = float_attr(ln.attr_f("epsilon", 1e-5f));
    fused.inputs = {add.inputs[0], add.inputs[1], ln.inputs[1]};
    if (ln.inputs.size() > 2 && ln.inputs[2] != kNoValue) fused.inputs.push_back(ln.inputs[2]);
    fused.outputs = {ln.outputs[0]};
    if (sum_read) fused.outputs = {ln.outputs[0], kNoValue, kNoValue, s};
    drop[static_cast<size_t>(ai)] = true;
    g->nodes()[li] = std::move(fused);
    ++stats.removed;
  }
  if (stats.removed > 0) erase_nodes(g, drop);
  return stats;
}

}  // namespace gpuopt
