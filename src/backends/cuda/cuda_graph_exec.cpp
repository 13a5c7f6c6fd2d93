// Capture of one input shape's run as a CUDA graph and its replay (cuda_executable.h).
#include "backends/cuda/cuda_executable.h"

#include "core/cuda_check.h"
#include "core/log.h"
#include "backends/captured_shapes.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstring>

namespace gpuopt::cuda {
namespace {

std::vector<std::pair<DType, Shape>> signature(const std::vector<Tensor>& ts) {
  std::vector<std::pair<DType, Shape>> s;
  s.reserve(ts.size());
  for (const Tensor& t : ts) s.emplace_back(t.dtype(), t.shape());
  return s;
}

}  // namespace

GraphEntry::~GraphEntry() {
  if (exec) cudaGraphExecDestroy(exec);
}

DeviceSpan::DeviceSpan(cudaStream_t s, RunProfile* prof) : s_(s), prof_(prof) {
  if (!prof_) return;
  cudaEventCreate(&a_);
  cudaEventCreate(&b_);
  cudaEventRecord(a_, s_);
}

Status DeviceSpan::stop() {
  if (!prof_ || !a_ || !b_) return Status::Ok();
  GPUOPT_CHECK_CALL(cudaEventRecord(b_, s_));
  GPUOPT_CHECK_CALL(cudaEventSynchronize(b_));
  float ms = 0;
  GPUOPT_CHECK_CALL(cudaEventElapsedTime(&ms, a_, b_));
  prof_->device_us = ms * 1e3;
  return Status::Ok();
}

DeviceSpan::~DeviceSpan() {
  if (a_) cudaEventDestroy(a_);
  if (b_) cudaEventDestroy(b_);
}

// Eager the first time a context sees an input shape, captured as a CUDA graph the second
// time (the first run has chosen the cuDNN/cuBLASLt algorithms and warmed the pool), replayed
// from then on. A shape whose run cannot be captured (a node on the CPU reading device data,
// a data-dependent shape, a host wait inside a kernel) is remembered and runs eager.
Result<std::vector<Tensor>> CudaExecutable::dispatch(Context& c, const std::vector<Tensor>& inputs, RunProfile* prof) {
  c.arena = nullptr;
  if (memory_plan_ == MemoryPlanMode::kStatic) {
    // Planned and allocated here, outside any capture: a graph replays over these addresses.
    GPUOPT_ASSIGN_OR_RETURN(c.arena, arena_for(c, inputs));
  }
  struct Unset {
    Context& c;
    ~Unset() { c.arena = nullptr; }
  } unset{c};
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
    // Listed in the plan cache (saved after this run): a warm start captures it before `ready`.
    if (plan_cache_) PlanStore::of(device_).put(captured_shape_key(model_hash_, g->key), std::string(kCapturedValue));
    mode("capture");
    return replay(c, *g, inputs, /*uploaded=*/true, prof);
  }
  mode("graph");
  return replay(c, *g, inputs, /*uploaded=*/false, prof);
}

GraphEntry* CudaExecutable::find_graph(Context& c, const std::vector<Tensor>& inputs) {
  for (auto& g : c.graphs) {
    if (g->key.size() != inputs.size()) continue;
    bool same = true;
    for (size_t i = 0; i < inputs.size() && same; ++i)
      same = g->key[i].first == inputs[i].dtype() && g->key[i].second == inputs[i].shape();
    if (same) return g.get();
  }
  return nullptr;
}

