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
//   GPUOPT_ASSIGN_OR_RETURN(std::vector<Tensor> outs, c.exe->run(inputs, {}));
#pragma once

#include "backends/backend.h"
#include "core/status.h"
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
  std::unique_ptr<Graph> graph;     // the optimized graph the executable runs
  std::vector<PassRecord> passes;   // each pass that ran, in order, with what it changed
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Executable> exe;
};

Result<Compiled> compile(Graph graph, const EngineOptions& options);

}  // namespace gpuopt
