// The CUDA backend: places each node on the GPU when a CUDA kernel handles it (cuda_ops.h) and
// on the CPU reference otherwise, copying values across the boundary only when a consumer on
// the other side needs them. Constants are uploaded once at compile time. Each concurrent run
// takes its own ExecContext (stream, handles, workspace), so runs of one session overlap.
#include "backends/backend.h"
#include "backends/cuda/cuda_ops.h"
#include "backends/cuda/device_memory.h"
#include "backends/cuda/elementwise.h"
#include "backends/cuda/staging.h"
#include "backends/cuda/upload.h"
#include "core/cuda_check.h"
#include "core/log.h"
#include "core/nvtx.h"
#include "ir/eval.h"

#include <cublasLt.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <algorithm>
#include <chrono>
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

// One captured CUDA graph: the run for one set of input shapes, replayed on later runs with the
// same shapes. Its inputs and outputs live in buffers it owns; intermediates are the graph's own
// (allocated and freed inside it).
struct GraphEntry {
  enum class State { kWarm, kReady, kRefused };
  std::vector<std::pair<DType, Shape>> key;      // the inputs' dtypes and shapes
  State state = State::kWarm;                    // kWarm: one eager run seen, capture on the next
  std::string refused;                           // why this shape runs eager (kRefused)
  std::vector<std::pair<DType, Shape>> out_sig;  // the outputs, from the eager run
  std::vector<Tensor> in_bufs, out_bufs;
  PinnedUploads uploads;                         // shape-derived host values the graph copies up
  cudaGraphExec_t exec = nullptr;
  uint64_t last_used = 0;
  GraphEntry() = default;
  GraphEntry(const GraphEntry&) = delete;
  GraphEntry& operator=(const GraphEntry&) = delete;
  ~GraphEntry() {
    if (exec) cudaGraphExecDestroy(exec);
  }
};

// A context keeps a few graphs (one per input shape seen most recently): a server with dynamic
// batching sees a handful of batch sizes; beyond that the least recently used one goes.
constexpr size_t kMaxGraphsPerContext = 16;

