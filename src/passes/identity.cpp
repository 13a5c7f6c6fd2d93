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

}  // namespace

Result<PassStats> eliminate_identity(Graph* g) {
  PassStats stats;
  std::vector<ValueId> replace(g->values().size());
  for (size_t v = 0; v < replace.size(); ++v) replace[v] = static_cast<ValueId>(v);
  std::vector<Node> kept;
  for (Node& n : g->nodes()) {
    const bool identity = n.op_type == "Identity" || (n.op_type == "Dropout" && dropout_is_identity(*g, n));
    if (identity && !n.inputs.empty() && n.inputs[0] != kNoValue && !n.outputs.empty() && n.outputs[0] != kNoValue &&
        !g->value(n.outputs[0]).is_graph_output) {
      // Inputs were already rewired (topological order), so chains collapse to the source.
      replace[static_cast<size_t>(n.outputs[0])] = n.inputs[0] == kNoValue ? kNoValue : replace[static_cast<size_t>(n.inputs[0])];
      ++stats.removed;
      continue;
    }
    for (ValueId& in : n.inputs)
      if (in != kNoValue) in = replace[static_cast<size_t>(in)];
    kept.push_back(std::move(n));
  }
  g->nodes() = std::move(kept);
  g->rebuild_producers();
  return stats;
}

}  // namespace gpuopt
