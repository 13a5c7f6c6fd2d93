// The CUDA backend of one device: places each node on the GPU when a CUDA kernel handles it
// (cuda_ops.h) and on the CPU reference otherwise, copying values across the boundary only when
// a consumer on the other side needs them, and compiles a graph into a CudaExecutable
// (cuda_executable.h). Each backend owns its device's memory pool; `create_backend(cuda:N)`
// makes one for device N, and a device that does not exist is refused naming it.
#include "backends/backend.h"
#include "backends/cuda/cuda_executable.h"
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

  bool supports(const Node& node, const Graph& graph) const override {
    const CudaOpEntry* e = cuda_op(node.op, graph.opset_for(node));
    if (!e) return false;
    std::vector<DType> dts;
    for (ValueId v : node.inputs) dts.push_back(v == kNoValue ? DType::Undefined : graph.value(v).info.dtype);
    if (!e->supports) return true;
    // kernel_shape is optional in ONNX (the weight's shape gives it); the CUDA Conv tells 2-D from
    // the attribute, so a node without it is judged with the weight's spatial dims filled in.
    if (node.op_type == "Conv" && !node.has_attr("kernel_shape") && node.inputs.size() > 1 && node.inputs[1] != kNoValue) {
      const ValueInfo& w = graph.value(node.inputs[1]).info;
      if (w.rank_known && w.shape.size() == 4) {
        Node with = node;
        with.attrs["kernel_shape"].kind = Attribute::Kind::kInts;
        with.attrs["kernel_shape"].ints = {w.shape[2], w.shape[3]};
        return e->supports(with, dts);
      }
    }
    return e->supports(node, dts);
  }

  // Shape arithmetic stays on the host: Shape and Size, and every node whose inputs are all
  // constants or such host values and whose outputs are integers, run on the CPU. Their
  // consumers (Reshape's shape, Slice's starts, ...) read them there without a device round trip
  // and a host wait, and a captured CUDA graph can hold them (they depend on shapes only).
  std::vector<NodePlace> place(const Graph& graph) const override {
    std::vector<bool> on_host(graph.values().size(), false);
    for (size_t v = 0; v < on_host.size(); ++v) on_host[v] = graph.values()[v].constant.has_value();
    std::vector<NodePlace> p;
    p.reserve(graph.nodes().size());
    for (const Node& n : graph.nodes()) {
      bool host = n.op_type == "Shape" || n.op_type == "Size";
      if (!host && !nondeterministic(n.op_type)) {
        bool any_input = false, inputs_on_host = true, int_outputs = true;
        for (ValueId v : n.inputs) {
          if (v == kNoValue) continue;
          any_input = true;
          inputs_on_host = inputs_on_host && on_host[static_cast<size_t>(v)];
        }
        for (ValueId v : n.outputs) {
          if (v == kNoValue) continue;
          const DType t = graph.value(v).info.dtype;
          int_outputs = int_outputs && (t == DType::I64 || t == DType::I32 || t == DType::Bool);
        }
        host = any_input && inputs_on_host && int_outputs;
      }
      if (host) {
        for (ValueId v : n.outputs)
          if (v != kNoValue) on_host[static_cast<size_t>(v)] = true;
        p.push_back(NodePlace::kHostShapes);
      } else {
        p.push_back(supports(n, graph) ? NodePlace::kDevice : NodePlace::kCpuFallback);
      }
    }
    return p;
  }
  Allocator& allocator() override { return alloc_; }

  Result<std::unique_ptr<Executable>> compile(const Graph& graph, const CompileOptions& options) override {
    GPUOPT_CHECK_CALL(cudaSetDevice(device_));
    mem_->set_limit(options.memory_limit);
    std::vector<NodePlace> place = this->place(graph);
    size_t on_gpu = 0;
    for (size_t n = 0; n < graph.nodes().size(); ++n) {
      on_gpu += place[n] == NodePlace::kDevice;
      if (place[n] == NodePlace::kCpuFallback) GPUOPT_LOG(info, "cuda: {} runs on the CPU backend", node_label(graph.nodes()[n]));
    }
    GPUOPT_LOG(info, "cuda: {} of {} nodes on the GPU", on_gpu, graph.nodes().size());
    GPUOPT_ASSIGN_OR_RETURN(MemoryPlanMode memory_plan, memory_plan_mode(MemoryPlanMode::kPool));
    auto exe = std::make_unique<CudaExecutable>(graph, std::move(place), mem_.get(), device_, options.cuda_graphs,
                                                memory_plan);
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
  Register() { register_backend(DeviceKind::kCuda, "cuda", make_cuda_backend); }
} g_register;

}  // namespace
}  // namespace gpuopt::cuda
