// The static memory plan (memory_plan.h): lifetimes, view groups, greedy-by-size best fit.
#include "backends/memory_plan.h"

#include "ir/eval.h"

#include <algorithm>
#include <numeric>

namespace gpuopt {
namespace {

constexpr int64_t kMaxEvaluatedElems = 4096;  // shape computations evaluated while sizing a run

size_t align_up(size_t v, size_t a) { return (v + a - 1) / a * a; }

bool nondeterministic(const Node& n) {
  return n.op_type == "RandomNormal" || n.op_type == "RandomUniform" || n.op_type == "RandomNormalLike" ||
         n.op_type == "RandomUniformLike" || n.op_type == "Bernoulli" || n.op_type == "Multinomial";
}

}  // namespace

bool is_view_op(const Node& node) {
  if (!node.domain.empty() && node.domain != "ai.onnx") return false;
  return node.op == Op::Reshape || node.op == Op::Flatten || node.op == Op::Squeeze || node.op == Op::Unsqueeze ||
         node.op == Op::Identity;
}

MemoryPlan plan_memory(const Graph& graph, const std::vector<int64_t>& value_bytes, const MemoryPlanOptions& options) {
  MemoryPlan plan;
  plan.alignment = std::max<size_t>(options.alignment, 1);
  const size_t nv = graph.values().size();
  plan.offset.assign(nv, -1);
  plan.buffer.assign(nv, -1);
  const auto& nodes = graph.nodes();

  // View groups: root[v] is the value whose storage v uses.
  std::vector<ValueId> root(nv);
  std::iota(root.begin(), root.end(), 0);
  for (size_t n = 0; n < nodes.size(); ++n) {
    const Node& node = nodes[n];
    const bool view = options.alias ? options.alias(node, n) : is_view_op(node);
    if (!view || node.inputs.empty() || node.inputs[0] == kNoValue || node.outputs.size() != 1 ||
        node.outputs[0] == kNoValue)
      continue;
    root[static_cast<size_t>(node.outputs[0])] = root[static_cast<size_t>(node.inputs[0])];
  }
  // A group holding a graph output (the run's result, read after the last node) stays outside.
  std::vector<bool> has_output(nv, false);
  for (size_t v = 0; v < nv; ++v)
    if (graph.values()[v].is_graph_output) has_output[static_cast<size_t>(root[v])] = true;
  // Which roots go into the arena.
  std::vector<bool> planned(nv, false);
  for (size_t v = 0; v < nv; ++v) {
    const Value& val = graph.values()[v];
    if (root[v] != static_cast<ValueId>(v) || val.producer < 0 || val.constant || val.is_graph_input || has_output[v])
      continue;
    const int64_t b = v < value_bytes.size() ? value_bytes[v] : -1;
    const auto p = static_cast<size_t>(val.producer);
    if (b < 0 || (options.plannable && !options.plannable(nodes[p], p))) {
      ++plan.unplanned_values;
      continue;
    }
    planned[v] = true;
  }
  // Lifetimes of the planned roots, over every member of their group.
  std::vector<int32_t> first(nv, -1), last(nv, -1);
  for (size_t v = 0; v < nv; ++v)
    if (planned[v]) first[v] = last[v] = graph.values()[v].producer;
  for (size_t n = 0; n < nodes.size(); ++n)
    for (ValueId in : nodes[n].inputs) {
      if (in == kNoValue) continue;
      const auto r = static_cast<size_t>(root[static_cast<size_t>(in)]);
      if (planned[r]) last[r] = std::max(last[r], static_cast<int32_t>(n));
    }
  for (size_t v = 0; v < nv; ++v)
    if (planned[v])
      plan.buffers.push_back({static_cast<ValueId>(v), 0, align_up(std::max<size_t>(static_cast<size_t>(value_bytes[v]), 1), plan.alignment),
                              first[v], last[v]});

  // Greedy by size: largest first; each goes into the smallest gap (among the buffers already
  // placed whose lifetimes overlap its own) that holds it, else above them all.
  std::vector<size_t> order(plan.buffers.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const auto& x = plan.buffers[a];
    const auto& y = plan.buffers[b];
    return x.bytes != y.bytes ? x.bytes > y.bytes : x.first < y.first;
  });
  std::vector<size_t> placed;
  std::vector<const PlannedBuffer*> overlap;
  for (size_t i : order) {
    PlannedBuffer& b = plan.buffers[i];
    overlap.clear();
    for (size_t j : placed) {
      const PlannedBuffer& p = plan.buffers[j];
      if (p.first <= b.last && b.first <= p.last) overlap.push_back(&p);
    }
    std::sort(overlap.begin(), overlap.end(), [](const PlannedBuffer* x, const PlannedBuffer* y) { return x->offset < y->offset; });
    size_t end = 0, best = 0, best_gap = SIZE_MAX;
    for (const PlannedBuffer* p : overlap) {
      if (p->offset > end) {
        const size_t gap = p->offset - end;
        if (gap >= b.bytes && gap < best_gap) {
          best_gap = gap;
          best = end;
        }
      }
      end = std::max(end, p->offset + p->bytes);
    }
    b.offset = best_gap != SIZE_MAX ? best : end;
    placed.push_back(i);
    plan.arena_bytes = std::max(plan.arena_bytes, b.offset + b.bytes);
    plan.naive_bytes += b.bytes;
  }
  for (size_t i = 0; i < plan.buffers.size(); ++i) {
    const auto v = static_cast<size_t>(plan.buffers[i].value);
    plan.buffer[v] = static_cast<int64_t>(i);
  }
  for (size_t v = 0; v < nv; ++v) {
    const int64_t bi = plan.buffer[static_cast<size_t>(root[v])];
    if (bi < 0) continue;
    plan.buffer[v] = bi;
    plan.offset[v] = static_cast<int64_t>(plan.buffers[static_cast<size_t>(bi)].offset);
  }
  // The lower bound: planned bytes live at once, per node step.
  std::vector<int64_t> delta(nodes.size() + 1, 0);
  for (const PlannedBuffer& b : plan.buffers) {
    delta[static_cast<size_t>(b.first)] += static_cast<int64_t>(b.bytes);
    delta[static_cast<size_t>(b.last) + 1] -= static_cast<int64_t>(b.bytes);
  }
  int64_t live = 0;
  for (size_t s = 0; s < nodes.size(); ++s) {
    live += delta[s];
    plan.peak_live_bytes = std::max(plan.peak_live_bytes, static_cast<size_t>(live));
  }
  return plan;
}

