// The CUDA executor's contexts, constants and eager node-by-node run (cuda_executable.h).
#include "backends/cuda/cuda_executable.h"

#include "backends/cuda/elementwise.h"
#include "backends/cuda/upload.h"
#include "core/nvtx.h"
#include "core/cuda_check.h"
#include "core/log.h"
#include "ir/eval.h"

#include <cublasLt.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <algorithm>
#include <chrono>
#include <cstring>

namespace gpuopt::cuda {
namespace {
constexpr size_t kWorkspaceBytes = size_t{64} << 20;
}  // namespace

Context::~Context() {
  cudaSetDevice(ec.device);  // the stream, handles and buffers belong to the context's device
  graphs.clear();  // their buffers free on the stream, before it goes
  arenas.clear();  // after the graphs that replay over them
  if (ec.stream) cudaStreamSynchronize(ec.stream);
  if (ec.dnn) cudnnDestroy(ec.dnn);
  if (ec.lt) cublasLtDestroy(ec.lt);
  if (ec.workspace) cudaFree(ec.workspace);
  if (ec.stream) cudaStreamDestroy(ec.stream);
}

Result<std::unique_ptr<Context>> make_context(int device, DeviceMemory* mem) {
  GPUOPT_CHECK_CALL(cudaSetDevice(device));
  auto c = std::make_unique<Context>();
  c->ec.device = device;
  c->ec.memory = mem;
  GPUOPT_CHECK_CALL(cudaStreamCreateWithFlags(&c->ec.stream, cudaStreamNonBlocking));
  GPUOPT_CHECK_CALL(cublasLtCreate(&c->ec.lt));
  GPUOPT_CHECK_CALL(cudaMalloc(&c->ec.workspace, kWorkspaceBytes));
  c->ec.workspace_bytes = kWorkspaceBytes;
  return c;
}

bool nondeterministic(std::string_view op) {
  return op == "RandomNormal" || op == "RandomUniform" || op == "RandomNormalLike" || op == "RandomUniformLike" ||
         op == "Bernoulli" || op == "Multinomial";
}

CudaExecutable::CudaExecutable(Graph g, std::vector<NodePlace> place, DeviceMemory* mem, int device, bool graphs,
                               MemoryPlanMode memory_plan, KernelSettings settings)
    : graph_(std::move(g)),
      place_(std::move(place)),
      mem_(mem),
      device_(device),
      graphs_(graphs),
      memory_plan_(memory_plan),
      settings_(std::move(settings)),
      host_pool_(BufferPool::create(
          [](size_t n) -> void* {
            void* p = nullptr;
            if (cudaHostAlloc(&p, n, cudaHostAllocPortable) != cudaSuccess) {
              cudaGetLastError();
              return nullptr;
            }
            return p;
          },
          [](void* p) { cudaFreeHost(p); }, kHostPoolIdleMax)) {
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

CudaExecutable::~CudaExecutable() {
  // Constants and contexts free on this executable's device, whichever thread drops the session.
  cudaSetDevice(device_);
  lane_.reset();
  dev_const_.clear();
  free_.clear();
}

Status CudaExecutable::upload_constants() {
  GPUOPT_ASSIGN_OR_RETURN(auto ctx, acquire());
  dev_const_.resize(graph_.values().size());
  for (size_t n = 0; n < graph_.nodes().size(); ++n) {
    if (place_[n] != NodePlace::kDevice) continue;
    const Node& node = graph_.nodes()[n];
    const CudaOpEntry* e = cuda_op(node.op, graph_.opset_for(node));
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

void CudaExecutable::open_plan_cache(const std::string& dir, const std::string& model_hash) {
  plan_cache_ = PlanCacheLink::open(dir, model_hash, device_);
  model_hash_ = model_hash;
}

PlanCacheStatus CudaExecutable::plan_cache() const {
  return plan_cache_ ? plan_cache_->status() : PlanCacheStatus{};
}

Result<std::vector<Tensor>> CudaExecutable::run(const std::vector<Tensor>& inputs, const RunOptions& options) {
  GPUOPT_CHECK_CALL(cudaSetDevice(device_));  // this thread may last have run another device's work
  GPUOPT_ASSIGN_OR_RETURN(std::unique_ptr<Context> ctx, acquire());
  Result<std::vector<Tensor>> r = dispatch(*ctx, inputs, options.profile);
  if (options.profile) options.profile->peak_device_bytes = static_cast<int64_t>(mem_->peak());
  // Whatever happened, the context must be idle before another run takes it.
  const cudaError_t e = cudaStreamSynchronize(ctx->ec.stream);
  if (e != cudaSuccess && r.ok()) r = GPUOPT_CALL_STATUS(e);
  release(std::move(ctx));
  if (plan_cache_ && r.ok()) plan_cache_->save_if_changed();  // a shape's first run chose its plans
  return r;
}

Result<std::unique_ptr<Context>> CudaExecutable::acquire() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!free_.empty()) {
      auto c = std::move(free_.back());
      free_.pop_back();
      return c;
    }
  }
  GPUOPT_ASSIGN_OR_RETURN(std::unique_ptr<Context> c, make_context(device_, mem_));
  c->ec.settings = &settings_;  // the executable outlives its contexts
  return c;
}

void CudaExecutable::release(std::unique_ptr<Context> c) {
  std::lock_guard<std::mutex> lock(mu_);
  free_.push_back(std::move(c));
}

Status CudaExecutable::to_device(Context& c, Slot& s, const std::string& name) {
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

Status CudaExecutable::to_host(Context& c, Slot& s) {
  if (s.host.defined()) return Status::Ok();
  s.host = Tensor::empty(s.dev.dtype(), s.dev.shape());
  return c.staging.download(s.dev, &s.host, c.ec.stream);
}

std::vector<CudaExecutable::Slot> CudaExecutable::init_slots() const {
  std::vector<Slot> slots(graph_.values().size());
  for (size_t v = 0; v < slots.size(); ++v) {
    if (graph_.values()[v].constant) slots[v].host = *graph_.values()[v].constant;
    if (v < dev_const_.size() && dev_const_[v].defined()) slots[v].dev = dev_const_[v];
  }
  return slots;
}

Result<std::vector<Tensor>> CudaExecutable::run_eager(Context& c, const std::vector<Tensor>& inputs, RunProfile* prof) {
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

Status CudaExecutable::run_nodes(Context& c, std::vector<Slot>& slots, RunProfile* prof, size_t* failed) {
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

Status CudaExecutable::run_cpu_node(Context& c, const Node& node, std::vector<Slot>& slots, std::vector<const Tensor*>& in_ptrs) {
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
  GPUOPT_ASSIGN_OR_RETURN(std::vector<Tensor> outs, eval_node(node, in_ptrs, graph_.opset_for(node)));
  for (size_t i = 0; i < node.outputs.size() && i < outs.size(); ++i)
    if (node.outputs[i] != kNoValue) slots[static_cast<size_t>(node.outputs[i])].host = std::move(outs[i]);
  return Status::Ok();
}

Status CudaExecutable::run_cuda_node(Context& c, const Node& node, std::vector<Slot>& slots) {
  const CudaOpEntry* e = cuda_op(node.op, graph_.opset_for(node));
  const size_t ni = node.inputs.size();
  std::vector<ValueInfo> infos(ni);
  std::vector<const ValueInfo*> info_ptrs(ni, nullptr);
  CudaKernelContext k{node, std::vector<const Tensor*>(ni, nullptr), std::vector<const Tensor*>(ni, nullptr), {}, c.ec};
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
  auto inferred = infer_node(node, info_ptrs, graph_.opset_for(node));
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
    inferred = infer_node(node, info_ptrs, graph_.opset_for(node));
    if (!inferred.ok()) return inferred.status();
  }
  std::vector<Tensor> outs(node.outputs.size());
  k.outputs.assign(node.outputs.size(), nullptr);
  for (size_t o = 0; o < node.outputs.size(); ++o) {
    if (node.outputs[o] == kNoValue) continue;
    const ValueInfo& vi = (*inferred)[o];
    if (!e->alias) {
      GPUOPT_ASSIGN_OR_RETURN(outs[o], alloc_output(c, node.outputs[o], vi));
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

Result<Tensor> CudaExecutable::alloc_output(Context& c, ValueId v, const ValueInfo& vi) {
  if (c.arena && vi.dtype != DType::String) {
    const MemoryPlan& plan = c.arena->plan;
    const int64_t n = shape_numel(vi.shape);
    // Larger than planned (a shape that depends on data): allocated on its own below.
    if (plan.in_arena(v) && n >= 0 && static_cast<size_t>(n) * dtype_size(vi.dtype) <= plan.capacity(v))
      return Tensor::wrap(vi.dtype, vi.shape, c.arena->arena.storage(),
                          c.arena->arena.offset() + static_cast<size_t>(plan.offset[static_cast<size_t>(v)]));
  }
  return mem_->alloc(vi.dtype, vi.shape, c.ec.stream, graph_.value(v).name);
}

Result<ShapeArena*> CudaExecutable::arena_for(Context& c, const std::vector<Tensor>& inputs) {
  std::vector<std::pair<DType, Shape>> key;
  for (const Tensor& t : inputs) key.emplace_back(t.dtype(), t.shape());
  for (auto& a : c.arenas)
    if (a->key == key) {
      a->last_used = ++c.tick;
      return a.get();
    }
  if (c.arenas.size() >= kMaxGraphsPerContext) {
    auto lru = std::min_element(c.arenas.begin(), c.arenas.end(),
                                [](const auto& a, const auto& b) { return a->last_used < b->last_used; });
    // A captured graph of that shape replays over this arena: it goes first.
    for (auto g = c.graphs.begin(); g != c.graphs.end(); ++g)
      if ((*g)->key == (*lru)->key) {
        c.graphs.erase(g);
        break;
      }
    c.arenas.erase(lru);
  }
  auto a = std::make_unique<ShapeArena>();
  MemoryPlanOptions o;
  o.alias = [this](const Node& n, size_t i) { return place_[i] == NodePlace::kDevice && cuda_op(n.op, graph_.opset_for(n))->alias; };
  o.plannable = [this](const Node& n, size_t i) { return place_[i] == NodePlace::kDevice && !cuda_op(n.op, graph_.opset_for(n))->alias; };
  a->plan = plan_memory(graph_, value_bytes_for_inputs(graph_, key), o);
  if (a->plan.arena_bytes) {
    GPUOPT_ASSIGN_OR_RETURN(a->arena, mem_->alloc(DType::U8, {static_cast<int64_t>(a->plan.arena_bytes)}, c.ec.stream,
                                                  "the memory plan's arena"));
    GPUOPT_LOG(debug, "cuda: memory plan for this input shape: {} arena bytes for {} bytes of activations",
               a->plan.arena_bytes, a->plan.naive_bytes);
  }
  a->key = std::move(key);
  a->last_used = ++c.tick;
  c.arenas.push_back(std::move(a));
  return c.arenas.back().get();
}

}  // namespace gpuopt::cuda
