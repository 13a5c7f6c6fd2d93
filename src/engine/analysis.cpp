// node_costs, place_nodes, plan_memory_for (engine/analysis.h).
#include "engine/analysis.h"

#include "ir/op_table.h"
#include "passes/passes.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <map>
#include <optional>

namespace gpuopt {
namespace {

std::string info_string(const ValueInfo& v) {
  if (!v.rank_known) return fmt::format("{}[?]", dtype_name(v.dtype));
  std::vector<std::string> d;
  for (int64_t x : v.shape) d.push_back(x >= 0 ? fmt::format("{}", x) : "?");
  return fmt::format("{}[{}]", dtype_name(v.dtype), fmt::join(d, ","));
}

bool info_concrete(const ValueInfo& v) { return v.rank_known && shape_is_concrete(v.shape); }

double info_bytes(const ValueInfo& v) {
  if (!info_concrete(v)) return 0;
  return static_cast<double>(shape_numel(v.shape)) * static_cast<double>(dtype_size(v.dtype));
}

}  // namespace

Result<Graph> bind_shapes(const Graph& graph, const std::vector<std::pair<std::string, int64_t>>& symbols, int64_t batch) {
  Graph bound = graph;
  for (const auto& [name, value] : symbols)
    if (!bound.bind_symbol(name, value))
      return Status::InvalidArgument("the model has no symbolic dim '{}' (symbols: {})", name,
                                     fmt::join(graph.symbols(), ", "));
  if (batch > 0) {
    bound.bind_symbol("batch", batch);
    for (ValueId in : bound.inputs()) {  // a dynamic leading dim under another name is the batch too
      const Shape& s = bound.value(in).info.shape;
      if (!s.empty() && s[0] <= kFirstSymbolDim) bound.bind_symbol(bound.symbol_name(s[0]), batch);
    }
  }
  GPUOPT_RETURN_IF_ERROR(bound.infer_shapes());
  return bound;
}

std::vector<NodeCost> node_costs(const Graph& bound) {
  std::vector<NodeCost> out(bound.nodes().size());
  // Folded nodes cost nothing at run time worth counting (they compute shapes); a graph whose
  // folding fails is counted as it is.
  Graph folded = bound;
  if (!fold_constants(&folded).ok()) folded = bound;
  std::map<std::string, const Node*> by_name;
  for (const Node& n : folded.nodes()) by_name[n.name] = &n;
  for (size_t i = 0; i < out.size(); ++i) {
    NodeCost& c = out[i];
    auto f = by_name.find(bound.nodes()[i].name);
    if (f == by_name.end()) {
      c.folded = true;
      continue;
    }
    const Node& n = *f->second;
    std::vector<ValueInfo> infos;
    infos.reserve(n.inputs.size());  // FlopsContext points into it: no reallocation
    FlopsContext fc{n, {}, {}};
    std::vector<std::string> ins, outs;
    for (ValueId v : n.inputs) {
      if (v == kNoValue) {
        fc.inputs.push_back(nullptr);
        continue;
      }
      infos.push_back(folded.info_with_value(v));
      fc.inputs.push_back(&infos.back());
      ins.push_back(info_string(infos.back()));
      c.bytes += info_bytes(infos.back());
      c.concrete = c.concrete && info_concrete(infos.back());
    }
    for (ValueId v : n.outputs) {
      fc.outputs.push_back(v == kNoValue ? nullptr : &folded.value(v).info);
      if (v == kNoValue) continue;
      const ValueInfo& info = folded.value(v).info;
      outs.push_back(info_string(info));
      c.bytes += info_bytes(info);
      c.concrete = c.concrete && info_concrete(info);
      if (c.dtype.empty()) c.dtype = dtype_name(info.dtype);
    }
    c.flops = op_def(n.op).flops(fc);
    c.shapes = fmt::format("{} -> {}", fmt::join(ins, " x "), fmt::join(outs, ", "));
  }
  return out;
}

Placement place_nodes(const Graph& graph, const Device& device, const Backend* backend, const std::string& why) {
  Placement p;
  // The op table's decision (the one the CUDA backend makes) where the device kind registered one:
  // its reasons for each CPU node, and the placement itself when there is no such device here.
  std::optional<StaticPlacement> table = static_placement(device, graph);
  if (!backend && !table) {
    p.error = why.empty() ? fmt::format("no backend for {}", device.to_string()) : why;
    return p;
  }
  if (table) p.fallbacks = table->fallbacks;
  p.source = backend ? "backend" : "op table";
  p.place = backend ? backend->place(graph) : std::move(table->place);
  return p;
}

std::vector<BackendSupport> support_per_backend(const Graph& graph) {
  std::vector<BackendSupport> out;
  for (const std::string& name : backend_names()) {
    BackendSupport s{name, false, {}};
    auto device = parse_device(name);
    auto b = device.ok() ? create_backend(*device) : Result<std::unique_ptr<Backend>>(device.status());
    if (b.ok()) {
      s.available = true;
      for (const Node& n : graph.nodes()) s.node.push_back((*b)->supports(n, graph));
    }
    out.push_back(std::move(s));
  }
  return out;
}

MemoryPlan plan_memory_for(const Graph& bound, const std::vector<NodePlace>* place, bool cuda, std::string* rules) {
  std::vector<std::pair<DType, Shape>> inputs;
  for (ValueId v : bound.inputs()) inputs.emplace_back(bound.value(v).info.dtype, bound.value(v).info.shape);
  MemoryPlanOptions o;
  std::string why;
  if (cuda && place && !place->empty()) {  // the CUDA executor: nodes on the device, its view ops
    o.alias = [place](const Node& n, size_t i) { return (*place)[i] == NodePlace::kDevice && is_view_op(n); };
    o.plannable = [place](const Node& n, size_t i) { return (*place)[i] == NodePlace::kDevice && !is_view_op(n); };
    why = "cuda executor (GPUOPT_MEMORY_PLAN=static): outputs of the nodes on the GPU";
  } else {
    why = cuda ? "cpu executor's rules (placement on the GPU needs a CUDA device)" : "cpu executor";
  }
  if (rules) *rules = why;
  return plan_memory(bound, value_bytes_for_inputs(bound, inputs), o);
}

}  // namespace gpuopt
