// One typed pipeline from an imported graph to an executable: shapes, the pass table with the
// session's settings (passes/pipeline.h, each pass's statistics kept), the --memory-limit size
// check, the device's backend and its compile (plan cache included). Session::init is this plus
// the descriptions of the inputs and outputs; EngineOptions is filled once at the edge
// (SessionOptions, the CLI's flags, config.pbtxt) with the environment's KernelSettings as defaults.
//
//   EngineOptions o;
//   o.device = Device::cuda(0);
//   GPUOPT_ASSIGN_OR_RETURN(o.precision, parse_precision("fp16"));
//   GPUOPT_ASSIGN_OR_RETURN(o.kernels, KernelSettings::from_env());
//   GPUOPT_ASSIGN_OR_RETURN(Compiled c, compile(std::move(graph), o));
//   for (const PassRecord& p : c.passes) fmt::print("{}: -{}\n", p.name, p.stats.removed);
//   GPUOPT_ASSIGN_OR_RETURN(Compiled::AtShapes at, c.at_shapes({}, /*batch=*/8));   // FLOPs, memory plan
//   GPUOPT_ASSIGN_OR_RETURN(std::vector<Tensor> outs, c.exe->run(inputs, {}));
#pragma once

#include "backends/backend.h"
#include "core/status.h"
#include "engine/analysis.h"
#include "gpuopt/kernel_settings.h"
#include "ir/graph.h"
#include "passes/pipeline.h"

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace gpuopt {

enum class Precision : uint8_t { kFp32, kFp16, kBf16, kInt8, kFp8 };
std::string_view precision_name(Precision p);
// InvalidArgument "precision 'x' is not one of fp32, fp16, bf16, int8, fp8".
Result<Precision> parse_precision(std::string_view text);

struct EngineOptions {
  Device device = Device::cpu();
  Precision precision = Precision::kFp32;
  bool optimize = true;     // the pass table; off: the precision conversion alone
  KernelSettings kernels;   // already resolved (KernelSettings::or_env at the edge)
  size_t memory_limit = 0;  // device bytes; 0 = none (also turns CUDA graphs off when set)
  bool cuda_graphs = true;
  std::string cache_dir;    // the plan cache, with model_hash (backends/plan_cache.h); "" = none
  std::string model_hash;
};

struct Compiled {
  Device device;
  std::unique_ptr<Graph> graph;     // the optimized graph the executable runs (symbols unbound)
  std::vector<PassRecord> passes;   // each pass that ran, in order, with what it changed
  std::unique_ptr<Backend> backend; // null after analyze() when the device is not here
  Status backend_error;             // why, then
  std::unique_ptr<Executable> exe;  // null after analyze()

  // Per node of `graph`: where it runs on `device` (engine/analysis.h place_nodes). Computed when
  // asked, not by compile(): the fast CPU backend's decision builds each kernel (packed weights).
  Placement placement() const;

  // FLOPs, bytes and shapes per node of `graph` with its symbols bound (NAME -> value; a dynamic
  // leading input dim under any name is `batch` when given), and the memory plan of one run at
  // those shapes under this device's executor's rules (engine/analysis.h).
  struct AtShapes {
    Graph bound;
    std::vector<NodeCost> costs;
    MemoryPlan plan;
    std::string plan_rules;
  };
  // `placement`: this->placement() already computed, or nullptr to compute it.
  Result<AtShapes> at_shapes(const std::vector<std::pair<std::string, int64_t>>& symbols, int64_t batch,
                             const Placement* placement = nullptr) const;
};

// Every stage but the executable: shapes, passes, size check, the backend when the device is here.
// What `gpuopt inspect` reports; a missing device is not an error here (backend_error says why, and
// placement() is then the op table's, or says why not when no op table decides either).
Result<Compiled> analyze(Graph graph, const EngineOptions& options);
// analyze, then the backend's compile (the device must exist).
Result<Compiled> compile(Graph graph, const EngineOptions& options);

}  // namespace gpuopt
