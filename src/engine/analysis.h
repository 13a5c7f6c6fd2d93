// What the pipeline knows about a graph besides its executable, computed in one place for every
// reader (Compiled, `gpuopt inspect`, `gpuopt profile`): per node its FLOPs, bytes and shapes at
// bound input shapes, where each node runs on a device, and the static memory plan under the
// executor's rules for that placement.
//
//   Graph bound = *compiled.graph;
//   bound.bind_symbol("batch", 8);
//   GPUOPT_RETURN_IF_ERROR(bound.infer_shapes());
//   std::vector<NodeCost> costs = node_costs(bound);   // index-aligned with bound.nodes()
//   std::string rules;
//   MemoryPlan plan = plan_memory_for(bound, &compiled.placement.place, compiled.device.is_cuda(), &rules);
#pragma once

#include "backends/backend.h"
#include "backends/memory_plan.h"
#include "core/device.h"
#include "core/status.h"
#include "ir/graph.h"

#include <string>
#include <utility>
#include <vector>

namespace gpuopt {

// A copy of `graph` with its symbols bound and shapes inferred: each NAME=VALUE of `symbols`
// (InvalidArgument "the model has no symbolic dim 'X' (symbols: ...)" for a name it lacks), then
// `batch` (when > 0) for the symbol "batch" and for every dynamic leading input dim.
Result<Graph> bind_shapes(const Graph& graph, const std::vector<std::pair<std::string, int64_t>>& symbols, int64_t batch);

// One node at the graph's bound shapes.
struct NodeCost {
  bool folded = false;    // a shape computation: folds away once the symbols are bound (no cost counted)
  bool concrete = true;   // every input and output shape known: flops and bytes are exact
  double flops = 0;       // the op table's FLOP count (0 for data movement)
  double bytes = 0;       // every input read once and every output written once (known sizes only)
  std::string shapes;     // "f16[8,3,224,224] x f16[64,3,7,7] -> f16[8,64,112,112]"
  std::string dtype;      // the first output's dtype
};

// Per node of `bound` (symbols bound, shapes inferred): a copy is constant-folded so shape
// arithmetic (Shape -> Gather -> Concat -> Reshape) resolves and later nodes see concrete shapes;
// the nodes it folds away are `folded`.
std::vector<NodeCost> node_costs(const Graph& bound);

// Where each node of a graph runs on a device: the backend's own decision when it exists here,
// else the op table's (static_placement: a CUDA placement on a machine without a GPU).
struct Placement {
  std::vector<NodePlace> place;         // per node; empty when `error` is set
  std::vector<std::string> fallbacks;   // the op table's reason per op type of CPU-fallback nodes
  std::string source;                   // "backend" or "op table"
  std::string error;                    // neither is available: why
};
// `backend`: the device's backend, or nullptr when it could not be created (`why` says why).
Placement place_nodes(const Graph& graph, const Device& device, const Backend* backend, const std::string& why = "");

// Per backend built in (backend_names(): "cpu", "cuda"), whether it supports each node of `graph`
// (Backend::supports with the node's input dtypes); `available` false when that backend cannot be
// created here (no CUDA device), `node` then empty.
struct BackendSupport {
  std::string name;
  bool available = false;
  std::vector<bool> node;
};
std::vector<BackendSupport> support_per_backend(const Graph& graph);

// The static memory plan of one run at `bound`'s shapes, under the executor's rules: on CUDA with
// a placement, the outputs of the nodes on the GPU (GPUOPT_MEMORY_PLAN=static); else the CPU
// executor's. `rules` (optional) receives one line naming them.
MemoryPlan plan_memory_for(const Graph& bound, const std::vector<NodePlace>* place, bool cuda, std::string* rules);

}  // namespace gpuopt