struct Context {
  ExecContext ec;
  Staging staging;
  std::vector<std::unique_ptr<GraphEntry>> graphs;
  GraphEntry* capturing = nullptr;  // the graph being recorded, during capture()
  uint64_t tick = 0;
  ~Context() {
    graphs.clear();  // their buffers free on the stream, before it goes
    if (ec.stream) cudaStreamSynchronize(ec.stream);
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

// Ops whose result changes from run to run with the same inputs: a graph would freeze one draw.
bool nondeterministic(std::string_view op) {
  return op == "RandomNormal" || op == "RandomUniform" || op == "RandomNormalLike" || op == "RandomUniformLike" ||
         op == "Bernoulli" || op == "Multinomial";
}

class CudaExecutable final : public Executable {
 public:
  CudaExecutable(Graph g, std::vector<NodePlace> place, DeviceMemory* mem, int device, bool graphs)
      : graph_(std::move(g)), place_(std::move(place)), mem_(mem), device_(device), graphs_(graphs) {
    last_use_.assign(graph_.values().size(), -1);
    for (size_t n = 0; n < graph_.nodes().size(); ++n)
      for (ValueId in : graph_.nodes()[n].inputs)
        if (in != kNoValue) last_use_[static_cast<size_t>(in)] = static_cast<int32_t>(n);
    for (ValueId o : graph_.outputs()) last_use_[static_cast<size_t>(o)] = INT32_MAX;
    for (ValueId in : graph_.inputs()) {
      bool dev = false;
      for (size_t n = 0; n < graph_.nodes().size(); ++n)
        if (place_[n] == NodePlace::kDevice)
          for (ValueId v : graph_.nodes()[n].inputs) dev = dev || v == in;
      input_on_device_.push_back(dev);
    }
    for (const Node& n : graph_.nodes())
      if (graphs_ && nondeterministic(n.op_type)) {
        GPUOPT_LOG(info, "cuda: CUDA graphs off for this model: {} draws new values on every run", node_label(n));
        graphs_ = false;
      }
  }

  // Uploads every constant a CUDA node reads on the device.
  Status upload_constants() {
    GPUOPT_ASSIGN_OR_RETURN(auto ctx, make_context(device_, mem_));
    dev_const_.resize(graph_.values().size());
    for (size_t n = 0; n < graph_.nodes().size(); ++n) {
      if (place_[n] != NodePlace::kDevice) continue;
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

  Result<std::vector<Tensor>> run(const std::vector<Tensor>& inputs, const RunOptions& options) override {
    GPUOPT_ASSIGN_OR_RETURN(std::unique_ptr<Context> ctx, acquire());
    GPUOPT_CHECK_CALL(cudaSetDevice(device_));
    Result<std::vector<Tensor>> r = dispatch(*ctx, inputs, options.profile);
    if (options.profile) options.profile->peak_device_bytes = static_cast<int64_t>(mem_->peak());
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

  // Eager the first time a context sees an input shape, captured as a CUDA graph the second
  // time (the first run has chosen the cuDNN/cuBLASLt algorithms and warmed the pool), replayed
  // from then on. A shape whose run cannot be captured (a node on the CPU reading device data,
  // a data-dependent shape, a host wait inside a kernel) is remembered and runs eager.
  Result<std::vector<Tensor>> dispatch(Context& c, const std::vector<Tensor>& inputs, RunProfile* prof) {
    auto mode = [&](const char* m, const std::string& note = {}) {
      if (prof) {
        prof->mode = m;
        prof->graph_note = note;
      }
    };
    if (!graphs_ || (prof && prof->per_node)) {
      mode("eager", graphs_ ? "per-node profiling runs eager" : "CUDA graphs are off");
      return run_eager(c, inputs, prof);
    }
    GraphEntry* g = find_graph(c, inputs);
    if (!g) {
      mode("eager", "first run of this input shape (capture on the next)");
      GPUOPT_ASSIGN_OR_RETURN(std::vector<Tensor> outs, run_eager(c, inputs, prof));
      add_graph(c, inputs, outs);
      return outs;
    }
    g->last_used = ++c.tick;
    if (g->state == GraphEntry::State::kRefused) {
      mode("eager", g->refused);
      return run_eager(c, inputs, prof);
    }
    if (g->state == GraphEntry::State::kWarm) {
      if (Status st = capture(c, *g, inputs); !st.ok()) {
        g->state = GraphEntry::State::kRefused;
        g->refused = st.message();
        g->in_bufs.clear();  // whichever step failed, a refused shape holds no buffers
        g->out_bufs.clear();
        g->uploads.clear();
        GPUOPT_LOG(info, "cuda: this input shape runs eager, not as a CUDA graph: {}", g->refused);
        mode("eager", g->refused);
        return run_eager(c, inputs, prof);
      }
      g->state = GraphEntry::State::kReady;
      mode("capture");
      return replay(c, *g, inputs, /*uploaded=*/true, prof);
    }
    mode("graph");
    return replay(c, *g, inputs, /*uploaded=*/false, prof);
  }

  static std::vector<std::pair<DType, Shape>> signature(const std::vector<Tensor>& ts) {
    std::vector<std::pair<DType, Shape>> s;
    s.reserve(ts.size());
    for (const Tensor& t : ts) s.emplace_back(t.dtype(), t.shape());
    return s;
  }
  GraphEntry* find_graph(Context& c, const std::vector<Tensor>& inputs) {
    for (auto& g : c.graphs) {
      if (g->key.size() != inputs.size()) continue;
      bool same = true;
      for (size_t i = 0; i < inputs.size() && same; ++i)
        same = g->key[i].first == inputs[i].dtype() && g->key[i].second == inputs[i].shape();
      if (same) return g.get();
    }
    return nullptr;
  }
  void add_graph(Context& c, const std::vector<Tensor>& inputs, const std::vector<Tensor>& outs) {
    if (c.graphs.size() >= kMaxGraphsPerContext) {
      auto lru = std::min_element(c.graphs.begin(), c.graphs.end(),
                                  [](const auto& a, const auto& b) { return a->last_used < b->last_used; });
      c.graphs.erase(lru);
    }
    auto g = std::make_unique<GraphEntry>();
    g->key = signature(inputs);
    g->out_sig = signature(outs);
    g->last_used = ++c.tick;
    c.graphs.push_back(std::move(g));
  }

  // Records one run into g.exec. Inputs are uploaded into g's buffers first (outside the
  // capture); graph inputs have no host copy inside it, so a node that would read input data on
  // the host needs a download, whose host wait ends the capture: such runs are refused rather
  // than frozen with this run's values.
  Status capture(Context& c, GraphEntry& g, const std::vector<Tensor>& inputs) {
    const auto& gin = graph_.inputs();
    for (size_t i = 0; i < gin.size(); ++i) {
      GPUOPT_ASSIGN_OR_RETURN(Tensor b, mem_->alloc(inputs[i].dtype(), inputs[i].shape(), c.ec.stream, graph_.value(gin[i]).name));
      g.in_bufs.push_back(std::move(b));
    }
    for (size_t o = 0; o < g.out_sig.size(); ++o) {
      GPUOPT_ASSIGN_OR_RETURN(Tensor b, mem_->alloc(g.out_sig[o].first, g.out_sig[o].second, c.ec.stream,
                                                    graph_.value(graph_.outputs()[o]).name));
      g.out_bufs.push_back(std::move(b));
    }
    for (size_t i = 0; i < gin.size(); ++i) GPUOPT_RETURN_IF_ERROR(c.staging.upload(inputs[i], &g.in_bufs[i], c.ec.stream));

    GPUOPT_CHECK_CALL(cudaStreamBeginCapture(c.ec.stream, cudaStreamCaptureModeThreadLocal));
    c.capturing = &g;
    Status st = Status::Ok();
    {
      std::vector<Slot> slots = init_slots();
      for (size_t i = 0; i < gin.size(); ++i) slots[static_cast<size_t>(gin[i])].dev = g.in_bufs[i];
      size_t failed = 0;
      st = run_nodes(c, slots, nullptr, &failed);
      if (!st.ok()) st = Status(st.code(), fmt::format("capture stopped at {}: {}", node_label(graph_.nodes()[failed]), st.message()));
      for (size_t o = 0; st.ok() && o < graph_.outputs().size(); ++o) {
        const Slot& s = slots[static_cast<size_t>(graph_.outputs()[o])];
        if (!s.dev.defined()) {
          st = Status::Unimplemented("output '{}' is computed on the host", graph_.value(graph_.outputs()[o]).name);
        } else if (s.dev.dtype() != g.out_bufs[o].dtype() || s.dev.shape() != g.out_bufs[o].shape()) {
          st = Status::Unimplemented("output '{}' changed shape between runs of one input shape",
                                     graph_.value(graph_.outputs()[o]).name);
        } else if (const cudaError_t e = cudaMemcpyAsync(g.out_bufs[o].raw(), s.dev.raw(), s.dev.nbytes(),
                                                         cudaMemcpyDeviceToDevice, c.ec.stream);
                   e != cudaSuccess) {
          st = GPUOPT_CALL_STATUS(e);
        }
      }
      // Every intermediate is released here, inside the capture: its free belongs to the graph.
    }
    c.capturing = nullptr;
    cudaGraph_t graph = nullptr;
    const cudaError_t end = cudaStreamEndCapture(c.ec.stream, &graph);
    cudaGetLastError();
    if (st.ok() && end != cudaSuccess) st = GPUOPT_CALL_STATUS(end);
    if (st.ok()) {
      const cudaError_t inst = cudaGraphInstantiate(&g.exec, graph, 0);
      cudaGetLastError();
      if (inst != cudaSuccess) {
        g.exec = nullptr;
        st = GPUOPT_CALL_STATUS(inst).with_context("instantiating the CUDA graph");
      }
    }
    if (graph) cudaGraphDestroy(graph);
    return st;
  }

  Result<std::vector<Tensor>> replay(Context& c, GraphEntry& g, const std::vector<Tensor>& inputs, bool uploaded,
                                     RunProfile* prof) {
    if (!uploaded)
      for (size_t i = 0; i < inputs.size(); ++i)
        GPUOPT_RETURN_IF_ERROR(c.staging.upload(inputs[i], &g.in_bufs[i], c.ec.stream));
    DeviceSpan span(c.ec.stream, prof);
    GPUOPT_CHECK_CALL(cudaGraphLaunch(g.exec, c.ec.stream));
    GPUOPT_RETURN_IF_ERROR(span.stop());
    std::vector<Tensor> result;
    for (const Tensor& b : g.out_bufs) {
      Tensor h = Tensor::empty(b.dtype(), b.shape());
      GPUOPT_RETURN_IF_ERROR(c.staging.download(b, &h, c.ec.stream));
      result.push_back(std::move(h));
    }
    return result;
  }

  // Device time of the compute alone (inputs already on the GPU, outputs not yet copied back):
  // what PyTorch's CUDA-event timings measure. Filled into RunProfile::device_us.
  class DeviceSpan {
   public:
    DeviceSpan(cudaStream_t s, RunProfile* prof) : s_(s), prof_(prof) {
      if (!prof_) return;
      cudaEventCreate(&a_);
      cudaEventCreate(&b_);
      cudaEventRecord(a_, s_);
    }
    Status stop() {
      if (!prof_ || !a_ || !b_) return Status::Ok();
      GPUOPT_CHECK_CALL(cudaEventRecord(b_, s_));
      GPUOPT_CHECK_CALL(cudaEventSynchronize(b_));
      float ms = 0;
      GPUOPT_CHECK_CALL(cudaEventElapsedTime(&ms, a_, b_));
      prof_->device_us = ms * 1e3;
      return Status::Ok();
    }
    ~DeviceSpan() {
      if (a_) cudaEventDestroy(a_);
      if (b_) cudaEventDestroy(b_);
    }

   private:
    cudaStream_t s_;
    RunProfile* prof_;
    cudaEvent_t a_ = nullptr, b_ = nullptr;
  };

  Status to_device(Context& c, Slot& s, const std::string& name) {
    if (s.dev.defined()) return Status::Ok();
    GPUOPT_ASSIGN_OR_RETURN(s.dev, mem_->alloc(s.host.dtype(), s.host.shape(), c.ec.stream, name));
    // Small values (shape arithmetic, per-call parameters) go without a host wait.
    if (s.host.nbytes() <= kInlineUploadMax) return upload_inline(s.host.raw(), s.dev.raw(), s.host.nbytes(), c.ec.stream);
    // Inside a capture every host value is shape-derived (a node reading device data on the host
    // refuses the capture), so the graph may copy it from a pinned buffer of its own on each
    // replay: no host wait, and the run stays one graph (BERT's token-type ids at batch 256).
    if (c.capturing) return c.capturing->uploads.upload(s.host, &s.dev, c.ec.stream);
    return c.staging.upload(s.host, &s.dev, c.ec.stream);
  }
  Status to_host(Context& c, Slot& s) {
    if (s.host.defined()) return Status::Ok();
    s.host = Tensor::empty(s.dev.dtype(), s.dev.shape());
    return c.staging.download(s.dev, &s.host, c.ec.stream);
  }

  std::vector<Slot> init_slots() const {
    std::vector<Slot> slots(graph_.values().size());
    for (size_t v = 0; v < slots.size(); ++v) {
      if (graph_.values()[v].constant) slots[v].host = *graph_.values()[v].constant;
      if (v < dev_const_.size() && dev_const_[v].defined()) slots[v].dev = dev_const_[v];
    }
    return slots;
  }

  Result<std::vector<Tensor>> run_eager(Context& c, const std::vector<Tensor>& inputs, RunProfile* prof) {
    std::vector<Slot> slots = init_slots();
    const auto& gin = graph_.inputs();
    for (size_t i = 0; i < gin.size(); ++i) {
      Slot& s = slots[static_cast<size_t>(gin[i])];
      s.host = inputs[i];
      // Inputs a GPU node reads go up first, so the device span below is the compute alone.
      if (prof && input_on_device_[i]) GPUOPT_RETURN_IF_ERROR(to_device(c, s, graph_.value(gin[i]).name));
    }
    DeviceSpan span(c.ec.stream, prof && !prof->per_node ? prof : nullptr);
    GPUOPT_RETURN_IF_ERROR(run_nodes(c, slots, prof && prof->per_node ? prof : nullptr));
    GPUOPT_RETURN_IF_ERROR(span.stop());
    std::vector<Tensor> result;
    for (ValueId o : graph_.outputs()) {
      Slot& s = slots[static_cast<size_t>(o)];
      GPUOPT_RETURN_IF_ERROR(to_host(c, s));
      result.push_back(s.host);
    }
    return result;
  }

  // Every node in order; `prof` (per-node profiling) times each with events and a host wait.
  Status run_nodes(Context& c, std::vector<Slot>& slots, RunProfile* prof, size_t* failed = nullptr) {
    using clock = std::chrono::steady_clock;
    cudaEvent_t ev[3] = {nullptr, nullptr, nullptr};
    if (prof) {  // ev[2]: the trace's origin on the device, just before the first node
      for (auto& e : ev) GPUOPT_CHECK_CALL(cudaEventCreate(&e));
      cudaEventRecord(ev[2], c.ec.stream);
    }
    Status st = Status::Ok();
    std::vector<const Tensor*> in_ptrs;
    for (size_t n = 0; n < graph_.nodes().size() && st.ok(); ++n) {
      const Node& node = graph_.nodes()[n];
      const auto t0 = clock::now();
      if (prof) cudaEventRecord(ev[0], c.ec.stream);
      {
        NvtxRange range(node.name);
        st = place_[n] == NodePlace::kDevice ? run_cuda_node(c, node, slots) : run_cpu_node(c, node, slots, in_ptrs);
      }
      if (!st.ok() && failed) *failed = n;
      if (prof && st.ok()) {
        cudaEventRecord(ev[1], c.ec.stream);
        if (const cudaError_t e = cudaEventSynchronize(ev[1]); e != cudaSuccess) st = GPUOPT_CALL_STATUS(e);
        float gpu_ms = 0;
        if (place_[n] == NodePlace::kDevice) cudaEventElapsedTime(&gpu_ms, ev[0], ev[1]);
        float origin_ms = 0;  // the node's start on the device, after the first node's
        if (place_[n] == NodePlace::kDevice) cudaEventElapsedTime(&origin_ms, ev[2], ev[0]);
        prof->nodes.push_back({node.name, node.op_type, place_[n] == NodePlace::kDevice ? "cuda" : "cpu",
                               std::chrono::duration<double, std::micro>(clock::now() - t0).count(), gpu_ms * 1e3,
                               std::chrono::duration<double, std::micro>(t0.time_since_epoch()).count(),
                               place_[n] == NodePlace::kDevice ? origin_ms * 1e3 : -1.0});
      }
      for (ValueId in : node.inputs)
        if (in != kNoValue && last_use_[static_cast<size_t>(in)] == static_cast<int32_t>(n)) slots[static_cast<size_t>(in)] = Slot{};
    }
    for (auto& e : ev)
      if (e) cudaEventDestroy(e);
    return st;
  }

  Status run_cpu_node(Context& c, const Node& node, std::vector<Slot>& slots, std::vector<const Tensor*>& in_ptrs) {
    // Shape and Size read only the input's shape: a device tensor serves as it is, no download.
    const bool shape_only = node.op_type == "Shape" || node.op_type == "Size";
    in_ptrs.assign(node.inputs.size(), nullptr);
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      if (node.inputs[i] == kNoValue) continue;
      Slot& s = slots[static_cast<size_t>(node.inputs[i])];
      if (shape_only && !s.host.defined()) {
        in_ptrs[i] = &s.dev;
        continue;
      }
      GPUOPT_RETURN_IF_ERROR(to_host(c, s));
      in_ptrs[i] = &s.host;
    }
    GPUOPT_ASSIGN_OR_RETURN(std::vector<Tensor> outs, eval_node(node, in_ptrs, graph_.opset));
    for (size_t i = 0; i < node.outputs.size() && i < outs.size(); ++i)
      if (node.outputs[i] != kNoValue) slots[static_cast<size_t>(node.outputs[i])].host = std::move(outs[i]);
    return Status::Ok();
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
  std::vector<NodePlace> place_;
  DeviceMemory* mem_;
  int device_;
  bool graphs_;
  std::vector<int32_t> last_use_;
  std::vector<bool> input_on_device_;  // per graph input: read by a node on the GPU
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
    mem_->set_limit(options.memory_limit);
    std::vector<NodePlace> place = this->place(graph);
    size_t on_gpu = 0;
    for (size_t n = 0; n < graph.nodes().size(); ++n) {
      on_gpu += place[n] == NodePlace::kDevice;
      if (place[n] == NodePlace::kCpuFallback) GPUOPT_LOG(info, "cuda: {} runs on the CPU backend", node_label(graph.nodes()[n]));
    }
    GPUOPT_LOG(info, "cuda: {} of {} nodes on the GPU", on_gpu, graph.nodes().size());
    auto exe = std::make_unique<CudaExecutable>(graph, std::move(place), mem_.get(), device_, options.cuda_graphs);
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
