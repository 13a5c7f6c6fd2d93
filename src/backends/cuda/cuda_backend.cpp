// The CUDA backend: places each node on the GPU when a CUDA kernel handles it (cuda_ops.h) and
// on the CPU reference otherwise, copying values across the boundary only when a consumer on
// the other side needs them. Constants are uploaded once at compile time. Each concurrent run
// takes its own ExecContext (stream, handles, workspace), so runs of one session overlap.
#include "backends/backend.h"
#include "backends/cuda/cuda_ops.h"
#include "backends/cuda/device_memory.h"
#include "backends/cuda/elementwise.h"
#include "core/cuda_check.h"
#include "core/log.h"
#include "ir/eval.h"

#include <cublasLt.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <cstring>
#include <map>
#include <mutex>

namespace gpuopt::cuda {

Result<cudnnHandle_t> ExecContext::cudnn() {
  if (!dnn) {
    GPUOPT_CHECK_CALL(cudnnCreate(&dnn));
    GPUOPT_CHECK_CALL(cudnnSetStream(dnn, stream));
  }
  return dnn;
}

namespace {

constexpr size_t kWorkspaceBytes = size_t{64} << 20;

bool have_device(int* count) {
  const cudaError_t e = cudaGetDeviceCount(count);
  cudaGetLastError();
  return e == cudaSuccess && *count > 0;
}

// Host <-> device copies for one context, through a pinned staging buffer that grows as needed.
class Staging {
 public:
  ~Staging() {
    if (buf_) cudaFreeHost(buf_);
  }
  Status upload(const Tensor& host, Tensor* dev, cudaStream_t s) {
    const size_t n = host.nbytes();
    if (!n) return Status::Ok();
    GPUOPT_RETURN_IF_ERROR(reserve(n, s));
    std::memcpy(buf_, host.raw(), n);
    GPUOPT_CHECK_CALL(cudaMemcpyAsync(dev->raw(), buf_, n, cudaMemcpyHostToDevice, s));
    // The staging buffer is reused by the next copy: wait until this one has read it.
    GPUOPT_CHECK_CALL(cudaStreamSynchronize(s));
    return Status::Ok();
  }
  Status download(const Tensor& dev, Tensor* host, cudaStream_t s) {
    const size_t n = dev.nbytes();
    if (!n) return Status::Ok();
    GPUOPT_RETURN_IF_ERROR(reserve(n, s));
    GPUOPT_CHECK_CALL(cudaMemcpyAsync(buf_, dev.raw(), n, cudaMemcpyDeviceToHost, s));
    GPUOPT_CHECK_CALL(cudaStreamSynchronize(s));
    std::memcpy(host->raw(), buf_, n);
    return Status::Ok();
  }

 private:
  Status reserve(size_t n, cudaStream_t s) {
    if (n <= cap_) return Status::Ok();
    if (buf_) {
      GPUOPT_CHECK_CALL(cudaStreamSynchronize(s));
      cudaFreeHost(buf_);
      buf_ = nullptr;
    }
    cap_ = std::max(n, cap_ * 2);
    GPUOPT_CHECK_CALL(cudaHostAlloc(&buf_, cap_, cudaHostAllocDefault));
    return Status::Ok();
  }
  void* buf_ = nullptr;
  size_t cap_ = 0;
};

struct Context {
  ExecContext ec;
  Staging staging;
  ~Context() {
    if (ec.dnn) cudnnDestroy(ec.dnn);
    if (ec.lt) cublasLtDestroy(ec.lt);
    if (ec.workspace) cudaFree(ec.workspace);
    if (ec.stream) cudaStreamDestroy(ec.stream);
  }
};

Result<std::unique_ptr<Context>> make_context(int device, DeviceMemory* mem) {
  auto c = std::make_unique<Context>();
  GPUOPT_CHECK_CALL(cudaSetDevice(device));
  c->ec.device = device;
  c->ec.memory = mem;
  GPUOPT_CHECK_CALL(cudaStreamCreateWithFlags(&c->ec.stream, cudaStreamNonBlocking));
  GPUOPT_CHECK_CALL(cublasLtCreate(&c->ec.lt));
  GPUOPT_CHECK_CALL(cudaMalloc(&c->ec.workspace, kWorkspaceBytes));
  c->ec.workspace_bytes = kWorkspaceBytes;
  return c;
}

class CudaAllocator final : public Allocator {
 public:
  explicit CudaAllocator(DeviceMemory* mem) : mem_(mem) {}
  Device device() const override { return Device{DeviceKind::kCuda, mem_->device()}; }
  Result<Tensor> alloc(DType dtype, const Shape& shape) override {
    GPUOPT_ASSIGN_OR_RETURN(Tensor t, mem_->alloc(dtype, shape, nullptr, "tensor"));
    GPUOPT_CHECK_CALL(cudaStreamSynchronize(nullptr));
    return t;
  }
  Status copy_in(const Tensor& src, Tensor* dst) override {
    GPUOPT_CHECK_CALL(cudaMemcpy(dst->raw(), src.raw(), src.nbytes(), cudaMemcpyHostToDevice));
    return Status::Ok();
  }
  Status copy_out(const Tensor& src, Tensor* dst) override {
    GPUOPT_CHECK_CALL(cudaMemcpy(dst->raw(), src.raw(), src.nbytes(), cudaMemcpyDeviceToHost));
    return Status::Ok();
  }

