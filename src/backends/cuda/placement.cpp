// The CUDA backend's placement decision (placement.h), kept free of the device so that it can be
// asked and tested without one.
#include "backends/cuda/placement.h"

#include "backends/cuda/cuda_executable.h"
#include "backends/cuda/cuda_ops.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <map>

namespace gpuopt::cuda {
namespace {

std::vector<DType> input_dtypes(const Node& node, const Graph& graph) {
  std::vector<DType> dts;
  for (ValueId v : node.inputs) dts.push_back(v == kNoValue ? DType::Undefined : graph.value(v).info.dtype);
  return dts;
}

// The node as its kernel's `supports` judges it. kernel_shape is optional in ONNX (the weight's
// shape gives it); the CUDA convolutions tell the rank from the attribute, so a node without it
// is judged with the weight's spatial dims filled in.
Node judged(const Node& node, const Graph& graph) {
  const bool conv = node.op_type == "Conv" || node.op_type == "ConvTranspose" || node.op_type == "FusedConv";
  if (!conv || node.has_attr("kernel_shape") || node.inputs.size() < 2 || node.inputs[1] == kNoValue) return node;
  const ValueInfo& w = graph.value(node.inputs[1]).info;
  if (!w.rank_known || w.shape.size() < 3 || w.shape.size() > 5) return node;
  Node with = node;
  with.attrs["kernel_shape"] = ints_attr(std::vector<int64_t>(w.shape.begin() + 2, w.shape.end()));
  return with;
}

std::string attr_text(const std::string& name, const Attribute& a) {
  switch (a.kind) {
    case Attribute::Kind::kInt: return fmt::format("{}={}", name, a.i);
    case Attribute::Kind::kFloat: return fmt::format("{}={}", name, a.f);
    case Attribute::Kind::kString: return fmt::format("{}={}", name, a.s);
    case Attribute::Kind::kInts: return fmt::format("{}=[{}]", name, fmt::join(a.ints, ","));
    case Attribute::Kind::kFloats: return fmt::format("{}=[{}]", name, fmt::join(a.floats, ","));
    case Attribute::Kind::kStrings: return fmt::format("{}=[{}]", name, fmt::join(a.strings, ","));
    case Attribute::Kind::kTensor: return name + "=<tensor>";
    case Attribute::Kind::kGraph: return name + "=<graph>";
  }
  return name;
}

std::string dtype_list(const std::vector<DType>& dts) {
  std::vector<std::string> names;
  for (DType d : dts) names.emplace_back(d == DType::Undefined ? "-" : std::string(dtype_name(d)));
  return fmt::format("{}", fmt::join(names, ", "));
}

}  // namespace

bool cuda_supports(const Node& node, const Graph& graph) {
  const CudaOpEntry* e = cuda_op(node.op, graph.opset_for(node));
  if (!e) return false;
  if (!e->supports) return true;
  return e->supports(judged(node, graph), input_dtypes(node, graph));
}

// Shape arithmetic stays on the host: Shape and Size, and every node whose inputs are all
// constants or such host values and whose outputs are integers, run on the CPU. Their
// consumers (Reshape's shape, Slice's starts, ...) read them there without a device round trip
// and a host wait, and a captured CUDA graph can hold them (they depend on shapes only).
std::vector<NodePlace> cuda_placement(const Graph& graph) {
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
      p.push_back(cuda_supports(n, graph) ? NodePlace::kDevice : NodePlace::kCpuFallback);
    }
  }
  return p;
}

std::string cuda_fallback_reason(const Node& node, const Graph& graph) {
  const int opset = graph.opset_for(node);
  const std::string_view op = node.op_type.empty() ? op_name(node.op) : std::string_view(node.op_type);
  const CudaOpEntry* e = cuda_op(node.op, opset);
  if (!e) {
    if (cuda_op_ranges(node.op).empty()) return fmt::format("no CUDA kernel for {}", op);
    return fmt::format("no CUDA kernel for {} at opset {}", op, opset);
  }
  if (!e->supports) return "";
  const Node n = judged(node, graph);
  const std::vector<DType> dts = input_dtypes(node, graph);
  if (e->supports(n, dts)) return "";
  // The dtypes: the inputs of the first input's dtype given another one instead. If the kernel
  // takes the node then, the dtype is what it refused.
  DType first = DType::Undefined;
  for (DType d : dts)
    if (d != DType::Undefined) {
      first = d;
      break;
    }
  std::vector<std::string> would;
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::I64, DType::I32, DType::I8, DType::U8, DType::Bool}) {
    if (t == first || first == DType::Undefined) continue;
    std::vector<DType> other = dts;
    for (DType& d : other)
      if (d == first) d = t;
    if (e->supports(n, other)) would.emplace_back(dtype_name(t));
  }
  if (!would.empty())
    return fmt::format("the CUDA kernel does not take {} inputs ({}); it would take {}", dtype_name(first),
                       dtype_list(dts), fmt::join(would, ", "));
  std::vector<std::string> attrs;
  for (const auto& [name, a] : n.attrs) attrs.push_back(attr_text(name, a));
  if (attrs.empty())
    return fmt::format("the CUDA kernel does not take this form of {} ({} inputs: {})", op, dts.size(), dtype_list(dts));
  return fmt::format("the CUDA kernel does not take this form of {} ({}; inputs {})", op, fmt::join(attrs, " "),
                     dtype_list(dts));
}

std::vector<std::string> cpu_fallback_warnings(const Graph& graph, const std::vector<NodePlace>& place) {
  constexpr size_t kNamed = 3;  // nodes named per line; the rest are counted
  std::map<std::string, std::vector<size_t>> by_op;
  for (size_t i = 0; i < graph.nodes().size() && i < place.size(); ++i)
    if (place[i] == NodePlace::kCpuFallback) {
      const Node& n = graph.nodes()[i];
      by_op[n.op_type.empty() ? std::string(op_name(n.op)) : n.op_type].push_back(i);
    }
  std::vector<std::string> lines;
  for (const auto& [op, nodes] : by_op) {
    std::vector<std::string> named;
    for (size_t k = 0; k < nodes.size() && k < kNamed; ++k) {
      const Node& n = graph.nodes()[nodes[k]];
      named.push_back(fmt::format("'{}' ({})", n.name, cuda_fallback_reason(n, graph)));
    }
    std::string line = fmt::format("cuda: {} {} run{} on the CPU inside the GPU graph: [{}] {}", nodes.size(),
                                   nodes.size() == 1 ? "node" : "nodes", nodes.size() == 1 ? "s" : "", op,
                                   fmt::join(named, ", "));
    if (nodes.size() > kNamed) line += fmt::format(", and {} more", nodes.size() - kNamed);
    lines.push_back(std::move(line));
  }
  return lines;
}

}  // namespace gpuopt::cuda
