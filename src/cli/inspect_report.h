// `gpuopt inspect --optimized`: what the compiler did to a model. Per node of the graph after
// the session's passes: the fusion that made it (a FusedConv with its epilogue, attention fused
// into one Attention node that runs as SDPA, GELU, MatMul+bias into Gemm), its layout (NHWC
// regions of the layout pass, NCHW elsewhere), its precision and where it runs; then the
// transposes left, the BatchNormalizations folded and the static memory plan (engine/analysis.h
// plan_memory_for) for the inspected batch: arena bytes against the sum of the activations.
#pragma once

#include "backends/backend.h"
#include "ir/graph.h"
#include "backends/memory_plan.h"

#include <nlohmann/json.hpp>

#include <map>
#include <string>
#include <vector>

namespace gpuopt::cli {

struct NodeReport {
  std::string name;
  std::string op;         // "FusedConv" or "com.microsoft:FusedConv" outside the default domain
  std::string fusion;     // "" or the pass: conv, gelu, attention, matmul_bias
  std::string pattern;    // what it replaced: "Conv+Add+Relu", "MatMul+Softmax+MatMul", ...
  std::string epilogue;   // FusedConv: "Relu", "Add+Relu", "Add" or "" (none)
  std::string layout;     // "NHWC", "NCHW" (4-D activations), "" otherwise
  std::string precision;  // dtype of output 0
  std::string place;      // node_place_name on --device, "" when placement is not known
};

struct CompileReport {
  int nodes_before = 0, nodes_after = 0;
  int batchnorms_folded = 0;
  std::vector<NodeReport> nodes;
  std::map<std::string, int> fusions;          // pass -> nodes it made
  int nhwc_nodes = 0, nchw_nodes = 0;
  int layout_transposes = 0, other_transposes = 0;  // Transposes the layout pass put at region edges / the rest
  std::map<std::string, int> precision;        // dtype of output 0 -> nodes
  MemoryPlan plan;
  std::string plan_for;                        // which executor's rules the plan follows
};

// `original`: the model as imported; `optimized`: the engine's graph (engine/compile.h analyze) with
// the batch bound; `place`: per node of `optimized` on --device, or nullptr when not known; `plan`
// and `plan_rules`: Compiled::at_shapes's memory plan of that batch.
CompileReport build_compile_report(const Graph& original, const Graph& optimized, const std::vector<NodePlace>* place,
                                   MemoryPlan plan, std::string plan_rules);

nlohmann::json compile_report_json(const Graph& optimized, const CompileReport& r, bool verbose);
void print_compile_report(const Graph& optimized, const CompileReport& r, bool verbose);

}  // namespace gpuopt::cli