 private:
  DeviceMemory* mem_;
};

enum class Place : uint8_t { kCpu, kCuda };

class CudaExecutable final : public Executable {
 public:
  CudaExecutable(Graph g, std::vector<Place> place, DeviceMemory* mem, int device)
      : graph_(std::move(g)), place_(std::move(place)), mem_(mem), device_(device) {
    last_use_.assign(graph_.values().size(), -1);
    for (size_t n = 0; n < graph_.nodes().size(); ++n)
      for (ValueId in : graph_.nodes()[n].inputs)
        if (in != kNoValue) last_use_[static_cast<size_t>(in)] = static_cast<int32_t>(n);
    for (ValueId o : graph_.outputs()) last_use_[static_cast<size_t>(o)] = INT32_MAX;
  }

  // Uploads every constant a CUDA node reads on the device.
  Status upload_constants() {
    GPUOPT_ASSIGN_OR_RETURN(auto ctx, make_context(device_, mem_));
    dev_const_.resize(graph_.values().size());
    for (size_t n = 0; n < graph_.nodes().size(); ++n) {
      if (place_[n] != Place::kCuda) continue;
      const Node& node = graph_.nodes()[n];
      const CudaOpEntry* e = cuda_op(node.op);
      for (size_t i = 0; i < node.inputs.size(); ++i) {
        const ValueId v = node.inputs[i];
        if (v == kNoValue || (e->host_inputs >> i) & 1u) continue;
        const Value& val = graph_.value(v);
        if (!val.constant || dev_const_[v].defined() || val.constant->dtype() == DType::String) continue;
        // On the legacy stream: constants outlive every context's stream (freed at destruction).
        GPUOPT_ASSIGN_OR_RETURN(Tensor d, mem_->alloc(val.constant->dtype(), val.constant->shape(), nullptr, val.name));
        GPUOPT_CHECK_CALL(cudaStreamSynchronize(nullptr));
        GPUOPT_RETURN_IF_ERROR(ctx->staging.upload(*val.constant, &d, ctx->ec.stream));
        dev_const_[v] = std::move(d);
      }
    }
    GPUOPT_CHECK_CALL(cudaStreamSynchronize(ctx->ec.stream));
    release(std::move(ctx));
    return Status::Ok();
  }

  Result<std::vector<Tensor>> run(const std::vector<Tensor>& inputs, const RunOptions&) override {
    GPUOPT_ASSIGN_OR_RETURN(std::unique_ptr<Context> ctx, acquire());
    Result<std::vector<Tensor>> r = run_on(*ctx, inputs);
    // Whatever happened, the context must be idle before another run takes it.
    const cudaError_t e = cudaStreamSynchronize(ctx->ec.stream);
    if (e != cudaSuccess && r.ok()) r = GPUOPT_CALL_STATUS(e);
    release(std::move(ctx));
    return r;
  }

 private:
  struct Slot {
    Tensor host;
    Tensor dev;
  };

