#include "passes/passes.h"

namespace gpuopt {
namespace {

// Dropout is the identity at inference unless training_mode is given and may be true.
bool dropout_is_identity(const Graph& g, const Node& n) {
  if (n.outputs.size() > 1 && n.outputs[1] != kNoValue) return false;  // mask is used
  if (n.inputs.size() < 3 || n.inputs[2] == kNoValue) return true;
  const Value& tm = g.value(n.inputs[2]);
  return tm.constant && tm.constant->numel() == 1 && tm.constant->get_f64(0) == 0.0;
}

bool has_perm(const Node& n) { return n.has_attr("perm"); }

}  // namespace

// Identity, inference Dropout and a Concat of one input go; a Transpose of a Transpose becomes one
// Transpose by the composed permutation (GPT-2's key: Transpose(0,2,1,3), then a one-input Concat
// for the absent past keys, then Transpose(0,1,3,2) -- one (0,2,3,1) after this pass, the form
// fuse_attention's head split reads), or nothing when they cancel.
Result<PassStats> eliminate_identity(Graph* g) {
  PassStats stats;
  std::vector<ValueId> replace(g->values().size());
  for (size_t v = 0; v < replace.size(); ++v) replace[v] = static_cast<ValueId>(v);
  std::vector<Node> kept;
  std::vector<int32_t> transpose_at(g->values().size(), -1);  // value -> the kept Transpose writing it
  for (Node& n : g->nodes()) {
    for (ValueId& in : n.inputs)
      if (in != kNoValue) in = replace[static_cast<size_t>(in)];
    if (n.op_type == "Transpose" && n.domain.empty() && has_perm(n) && !n.inputs.empty() && n.inputs[0] != kNoValue) {
      const int32_t t = transpose_at[static_cast<size_t>(n.inputs[0])];
      if (t >= 0 && has_perm(kept[static_cast<size_t>(t)])) {
        const std::vector<int64_t> inner = kept[static_cast<size_t>(t)].attr_ints("perm"), outer = n.attr_ints("perm");
        if (inner.size() == outer.size()) {
          std::vector<int64_t> perm(outer.size());
          bool ok = true, same = true;
          for (size_t j = 0; j < outer.size() && ok; ++j) {
            ok = outer[j] >= 0 && static_cast<size_t>(outer[j]) < inner.size();
            if (ok) perm[j] = inner[static_cast<size_t>(outer[j])];
            same = same && ok && perm[j] == static_cast<int64_t>(j);
          }
          if (ok) {
            n.inputs[0] = kept[static_cast<size_t>(t)].inputs[0];
            n.attrs["perm"] = ints_attr(perm);
            if (same) {  // the two cancel: an identity (below)
              n.op_type = "Identity";
              n.op = Op::Identity;
              n.attrs.clear();
            }
            ++stats.removed;
          }
        }
      }
    }
    const bool one_input_concat = n.op_type == "Concat" && n.domain.empty() && n.inputs.size() == 1;
    const bool identity = n.op_type == "Identity" || (n.op_type == "Dropout" && dropout_is_identity(*g, n)) || one_input_concat;
    if (identity && !n.inputs.empty() && n.inputs[0] != kNoValue && !n.outputs.empty() && n.outputs[0] != kNoValue &&
        !g->value(n.outputs[0]).is_graph_output) {
      // Inputs were already rewired (topological order), so chains collapse to the source.
      replace[static_cast<size_t>(n.outputs[0])] = n.inputs[0];
      ++stats.removed;
      continue;
    }
    if (n.op_type == "Transpose" && n.domain.empty() && !n.outputs.empty() && n.outputs[0] != kNoValue)
      transpose_at[static_cast<size_t>(n.outputs[0])] = static_cast<int32_t>(kept.size());
    kept.push_back(std::move(n));
  }
  g->nodes() = std::move(kept);
  g->rebuild_producers();
  return stats;
}

}  // namespace gpuopt
