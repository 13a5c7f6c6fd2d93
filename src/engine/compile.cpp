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

Placement Compiled::placement() const {
  return place_nodes(*graph, device, backend.get(), backend_error.ok() ? "" : backend_error.to_string());
}

Result<Compiled::AtShapes> Compiled::at_shapes(const std::vector<std::pair<std::string, int64_t>>& symbols,
                                               int64_t batch, const Placement* placement_in) const {
  AtShapes a;
  GPUOPT_ASSIGN_OR_RETURN(a.bound, bind_shapes(*graph, symbols, batch));
  a.costs = node_costs(a.bound);
  const Placement computed = placement_in ? Placement{} : placement();
  const Placement& p = placement_in ? *placement_in : computed;
  a.plan = plan_memory_for(a.bound, p.error.empty() ? &p.place : nullptr, device.is_cuda(), &a.plan_rules);
  return a;
}

namespace {

Result<Compiled> run_stages(Graph graph, const EngineOptions& options) {
  Compiled c;
  c.device = options.device;
  GPUOPT_RETURN_IF_ERROR(graph.topo_sort());
  GPUOPT_RETURN_IF_ERROR(graph.infer_shapes());  // refuses a tensor larger than physical memory
  GPUOPT_RETURN_IF_ERROR(run_session_passes(&graph, options.device, precision_name(options.precision), options.optimize,
                                            options.kernels, &c.passes));
  // A tensor that can never fit in --memory-limit refuses the model now, not in the middle of a
  // run (checked after precision conversion: fp16 tensors take half the bytes).
  if (options.memory_limit) GPUOPT_RETURN_IF_ERROR(graph.check_tensor_sizes(options.memory_limit));
  c.graph = std::make_unique<Graph>(std::move(graph));
  auto backend = create_backend(options.device);
  if (backend.ok()) c.backend = std::move(*backend);
  else c.backend_error = backend.status();
  return c;
}

}  // namespace

Result<Compiled> analyze(Graph graph, const EngineOptions& options) { return run_stages(std::move(graph), options); }

Result<Compiled> compile(Graph graph, const EngineOptions& options) {
  GPUOPT_ASSIGN_OR_RETURN(Compiled c, run_stages(std::move(graph), options));
  if (!c.backend) return c.backend_error;
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
