// The CPU backends: runs nodes in topological order, re-inferring shapes for the actual inputs,
// and frees every intermediate after its last use. The reference (`cpu-ref`) runs every node
// through the op table's CPU kernels; the fast one (`cpu`, backends/cpu_fast) runs the nodes its
// f32 kernels claim through them and the rest through the reference kernels, on the same tensors.
#include "backends/backend.h"
#include "backends/cpu_fast/cpu_fast.h"
#include "backends/cpu_fast/fast_kernel.h"
#include "core/nvtx.h"
#include "ir/eval.h"
#include "backends/memory_plan.h"

#include <fmt/ranges.h>

#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <chrono>
#include <map>
#include <mutex>
#include <optional>

namespace gpuopt {
namespace {

class CpuAllocator final : public Allocator {
 public:
  Device device() const override { return Device{}; }
  Result<Tensor> alloc(DType dtype, const Shape& shape) override {
    if (!shape_is_concrete(shape)) return Status::InvalidArgument("cpu alloc: shape {} is not concrete", shape_to_string(shape));
    return Tensor::try_empty(dtype, shape, "cpu tensor");
  }
  Status copy_in(const Tensor& src, Tensor* dst) override { return copy(src, dst); }
  Status copy_out(const Tensor& src, Tensor* dst) override { return copy(src, dst); }

 private:
  static Status copy(const Tensor& src, Tensor* dst) {
    if (src.dtype() != dst->dtype() || src.shape() != dst->shape())
      return Status::InvalidArgument("cpu copy: {} into {}", src.describe(), dst->describe());
    if (src.dtype() == DType::String) dst->strings() = src.strings();
    else if (src.nbytes()) std::memcpy(dst->raw(), src.raw(), src.nbytes());
    return Status::Ok();
  }
};

// One input shape's memory plan and the arenas made for it (one per concurrent run).
struct CpuPlan {
  std::vector<std::pair<DType, Shape>> key;
  MemoryPlan plan;
  std::vector<std::shared_ptr<Storage>> free_arenas;  // guarded by CpuExecutable::mu_
  uint64_t last_used = 0;
};
constexpr size_t kMaxPlans = 16;  // input shapes kept (a server sees a handful of batch sizes)

std::shared_ptr<Storage> make_arena(size_t bytes) {
  auto st = std::make_shared<Storage>();
  st->bytes = bytes;
  st->data = bytes ? std::aligned_alloc(256, (bytes + 255) / 256 * 256) : nullptr;
  st->deleter = [](void* p) { std::free(p); };
  return st;
}

using FastKernels = std::vector<std::unique_ptr<cpu_fast::FastKernel>>;

class CpuExecutable final : public Executable {
 public:
  // `fast`: per node, its fast kernel or nullptr (empty: the reference backend); `max_threads`
  // caps the fast kernels' threads (0: the pool's share).
  CpuExecutable(const Graph& g, size_t memory_limit, MemoryPlanMode mode, FastKernels fast, int max_threads)
      : graph_(g), memory_limit_(memory_limit), mode_(mode), fast_(std::move(fast)), max_threads_(max_threads) {
    // last_use[v] = index of the last node reading v; graph outputs are never freed.
    last_use_.assign(graph_.values().size(), -1);
    for (size_t n = 0; n < graph_.nodes().size(); ++n)
      for (ValueId in : graph_.nodes()[n].inputs)
        if (in != kNoValue) last_use_[static_cast<size_t>(in)] = static_cast<int32_t>(n);
    for (ValueId o : graph_.outputs()) last_use_[static_cast<size_t>(o)] = INT32_MAX;
  }