  Result<std::unique_ptr<Context>> acquire() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!free_.empty()) {
        auto c = std::move(free_.back());
        free_.pop_back();
        return c;
      }
    }
    return make_context(device_, mem_);
  }
  void release(std::unique_ptr<Context> c) {
    std::lock_guard<std::mutex> lock(mu_);
    free_.push_back(std::move(c));
  }

  Status to_device(Context& c, Slot& s, const std::string& name) {
    if (s.dev.defined()) return Status::Ok();
    GPUOPT_ASSIGN_OR_RETURN(s.dev, mem_->alloc(s.host.dtype(), s.host.shape(), c.ec.stream, name));
    return c.staging.upload(s.host, &s.dev, c.ec.stream);
  }
  Status to_host(Context& c, Slot& s) {
    if (s.host.defined()) return Status::Ok();
    s.host = Tensor::empty(s.dev.dtype(), s.dev.shape());
    return c.staging.download(s.dev, &s.host, c.ec.stream);
  }

  Result<std::vector<Tensor>> run_on(Context& c, const std::vector<Tensor>& inputs) {
    GPUOPT_CHECK_CALL(cudaSetDevice(device_));
    std::vector<Slot> slots(graph_.values().size());
    const auto& gin = graph_.inputs();
    for (size_t i = 0; i < gin.size(); ++i) slots[static_cast<size_t>(gin[i])].host = inputs[i];
    for (size_t v = 0; v < slots.size(); ++v) {
      if (graph_.values()[v].constant) slots[v].host = *graph_.values()[v].constant;
      if (v < dev_const_.size() && dev_const_[v].defined()) slots[v].dev = dev_const_[v];
    }
    std::vector<const Tensor*> in_ptrs;
    for (size_t n = 0; n < graph_.nodes().size(); ++n) {
      const Node& node = graph_.nodes()[n];
      if (place_[n] == Place::kCuda) {
        GPUOPT_RETURN_IF_ERROR(run_cuda_node(c, node, slots));
      } else {
        in_ptrs.assign(node.inputs.size(), nullptr);
        for (size_t i = 0; i < node.inputs.size(); ++i) {
          if (node.inputs[i] == kNoValue) continue;
          Slot& s = slots[static_cast<size_t>(node.inputs[i])];
          GPUOPT_RETURN_IF_ERROR(to_host(c, s));
          in_ptrs[i] = &s.host;
        }
        GPUOPT_ASSIGN_OR_RETURN(std::vector<Tensor> outs, eval_node(node, in_ptrs, graph_.opset));
        for (size_t i = 0; i < node.outputs.size() && i < outs.size(); ++i)
          if (node.outputs[i] != kNoValue) slots[static_cast<size_t>(node.outputs[i])].host = std::move(outs[i]);
      }
      for (ValueId in : node.inputs)
        if (in != kNoValue && last_use_[static_cast<size_t>(in)] == static_cast<int32_t>(n)) slots[static_cast<size_t>(in)] = Slot{};
    }
    std::vector<Tensor> result;
    for (ValueId o : graph_.outputs()) {
      Slot& s = slots[static_cast<size_t>(o)];
      GPUOPT_RETURN_IF_ERROR(to_host(c, s));
      result.push_back(s.host);
    }
    return result;
  }

  Status run_cuda_node(Context& c, const Node& node, std::vector<Slot>& slots) {
    const CudaOpEntry* e = cuda_op(node.op);
    const size_t ni = node.inputs.size();
    std::vector<ValueInfo> infos(ni);
    std::vector<const ValueInfo*> info_ptrs(ni, nullptr);
    CudaKernelContext k{node, std::vector<const Tensor*>(ni, nullptr), std::vector<const Tensor*>(ni, nullptr), {}, c.ec,
                        graph_.opset};
    for (size_t i = 0; i < ni; ++i) {
      const ValueId v = node.inputs[i];
      if (v == kNoValue) continue;
      Slot& s = slots[static_cast<size_t>(v)];
      if ((e->host_inputs >> i) & 1u) {
        GPUOPT_RETURN_IF_ERROR(to_host(c, s));
      } else {
        GPUOPT_RETURN_IF_ERROR(to_device(c, s, graph_.value(v).name));
        k.inputs[i] = &s.dev;
      }
      if (s.host.defined()) k.host[i] = &s.host;
      const Tensor& any = s.dev.defined() ? s.dev : s.host;
      infos[i] = ValueInfo{any.dtype(), true, any.shape(), s.host.defined() ? &s.host : nullptr};
      info_ptrs[i] = &infos[i];
    }
    auto inferred = infer_node(node, info_ptrs, graph_.opset);
    bool concrete = inferred.ok();
    if (concrete)
      for (size_t o = 0; o < inferred->size(); ++o)
        if (node.outputs[o] != kNoValue && (!(*inferred)[o].rank_known || !shape_is_concrete((*inferred)[o].shape))) concrete = false;
    if (!concrete) {
      // A data-dependent shape: bring the device-only inputs to the host and infer again.
      for (size_t i = 0; i < ni; ++i) {
        if (node.inputs[i] == kNoValue || infos[i].value) continue;
        Slot& s = slots[static_cast<size_t>(node.inputs[i])];
        GPUOPT_RETURN_IF_ERROR(to_host(c, s));
        k.host[i] = &s.host;
        infos[i].value = &s.host;
      }
      inferred = infer_node(node, info_ptrs, graph_.opset);
      if (!inferred.ok()) return inferred.status();
    }
    std::vector<Tensor> outs(node.outputs.size());
    k.outputs.assign(node.outputs.size(), nullptr);
    for (size_t o = 0; o < node.outputs.size(); ++o) {
      if (node.outputs[o] == kNoValue) continue;
      const ValueInfo& vi = (*inferred)[o];
      if (!e->alias) {
        GPUOPT_ASSIGN_OR_RETURN(outs[o], mem_->alloc(vi.dtype, vi.shape, c.ec.stream, graph_.value(node.outputs[o]).name));
      } else {
        outs[o] = Tensor::wrap(vi.dtype, vi.shape, nullptr);
      }
      k.outputs[o] = &outs[o];
    }
    GPUOPT_RETURN_IF_ERROR(e->run(k));
    for (size_t o = 0; o < node.outputs.size(); ++o)
      if (node.outputs[o] != kNoValue) slots[static_cast<size_t>(node.outputs[o])].dev = std::move(outs[o]);
    return Status::Ok();
  }

  Graph graph_;
  std::vector<Place> place_;
  DeviceMemory* mem_;
  int device_;
  std::vector<int32_t> last_use_;
  std::mutex mu_;
  std::vector<std::unique_ptr<Context>> free_;
  std::vector<Tensor> dev_const_;  // declared last: released before the contexts and their streams
};