std::vector<int64_t> value_bytes_for_inputs(const Graph& graph, const std::vector<std::pair<DType, Shape>>& inputs) {
  const size_t nv = graph.values().size();
  std::vector<ValueInfo> info(nv);
  std::vector<Tensor> known(nv);  // values computed here (shape arithmetic)
  for (size_t v = 0; v < nv; ++v) {
    const Value& val = graph.values()[v];
    if (val.constant) info[v] = ValueInfo{val.constant->dtype(), true, val.constant->shape(), &*val.constant};
  }
  for (size_t i = 0; i < graph.inputs().size() && i < inputs.size(); ++i)
    info[static_cast<size_t>(graph.inputs()[i])] = ValueInfo{inputs[i].first, true, inputs[i].second, nullptr};

  auto shape_storage = std::make_shared<Storage>();  // Shape/Size read an input's shape, never its data
  for (const Node& node : graph.nodes()) {
    std::vector<const ValueInfo*> ptrs(node.inputs.size(), nullptr);
    bool inputs_known = true, all_values = true;
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      const ValueId v = node.inputs[i];
      if (v == kNoValue) continue;
      const ValueInfo& vi = info[static_cast<size_t>(v)];
      inputs_known = inputs_known && vi.rank_known;
      all_values = all_values && vi.value;
      ptrs[i] = &vi;
    }
    if (!inputs_known) continue;
    auto outs = infer_node(node, ptrs, graph.opset_for(node));
    if (!outs.ok()) continue;
    bool small = true;
    for (size_t o = 0; o < node.outputs.size() && o < outs->size(); ++o) {
      if (node.outputs[o] == kNoValue) continue;
      ValueInfo vi = (*outs)[o];
      vi.value = nullptr;
      const int64_t n = vi.rank_known ? shape_numel(vi.shape) : -1;
      small = small && n >= 0 && n <= kMaxEvaluatedElems && vi.dtype != DType::String;
      info[static_cast<size_t>(node.outputs[o])] = std::move(vi);
    }
    if (!small || nondeterministic(node)) continue;
    std::vector<Tensor> fake;
    std::vector<const Tensor*> args(node.inputs.size(), nullptr);
    const bool shape_query = (node.op == Op::Shape || node.op == Op::Size) && !node.inputs.empty() && ptrs[0] &&
                             shape_is_concrete(ptrs[0]->shape);
    if (!all_values && !shape_query) continue;
    fake.reserve(node.inputs.size());  // args point into it
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      if (!ptrs[i]) continue;
      if (ptrs[i]->value) {
        args[i] = ptrs[i]->value;
      } else {
        fake.push_back(Tensor::wrap(ptrs[i]->dtype, ptrs[i]->shape, shape_storage));
        args[i] = &fake.back();
      }
    }
    auto vals = eval_node(node, args, graph.opset_for(node));
    if (!vals.ok()) continue;
    for (size_t o = 0; o < node.outputs.size() && o < vals->size(); ++o) {
      if (node.outputs[o] == kNoValue) continue;
      const auto ov = static_cast<size_t>(node.outputs[o]);
      known[ov] = std::move((*vals)[o]);
      info[ov].value = &known[ov];
    }
  }
  std::vector<int64_t> bytes(nv, -1);
  for (size_t v = 0; v < nv; ++v) {
    const ValueInfo& vi = info[v];
    if (!vi.rank_known || vi.dtype == DType::Undefined || vi.dtype == DType::String) continue;
    const int64_t n = shape_numel(vi.shape);
    if (n >= 0) bytes[v] = n * static_cast<int64_t>(dtype_size(vi.dtype));
  }
  return bytes;
}

MemoryPlanMode memory_plan_mode(const KernelSettings& settings, MemoryPlanMode fallback) {
  switch (settings.memory_plan) {
    case KernelSettings::MemoryPlan::kStatic: return MemoryPlanMode::kStatic;
    case KernelSettings::MemoryPlan::kPool: return MemoryPlanMode::kPool;
    case KernelSettings::MemoryPlan::kDefault: break;
  }
  return fallback;
}

}  // namespace gpuopt