  Result<std::vector<Tensor>> run(const std::vector<Tensor>& inputs, const RunOptions& options) override {
    const auto& gin = graph_.inputs();
    if (inputs.size() != gin.size())
      return Status::InvalidArgument("cpu run: {} inputs given, the graph has {}", inputs.size(), gin.size());
    std::vector<Tensor> slots(graph_.values().size());
    for (size_t i = 0; i < gin.size(); ++i) slots[static_cast<size_t>(gin[i])] = inputs[i];
    for (size_t v = 0; v < slots.size(); ++v)
      if (graph_.values()[v].constant) slots[v] = *graph_.values()[v].constant;

    // GPUOPT_MEMORY_PLAN=static: activations are views into one arena at planned offsets, view
    // ops (Reshape, ...) share their input's storage; a tensor larger than planned (a shape
    // that depends on data) or outside the plan is allocated on its own.
    std::shared_ptr<CpuPlan> plan;
    std::shared_ptr<Storage> arena;
    if (mode_ == MemoryPlanMode::kStatic) {
      plan = plan_for(inputs);
      GPUOPT_ASSIGN_OR_RETURN(arena, take_arena(*plan));
    }
    std::vector<bool> counted(slots.size(), false);  // bytes held outside the arena, in `live`

    std::optional<cpu_fast::RunScope> threads;
    if (!fast_.empty()) threads.emplace(max_threads_);
    std::vector<const Tensor*> in_ptrs;
    int64_t live = 0, peak = 0;  // intermediate bytes
    for (size_t n = 0; n < graph_.nodes().size(); ++n) {
      const Node& node = graph_.nodes()[n];
      in_ptrs.assign(node.inputs.size(), nullptr);
      for (size_t i = 0; i < node.inputs.size(); ++i) {
        if (node.inputs[i] == kNoValue) continue;
        const Tensor& t = slots[static_cast<size_t>(node.inputs[i])];
        if (!t.defined())
          return Status::Internal("{}: input '{}' has no value at run time", node_label(node),
                                  graph_.value(node.inputs[i]).name);
        in_ptrs[i] = &t;
      }
      const auto t0 = std::chrono::steady_clock::now();
      Result<std::vector<Tensor>> evaluated = Status::Internal("not run");
      {
        NvtxRange range(node.name);
        const cpu_fast::FastKernel* fast = fast_.empty() ? nullptr : fast_[n].get();
        if (plan)
          evaluated = eval_planned(node, in_ptrs, plan->plan, arena, fast);
        else if (fast)
          evaluated = eval_fast(node, in_ptrs, *fast, [&](size_t i, const ValueInfo& vi) {
            return Tensor::try_empty(vi.dtype, vi.shape, fmt::format("{}:{}", node.name, i));
          });
        else
          evaluated = eval_node(node, in_ptrs, graph_.opset_for(node), memory_limit_);
      }
      GPUOPT_ASSIGN_OR_RETURN(std::vector<Tensor> outs, std::move(evaluated));
      if (options.profile && options.profile->per_node)
        options.profile->nodes.push_back(
            {node.name, node.op_type, "cpu",
             std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count(), 0.0,
             std::chrono::duration<double, std::micro>(t0.time_since_epoch()).count(), -1.0});
      for (size_t i = 0; i < node.outputs.size() && i < outs.size(); ++i) {
        if (node.outputs[i] == kNoValue) continue;
        const auto ov = static_cast<size_t>(node.outputs[i]);
        const bool own = !arena || (outs[i].storage() != arena && !(i == 0 && !node.inputs.empty() && in_ptrs[0] &&
                                                                    outs[i].storage() == in_ptrs[0]->storage()));
        if (own) live += static_cast<int64_t>(outs[i].nbytes());
        counted[ov] = own;
        slots[ov] = std::move(outs[i]);
      }
      peak = std::max(peak, live);
      for (ValueId in : node.inputs) {
        if (in == kNoValue || last_use_[static_cast<size_t>(in)] != static_cast<int32_t>(n)) continue;
        const Value& v = graph_.value(in);
        if (v.constant) continue;
        Tensor& slot = slots[static_cast<size_t>(in)];
        if (slot.defined() && v.producer >= 0 && counted[static_cast<size_t>(in)]) live -= static_cast<int64_t>(slot.nbytes());
        slot = Tensor();  // a value read twice by one node is freed once: the slot is empty now
      }
    }
    if (options.profile)
      options.profile->peak_intermediate_bytes = peak + (arena ? static_cast<int64_t>(plan->plan.arena_bytes) : 0);
    std::vector<Tensor> result;
    result.reserve(graph_.outputs().size());
    for (ValueId o : graph_.outputs()) result.push_back(slots[static_cast<size_t>(o)]);
    slots.clear();  // no view into the arena outlives the run: it goes back for the next one
    if (arena) give_back(*plan, std::move(arena));
    return result;
  }