class CudaBackend final : public Backend {
 public:
  CudaBackend(int device, std::unique_ptr<DeviceMemory> mem)
      : device_(device), mem_(std::move(mem)), alloc_(mem_.get()) {}
  std::string_view name() const override { return "cuda"; }

  bool supports(const Node& node, const Graph& graph) const override {
    const CudaOpEntry* e = cuda_op(node.op);
    if (!e) return false;
    std::vector<DType> dts;
    for (ValueId v : node.inputs) dts.push_back(v == kNoValue ? DType::Undefined : graph.value(v).info.dtype);
    return !e->supports || e->supports(node, dts);
  }
  Allocator& allocator() override { return alloc_; }

  Result<std::unique_ptr<Executable>> compile(const Graph& graph, const CompileOptions& options) override {
    mem_->set_limit(options.memory_limit);
    std::vector<Place> place(graph.nodes().size());
    size_t on_gpu = 0;
    for (size_t n = 0; n < graph.nodes().size(); ++n) {
      place[n] = supports(graph.nodes()[n], graph) ? Place::kCuda : Place::kCpu;
      on_gpu += place[n] == Place::kCuda;
      if (place[n] == Place::kCpu) GPUOPT_LOG(info, "cuda: {} runs on the CPU backend", node_label(graph.nodes()[n]));
    }
    GPUOPT_LOG(info, "cuda: {} of {} nodes on the GPU", on_gpu, graph.nodes().size());
    auto exe = std::make_unique<CudaExecutable>(graph, std::move(place), mem_.get(), device_);
    GPUOPT_RETURN_IF_ERROR(exe->upload_constants());
    return std::unique_ptr<Executable>(std::move(exe));
  }

 private:
  int device_;
  std::unique_ptr<DeviceMemory> mem_;
  CudaAllocator alloc_;
};

Result<std::unique_ptr<Backend>> make_cuda_backend() {
  int count = 0;
  if (!have_device(&count)) return Status::Unavailable("no CUDA device (cudaGetDeviceCount found none or no driver)");
  GPUOPT_ASSIGN_OR_RETURN(auto mem, DeviceMemory::create(0, 0));
  return std::unique_ptr<Backend>(std::make_unique<CudaBackend>(0, std::move(mem)));
}

struct Register {
  Register() { register_backend("cuda", make_cuda_backend); }
} g_register;

}  // namespace

// ---- op table -----------------------------------------------------------------------------

namespace {
std::array<CudaOpEntry, kNumOps + 1>& op_table() {
  static std::array<CudaOpEntry, kNumOps + 1> t{};
  return t;
}
}  // namespace

const CudaOpEntry* cuda_op(Op op) {
  const CudaOpEntry& e = op_table()[static_cast<size_t>(op)];
  return e.run ? &e : nullptr;
}

CudaOpRegistrar::CudaOpRegistrar(Op op, CudaOpEntry entry) { op_table()[static_cast<size_t>(op)] = entry; }

namespace {
bool is_float(DType t) { return t == DType::F32 || t == DType::F16 || t == DType::BF16; }
bool is_basic(DType t) {
  return is_float(t) || t == DType::I32 || t == DType::I64 || t == DType::I8 || t == DType::U8 || t == DType::Bool ||
         t == DType::F64;
}
}  // namespace

bool float_types(const Node&, const std::vector<DType>& in) {
  for (DType t : in)
    if (t != DType::Undefined && !is_float(t)) return false;
  return true;
}
bool float_or_int_types(const Node&, const std::vector<DType>& in) {
  for (DType t : in)
    if (t != DType::Undefined && !is_basic(t)) return false;
  return true;
}
bool any_types(const Node&, const std::vector<DType>& in) {
  for (DType t : in)
    if (t == DType::String) return false;  // string tensors live on the host only
  return true;
}

}  // namespace gpuopt::cuda
