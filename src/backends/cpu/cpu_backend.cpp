// CPU reference backend: runs nodes in topological order through the op table's CPU kernels,
// re-inferring shapes for the actual inputs, and frees every intermediate after its last use.
#include "backends/backend.h"
#include "core/nvtx.h"
#include "ir/eval.h"

#include <fmt/ranges.h>

#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <chrono>
#include <map>
#include <mutex>

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

class CpuExecutable final : public Executable {
 public:
  CpuExecutable(const Graph& g, size_t memory_limit) : graph_(g), memory_limit_(memory_limit) {
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
        live += static_cast<int64_t>(outs[i].nbytes());
        slots[static_cast<size_t>(node.outputs[i])] = std::move(outs[i]);
      }
      peak = std::max(peak, live);
      for (ValueId in : node.inputs) {
        if (in == kNoValue || last_use_[static_cast<size_t>(in)] != static_cast<int32_t>(n)) continue;
        const Value& v = graph_.value(in);
        if (v.constant) continue;
        Tensor& slot = slots[static_cast<size_t>(in)];
        if (slot.defined() && v.producer >= 0) live -= static_cast<int64_t>(slot.nbytes());
        slot = Tensor();  // a value read twice by one node is freed once: the slot is empty now
      }
    }
    if (options.profile) options.profile->peak_intermediate_bytes = peak;
    std::vector<Tensor> result;
    result.reserve(graph_.outputs().size());
    for (ValueId o : graph_.outputs()) result.push_back(slots[static_cast<size_t>(o)]);
    return result;
  }

 private:
  Graph graph_;
  size_t memory_limit_;  // cap on any one tensor (--memory-limit); 0: physical memory
  std::vector<int32_t> last_use_;
};

class CpuBackend final : public Backend {
 public:
  std::string_view name() const override { return "cpu"; }
  // Every op in the table has a CPU kernel (the build requires one); dtype limits are reported
  // by the kernel as a Status at run time.
  bool supports(const Node& node, const Graph&) const override { return node.op < Op::kCount; }
  Allocator& allocator() override { return alloc_; }
  Result<std::unique_ptr<Executable>> compile(const Graph& graph, const CompileOptions& options) override {
    for (const Node& n : graph.nodes())
      if (!supports(n, graph)) return Status::Unimplemented("{}: not supported by the cpu backend", node_label(n));
    return std::unique_ptr<Executable>(std::make_unique<CpuExecutable>(graph, options.memory_limit));
  }

 private:
  CpuAllocator alloc_;
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend() { return std::make_unique<CpuBackend>(); }

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