 private:
  // One node under the plan: a view op's output is its input under the new shape; other outputs
  // go to their planned offset when they fit.
  // One node through its fast kernel, or the reference kernel on the same outputs when the fast
  // one declines this call's shapes.
  Result<std::vector<Tensor>> eval_fast(const Node& node, const std::vector<const Tensor*>& in_ptrs,
                                        const cpu_fast::FastKernel& fast, const OutputAllocFn& alloc) {
    const int opset = graph_.opset_for(node);
    GPUOPT_ASSIGN_OR_RETURN(std::vector<ValueInfo> infos, infer_from_tensors(node, in_ptrs, opset, memory_limit_));
    std::vector<Tensor> outs(infos.size());
    std::vector<Tensor*> out_ptrs(infos.size(), nullptr);
    for (size_t i = 0; i < infos.size(); ++i) {
      if (node.outputs[i] == kNoValue) continue;
      if (!infos[i].rank_known || !shape_is_concrete(infos[i].shape) || infos[i].dtype == DType::Undefined)
        return Status::Internal("{}: output {} has no concrete type/shape after inference with all inputs known",
                                node_label(node), i);
      GPUOPT_ASSIGN_OR_RETURN(outs[i], alloc(i, infos[i]));
      out_ptrs[i] = &outs[i];
    }
    KernelContext kctx{node, in_ptrs, out_ptrs};
    GPUOPT_ASSIGN_OR_RETURN(bool done, fast.run(kctx));
    if (done)
      cpu_fast::count_fast_kernel_call();
    else
      GPUOPT_RETURN_IF_ERROR(op_version(node.op, opset)->cpu(kctx));
    return outs;
  }

  Result<std::vector<Tensor>> eval_planned(const Node& node, const std::vector<const Tensor*>& in_ptrs,
                                           const MemoryPlan& plan, const std::shared_ptr<Storage>& arena,
                                           const cpu_fast::FastKernel* fast) {
    if (is_view_op(node) && node.outputs.size() == 1 && node.outputs[0] != kNoValue &&
        !graph_.value(node.outputs[0]).is_graph_output && !in_ptrs.empty() && in_ptrs[0] &&
        in_ptrs[0]->dtype() != DType::String) {
      GPUOPT_ASSIGN_OR_RETURN(std::vector<ValueInfo> infos, infer_from_tensors(node, in_ptrs, graph_.opset_for(node), memory_limit_));
      GPUOPT_ASSIGN_OR_RETURN(Tensor view, in_ptrs[0]->reshaped(infos[0].shape));
      return std::vector<Tensor>{std::move(view)};
    }
    const OutputAllocFn alloc = [&](size_t i, const ValueInfo& vi) -> Result<Tensor> {
      const ValueId v = node.outputs[i];
      const int64_t n = shape_numel(vi.shape);
      if (arena && vi.dtype != DType::String && plan.in_arena(v) && n >= 0 &&
          static_cast<size_t>(n) * dtype_size(vi.dtype) <= plan.capacity(v))
        return Tensor::wrap(vi.dtype, vi.shape, arena, static_cast<size_t>(plan.offset[static_cast<size_t>(v)]));
      return Tensor::try_empty(vi.dtype, vi.shape, fmt::format("{}:{}", node.name, i));
    };
    if (fast) return eval_fast(node, in_ptrs, *fast, alloc);
    return eval_node_into(node, in_ptrs, graph_.opset_for(node), memory_limit_, alloc);
  }

  std::shared_ptr<CpuPlan> plan_for(const std::vector<Tensor>& inputs) {
    std::vector<std::pair<DType, Shape>> key;
    for (const Tensor& t : inputs) key.emplace_back(t.dtype(), t.shape());
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (auto& p : plans_)
        if (p->key == key) {
          p->last_used = ++tick_;
          return p;
        }
    }
    auto p = std::make_shared<CpuPlan>();  // planned outside the lock: a walk over the graph
    p->plan = plan_memory(graph_, value_bytes_for_inputs(graph_, key), {});
    p->key = std::move(key);
    std::lock_guard<std::mutex> lock(mu_);
    if (plans_.size() >= kMaxPlans)
      plans_.erase(std::min_element(plans_.begin(), plans_.end(),
                                    [](const auto& a, const auto& b) { return a->last_used < b->last_used; }));
    p->last_used = ++tick_;
    plans_.push_back(p);
    return p;
  }

