#include "passes/passes.h"

namespace gpuopt {

Result<PassStats> remove_dead_nodes(Graph* g) {
  PassStats stats;
  std::vector<bool> live(g->values().size(), false);
  for (ValueId o : g->outputs()) live[static_cast<size_t>(o)] = true;
  std::vector<Node>& nodes = g->nodes();
  std::vector<bool> keep(nodes.size(), false);
  // Reverse topological order: a node is live when one of its outputs is.
  for (size_t k = nodes.size(); k-- > 0;) {
    for (ValueId o : nodes[k].outputs)
      if (o != kNoValue && live[static_cast<size_t>(o)]) keep[k] = true;
    if (!keep[k]) continue;
    for (ValueId in : nodes[k].inputs)
      if (in != kNoValue) live[static_cast<size_t>(in)] = true;
  }
  std::vector<Node> kept;
  for (size_t k = 0; k < nodes.size(); ++k) {
    if (keep[k]) kept.push_back(std::move(nodes[k]));
    else ++stats.removed;
  }
  nodes = std::move(kept);
  // Constants nobody reads any more (weights folded into others) release their memory.
  for (size_t v = 0; v < live.size(); ++v)
    if (!live[v] && g->values()[v].constant) g->values()[v].constant.reset();
  g->rebuild_producers();
  return stats;
}

}  // namespace gpuopt
