// The CUDA backend of one device: places each node on the GPU when a CUDA kernel handles it
// (cuda_ops.h) and on the CPU reference otherwise, copying values across the boundary only when
// a consumer on the other side needs them, and compiles a graph into a CudaExecutable
// (cuda_executable.h). Each backend owns its device's memory pool; `create_backend(cuda:N)`
// makes one for device N, and a device that does not exist is refused naming it.
#include "backends/backend.h"
#include "backends/cuda/cuda_executable.h"
#include "backends/cuda/placement.h"
#include "core/cuda_check.h"
#include "core/device.h"
#include "core/log.h"

#include <cuda_runtime.h>

namespace gpuopt::cuda {
namespace {

int device_count() {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  cudaGetLastError();
  return e == cudaSuccess ? count : 0;
}

// Host <-> device copies outside a run (tools, tests); each makes the device current first.
class CudaAllocator final : public Allocator {
 public:
  explicit CudaAllocator(DeviceMemory* mem) : mem_(mem) {}
  Device device() const override { return Device{DeviceKind::kCuda, mem_->device()}; }
  Result<Tensor> alloc(DType dtype, const Shape& shape) override {
    GPUOPT_CHECK_CALL(cudaSetDevice(mem_->device()));
    GPUOPT_ASSIGN_OR_RETURN(Tensor t, mem_->alloc(dtype, shape, nullptr, "tensor"));
    GPUOPT_CHECK_CALL(cudaStreamSynchronize(nullptr));
    return t;
  }
  Status copy_in(const Tensor& src, Tensor* dst) override {
    GPUOPT_CHECK_CALL(cudaSetDevice(mem_->device()));
    GPUOPT_CHECK_CALL(cudaMemcpy(dst->raw(), src.raw(), src.nbytes(), cudaMemcpyHostToDevice));
    return Status::Ok();
  }
  Status copy_out(const Tensor& src, Tensor* dst) override {
    GPUOPT_CHECK_CALL(cudaSetDevice(mem_->device()));
    GPUOPT_CHECK_CALL(cudaMemcpy(dst->raw(), src.raw(), src.nbytes(), cudaMemcpyDeviceToHost));
    return Status::Ok();
  }

 private:
  DeviceMemory* mem_;
};

class CudaBackend final : public Backend {
 public:
  CudaBackend(int device, std::unique_ptr<DeviceMemory> mem)
      : device_(device), mem_(std::move(mem)), alloc_(mem_.get()) {}
  std::string_view name() const override { return "cuda"; }

  bool supports(const Node& node, const Graph& graph) const override { return cuda_supports(node, graph); }
  std::vector<NodePlace> place(const Graph& graph) const override { return cuda_placement(graph); }
  Allocator& allocator() override { return alloc_; }

  Result<std::unique_ptr<Executable>> compile(const Graph& graph, const CompileOptions& options) override {
    GPUOPT_CHECK_CALL(cudaSetDevice(device_));
    mem_->set_limit(options.memory_limit);
    std::vector<NodePlace> place = this->place(graph);
    size_t on_gpu = 0;
    for (size_t n = 0; n < graph.nodes().size(); ++n) on_gpu += place[n] == NodePlace::kDevice;
    // A node the GPU has no kernel for leaves the GPU (copies both ways, and the CUDA graph stops
    // there): one line per op type names those nodes and why (placement.h).
    for (const std::string& line : cpu_fallback_warnings(graph, place)) GPUOPT_LOG(warn, "{}", line);
    GPUOPT_LOG(info, "cuda: {} of {} nodes on the GPU", on_gpu, graph.nodes().size());
    GPUOPT_ASSIGN_OR_RETURN(KernelSettings settings, KernelSettings::or_env(options.kernels));
    const MemoryPlanMode memory_plan = memory_plan_mode(settings, MemoryPlanMode::kPool);
    auto exe = std::make_unique<CudaExecutable>(graph, std::move(place), mem_.get(), device_, options.cuda_graphs,
                                                memory_plan, std::move(settings));
    if (!options.cache_dir.empty() && !options.model_hash.empty()) exe->open_plan_cache(options.cache_dir, options.model_hash);
    GPUOPT_RETURN_IF_ERROR(exe->upload_constants());
    exe->list_cached_shapes();  // captured by Session::load, or later (SessionOptions::defer_graph_capture)
    return std::unique_ptr<Executable>(std::move(exe));
  }

 private:
  int device_;
  std::unique_ptr<DeviceMemory> mem_;
  CudaAllocator alloc_;
};

Result<std::unique_ptr<Backend>> make_cuda_backend(int index) {
  const int count = device_count();
  if (count == 0)
    return Status::Unavailable("cuda:{}: no CUDA device (cudaGetDeviceCount found none or no driver)", index);
  if (index < 0 || index >= count)
    return Status::Unavailable("cuda:{} does not exist: {}", index, cuda_device_count_phrase(count));
  GPUOPT_CHECK_CALL(cudaSetDevice(index));
  GPUOPT_ASSIGN_OR_RETURN(auto mem, DeviceMemory::create(index, 0));
  return std::unique_ptr<Backend>(std::make_unique<CudaBackend>(index, std::move(mem)));
}

struct Register {
  Register() {
    register_backend(DeviceKind::kCuda, "cuda", make_cuda_backend);
    register_placement(DeviceKind::kCuda, [](const Graph& g) {
      StaticPlacement s{cuda_placement(g), {}};
      s.fallbacks = cpu_fallback_warnings(g, s.place);
      return s;
    });
  }
} g_register;

}  // namespace
}  // namespace gpuopt::cuda