  Result<std::shared_ptr<Storage>> take_arena(CpuPlan& p) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!p.free_arenas.empty()) {
        auto a = std::move(p.free_arenas.back());
        p.free_arenas.pop_back();
        return a;
      }
    }
    // --memory-limit caps each tensor on the CPU: an arena above it is not made, the run
    // allocates tensor by tensor as without a plan (views still share their input's bytes).
    if (p.plan.arena_bytes == 0 || (memory_limit_ && p.plan.arena_bytes > memory_limit_)) return std::shared_ptr<Storage>();
    auto a = make_arena(p.plan.arena_bytes);
    // No memory for the arena: this run allocates tensor by tensor, and a tensor that does not
    // fit either is the out-of-memory error that names it.
    if (!a->data) return std::shared_ptr<Storage>();
    return a;
  }

  void give_back(CpuPlan& p, std::shared_ptr<Storage> arena) {
    std::lock_guard<std::mutex> lock(mu_);
    p.free_arenas.push_back(std::move(arena));
  }

  Graph graph_;
  size_t memory_limit_;  // cap on any one tensor (--memory-limit); 0: physical memory
  MemoryPlanMode mode_;
  FastKernels fast_;
  int max_threads_;
  std::vector<int32_t> last_use_;
  std::mutex mu_;
  std::vector<std::shared_ptr<CpuPlan>> plans_;
  uint64_t tick_ = 0;
};

class CpuBackend final : public Backend {
 public:
  // fast: the fast kernels where they apply (`cpu`), else the reference alone (`cpu-ref`).
  CpuBackend(bool fast, int max_threads) : fast_(fast), max_threads_(max_threads) {}
  std::string_view name() const override { return fast_ ? "cpu" : "cpu-ref"; }
  // Every op in the table has a CPU kernel (the build requires one); dtype limits are reported
  // by the kernel as a Status at run time.
  bool supports(const Node& node, const Graph&) const override { return node.op < Op::kCount; }
  // The fast backend: its own kernels' nodes on the "device", the others on the reference.
  std::vector<NodePlace> place(const Graph& graph) const override {
    std::vector<NodePlace> p;
    for (const Node& n : graph.nodes())
      p.push_back(!fast_ || cpu_fast::make_fast_kernel(n, graph) ? NodePlace::kDevice : NodePlace::kCpuFallback);
    return p;
  }
  Allocator& allocator() override { return alloc_; }
  Result<std::unique_ptr<Executable>> compile(const Graph& graph, const CompileOptions& options) override {
    for (const Node& n : graph.nodes())
      if (!supports(n, graph)) return Status::Unimplemented("{}: not supported by the cpu backend", node_label(n));
    GPUOPT_ASSIGN_OR_RETURN(const KernelSettings settings, KernelSettings::or_env(options.kernels));
    const MemoryPlanMode mode = memory_plan_mode(settings, MemoryPlanMode::kStatic);
    FastKernels fast;
    if (fast_) {
      cpu_fast::init_blas();
      for (const Node& n : graph.nodes()) fast.push_back(cpu_fast::make_fast_kernel(n, graph));
      cpu_fast::plan_channels_last(graph, fast);
    }
    return std::unique_ptr<Executable>(
        std::make_unique<CpuExecutable>(graph, options.memory_limit, mode, std::move(fast), max_threads_));
  }

 private:
  CpuAllocator alloc_;
  bool fast_;
  int max_threads_;
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend() { return std::make_unique<CpuBackend>(false, 0); }
std::unique_ptr<Backend> make_fast_cpu_backend(int max_threads) { return std::make_unique<CpuBackend>(true, max_threads); }

}  // namespace gpuopt

namespace gpuopt {

std::vector<NodePlace> Backend::place(const Graph& graph) const {
  std::vector<NodePlace> p;
  p.reserve(graph.nodes().size());
  for (const Node& n : graph.nodes()) p.push_back(supports(n, graph) ? NodePlace::kDevice : NodePlace::kCpuFallback);
  return p;
}

std::string_view node_place_name(NodePlace p) {
  switch (p) {
    case NodePlace::kDevice: return "device";
    case NodePlace::kCpuFallback: return "cpu (fallback)";
    case NodePlace::kHostShapes: return "cpu (shape math)";
  }
  return "?";
}

}  // namespace gpuopt