void CudaExecutable::add_graph(Context& c, const std::vector<Tensor>& inputs, const std::vector<Tensor>& outs) {
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
Status CudaExecutable::capture(Context& c, GraphEntry& g, const std::vector<Tensor>& inputs) {
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

void CudaExecutable::list_cached_shapes() {
  if (!plan_cache_ || !graphs_) return;
  ShapeSignature declared;
  for (ValueId v : graph_.inputs()) {
    const ValueInfo& vi = graph_.value(v).info;
    Shape s = vi.shape;
    for (auto& d : s) d = d < 0 ? -1 : d;
    declared.emplace_back(vi.dtype, std::move(s));
  }
  std::vector<std::string> skipped;
  cached_shapes_ = captured_shapes(PlanStore::of(device_).snapshot(), model_hash_, declared, &skipped);
  for (const std::string& s : skipped) GPUOPT_LOG(warn, "plan cache: ignoring a captured-shape entry: {}", s);
  if (cached_shapes_.size() > kMaxGraphsPerContext) cached_shapes_.resize(kMaxGraphsPerContext);
}

bool CudaExecutable::capture_next_cached_shape() {
  if (next_cached_ >= cached_shapes_.size()) return false;
  const auto t0 = std::chrono::steady_clock::now();
  const ShapeSignature& sig = cached_shapes_[next_cached_++];
  std::vector<Tensor> zeros;
  for (const auto& [dt, shape] : sig) {
    Result<Tensor> t = Tensor::try_empty(dt, shape, "a cached shape's input");
    if (!t.ok()) break;
    if (dt != DType::String) std::memset(t->raw(), 0, t->nbytes());
    zeros.push_back(std::move(t).value());
  }
  Status st = zeros.size() == sig.size() ? Status::Ok() : Status::OutOfMemory("no host memory for its inputs");
  RunProfile prof;
  for (int i = 0; i < 2 && st.ok(); ++i) {  // eager (plans from the cache), then captured
    RunOptions ro;
    ro.profile = &prof;
    st = run(zeros, ro).status();
  }
  if (st.ok() && prof.mode != "capture") st = Status::Unimplemented("{}", prof.graph_note);
  if (!st.ok())
    GPUOPT_LOG(warn, "plan cache: input shapes {} not captured: {}", signature_text(sig), st.message());
  else
    ++cached_done_;
  cached_ms_ += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (next_cached_ == cached_shapes_.size())
    GPUOPT_LOG(info, "plan cache: {} of {} cached input shapes captured as CUDA graphs ({:.0f} ms)", cached_done_,
               cached_shapes_.size(), cached_ms_);
  return true;
}

Result<std::vector<Tensor>> CudaExecutable::replay(Context& c, GraphEntry& g, const std::vector<Tensor>& inputs, bool uploaded,
                                   RunProfile* prof) {
  if (!uploaded)
    for (size_t i = 0; i < inputs.size(); ++i)
      GPUOPT_RETURN_IF_ERROR(c.staging.upload(inputs[i], &g.in_bufs[i], c.ec.stream));
  DeviceSpan span(c.ec.stream, prof);
  GPUOPT_CHECK_CALL(cudaGraphLaunch(g.exec, c.ec.stream));
  GPUOPT_RETURN_IF_ERROR(span.stop());
  // Straight into page-locked buffers of the pool, which the caller gets as they are: no copy
  // into fresh pageable memory after the download. Where no more page-locked memory can be had,
  // through the staging buffer into pageable memory as before.
  std::vector<Tensor> result;
  std::vector<const Tensor*> staged;  // outputs that got no pooled buffer: result[i] to fill
  cudaError_t err = cudaSuccess;
  for (const Tensor& b : g.out_bufs) {
    Result<std::shared_ptr<Storage>> st = host_pool_->acquire(b.nbytes());
    if (!st.ok()) {
      staged.push_back(&b);
      result.push_back(Tensor::empty(b.dtype(), b.shape()));
      continue;
    }
    staged.push_back(nullptr);
    if (b.nbytes() && err == cudaSuccess)
      err = cudaMemcpyAsync((*st)->data, b.raw(), b.nbytes(), cudaMemcpyDeviceToHost, c.ec.stream);
    result.push_back(Tensor::wrap(b.dtype(), b.shape(), std::move(*st)));
  }
  const cudaError_t synced = cudaStreamSynchronize(c.ec.stream);
  if (err == cudaSuccess) err = synced;
  if (err != cudaSuccess) return GPUOPT_CALL_STATUS(err);
  for (size_t o = 0; o < staged.size(); ++o)
    if (staged[o]) GPUOPT_RETURN_IF_ERROR(c.staging.download(*staged[o], &result[o], c.ec.stream));
  return result;
}
}  // namespace gpuopt::cuda
