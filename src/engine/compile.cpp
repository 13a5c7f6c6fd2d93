// compile (engine/compile.h): graph -> passes -> size check -> backend -> executable.
#include "engine/compile.h"

#include <array>

namespace gpuopt {
namespace {

constexpr std::array<std::string_view, 5> kNames = {"fp32", "fp16", "bf16", "int8", "fp8"};

}  // namespace

std::string_view precision_name(Precision p) { return kNames[static_cast<size_t>(p)]; }

Result<Precision> parse_precision(std::string_view text) {
  for (size_t i = 0; i < kNames.size(); ++i)
    if (kNames[i] == text) return static_cast<Precision>(i);
  return Status::InvalidArgument("precision '{}' is not one of fp32, fp16, bf16, int8, fp8", text);
}

Result<Compiled> compile(Graph graph, const EngineOptions& options) {
  Compiled c;
  GPUOPT_RETURN_IF_ERROR(graph.topo_sort());
  GPUOPT_RETURN_IF_ERROR(graph.infer_shapes());  // refuses a tensor larger than physical memory
  GPUOPT_RETURN_IF_ERROR(run_session_passes(&graph, options.device, precision_name(options.precision), options.optimize,
                                            options.kernels, &c.passes));
  // A tensor that can never fit in --memory-limit refuses the model now, not in the middle of a
  // run (checked after precision conversion: fp16 tensors take half the bytes).
  if (options.memory_limit) GPUOPT_RETURN_IF_ERROR(graph.check_tensor_sizes(options.memory_limit));
  c.graph = std::make_unique<Graph>(std::move(graph));
  GPUOPT_ASSIGN_OR_RETURN(c.backend, create_backend(options.device));
  CompileOptions co;
  co.memory_limit = options.memory_limit;
  co.cuda_graphs = options.cuda_graphs && options.memory_limit == 0;
  co.kernels = options.kernels;
  if (!options.model_hash.empty()) {
    co.cache_dir = options.cache_dir;
    co.model_hash = options.model_hash;
  }
  GPUOPT_ASSIGN_OR_RETURN(c.exe, c.backend->compile(*c.graph, co));
  return c;
}

}  // namespace gpuopt
