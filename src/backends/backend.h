// The small interface every backend implements (DESIGN.md): supports(node), an allocator, and
// compile(whole graph) -> Executable. The backend sees the whole graph so it can fuse.
//
//   GPUOPT_ASSIGN_OR_RETURN(auto backend, create_backend("cpu"));
//   GPUOPT_ASSIGN_OR_RETURN(auto exe, backend->compile(graph, {}));
//   GPUOPT_ASSIGN_OR_RETURN(std::vector<Tensor> outs, exe->run(inputs_in_graph_order, {}));
#pragma once

#include "core/status.h"
#include "core/tensor.h"
#include "gpuopt/kernel_settings.h"
#include "gpuopt/plan_cache_status.h"
#include "gpuopt/run_profile.h"
#include "ir/graph.h"

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpuopt {

// Memory of one device. Host<->device copies go through it.
class Allocator {
 public:
  virtual ~Allocator() = default;
  virtual Device device() const = 0;
  virtual Result<Tensor> alloc(DType dtype, const Shape& shape) = 0;
  // dst must already have src's dtype and shape.
  virtual Status copy_in(const Tensor& host_src, Tensor* device_dst) = 0;
  virtual Status copy_out(const Tensor& device_src, Tensor* host_dst) = 0;
};

struct CompileOptions {
  size_t memory_limit = 0;    // device bytes a session may hold (--memory-limit); 0 = no limit
  bool cuda_graphs = true;    // SessionOptions::cuda_graphs
  std::string cache_dir;      // SessionOptions::cache_dir; "" = no plan cache
  std::string model_hash;     // backends/plan_cache.h model_hash(); "" = no plan cache
  // The kernel choices and memory plan (SessionOptions::kernels); unset: KernelSettings::from_env().
  std::optional<KernelSettings> kernels;
};

struct RunOptions {
  void* stream = nullptr;         // backend-specific (cudaStream_t for CUDA); nullptr = default
  RunProfile* profile = nullptr;  // optional
};

// A compiled graph. run() is thread-safe: each call keeps its own intermediates.
class Executable {
 public:
  virtual ~Executable() = default;
  // `inputs` follow graph.inputs(), already validated (dtype, rank, concrete shapes); outputs
  // follow graph.outputs(). Shapes are re-inferred for the actual input shapes on every call.
  virtual Result<std::vector<Tensor>> run(const std::vector<Tensor>& inputs, const RunOptions& options) = 0;
  // What compile found in the plan cache (backends without one: "off").
  virtual PlanCacheStatus plan_cache() const { return {}; }
};

// Where a backend runs each node of a graph.
enum class NodePlace : uint8_t {
  kDevice,       // on the backend's device
  kCpuFallback,  // on the CPU backend: the device has no kernel for it
  kHostShapes,   // on the CPU on purpose: integer shape arithmetic on values known on the host
};
std::string_view node_place_name(NodePlace p);

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string_view name() const = 0;
  virtual bool supports(const Node& node, const Graph& graph) const = 0;
  // Per node of `graph` (topologically sorted): what compile() will do. The default is
  // supports() ? kDevice : kCpuFallback.
  virtual std::vector<NodePlace> place(const Graph& graph) const;
  virtual Allocator& allocator() = 0;
  virtual Result<std::unique_ptr<Executable>> compile(const Graph& graph, const CompileOptions& options) = 0;
};

// Makes the backend of one device of its kind (the CUDA factory: device `index`, refused with
// "cuda:N does not exist: this host has K CUDA devices" when there is no such device).
using BackendFactory = std::function<Result<std::unique_ptr<Backend>>(int index)>;
// Backends register themselves per device kind (named "cpu", "cuda") from a static initializer.
void register_backend(DeviceKind kind, std::string name, BackendFactory factory);
// A backend of its own for `device` (its own memory pool, streams and library handles).
Result<std::unique_ptr<Backend>> create_backend(const Device& device);
std::vector<std::string> backend_names();  // the kinds built in: "cpu", "cuda"

std::unique_ptr<Backend> make_cpu_backend();

// A device kind's placement decided from its op table alone, without a device (the CUDA backend
// registers one, backends/cuda/placement.h): where each node of a graph runs, and one line per op
// type of its CPU-fallback nodes naming them and why. `gpuopt inspect --device cuda` reports it on
// a machine without a GPU.
//
//   if (auto s = static_placement(Device{DeviceKind::kCuda, 0}, graph)) for (auto& l : s->fallbacks) ...
struct StaticPlacement {
  std::vector<NodePlace> place;
  std::vector<std::string> fallbacks;
};
using PlacementFn = std::function<StaticPlacement(const Graph&)>;
void register_placement(DeviceKind kind, PlacementFn fn);
// nullopt when the kind registered none (CPU devices; CUDA in a build without it).
std::optional<StaticPlacement> static_placement(const Device& device, const Graph& graph);

}  // namespace gpuopt
