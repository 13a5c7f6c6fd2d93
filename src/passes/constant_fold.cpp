#include "core/log.h"
#include "ir/eval.h"
#include "passes/passes.h"
#include "passes/shape_select.h"

namespace gpuopt {
namespace {

// Folding must not turn a small graph into a huge file of constants (ConstantOfShape, Expand,
// Tile, Range can make big tensors from tiny inputs): bigger results stay computed at run time.
constexpr size_t kMaxFoldedBytes = size_t{64} << 20;

bool shape_query_foldable(const Graph& g, const Node& n) {
  if ((n.op_type != "Shape" && n.op_type != "Size") || n.inputs.empty() || n.inputs[0] == kNoValue) return false;
  const ValueInfo& vi = g.value(n.inputs[0]).info;
  return vi.rank_known && shape_is_concrete(vi.shape);
}

Status reinfer(Graph* g, const Node& n) {
  std::vector<ValueInfo> infos(n.inputs.size());
  std::vector<const ValueInfo*> ptrs(n.inputs.size(), nullptr);
  for (size_t i = 0; i < n.inputs.size(); ++i) {
    if (n.inputs[i] == kNoValue) continue;
    infos[i] = g->info_with_value(n.inputs[i]);
    ptrs[i] = &infos[i];
  }
  GPUOPT_ASSIGN_OR_RETURN(std::vector<ValueInfo> outs, infer_node(n, ptrs, g->opset_for(n)));
  for (size_t i = 0; i < n.outputs.size() && i < outs.size(); ++i) {
    if (n.outputs[i] == kNoValue) continue;
    ValueInfo& vi = g->value(n.outputs[i]).info;
    outs[i].value = nullptr;
    // Keep what was known before where the new inference knows less (never lose information).
    if (!outs[i].rank_known && vi.rank_known) continue;
    if (outs[i].dtype == DType::Undefined) outs[i].dtype = vi.dtype;
    if (outs[i].rank_known && vi.rank_known && outs[i].shape.size() == vi.shape.size())
      for (size_t d = 0; d < vi.shape.size(); ++d)
        if (outs[i].shape[d] == kUnknownDim) outs[i].shape[d] = vi.shape[d];
    vi = std::move(outs[i]);
  }
  return Status::Ok();
}

}  // namespace

Result<PassStats> fold_constants(Graph* g) {
  PassStats stats;
  std::vector<Node> kept;
  ShapeSelections shapes;
  for (Node& n : g->nodes()) {
    if (std::optional<Tensor> picked = shapes.fold(*g, n)) {  // known dims of a partly known Shape
      Value& o = g->value(n.outputs[0]);
      o.info = ValueInfo{DType::I64, true, picked->shape(), nullptr};
      o.constant = std::move(*picked);
      o.producer = -1;
      ++stats.removed;
      continue;
    }
    bool all_const = true;  // every op in the table is deterministic, so zero-input nodes fold too
    for (ValueId in : n.inputs)
      if (in != kNoValue && !g->value(in).constant) all_const = false;
    const bool shape_query = !all_const && shape_query_foldable(*g, n);
    if (!all_const && !shape_query) {
      // Re-infer with what folding has learnt so far (a Reshape whose shape input just became
      // constant gets a concrete shape, so a later Shape of it can fold too).
      GPUOPT_RETURN_IF_ERROR(reinfer(g, n));
      shapes.record(*g, n);
      kept.push_back(std::move(n));
      continue;
    }
    if (shape_query) {  // Shape/Size need only the (concrete) shape, not the data
      const Shape& s = g->value(n.inputs[0]).info.shape;
      if (n.op_type == "Shape" && (n.has_attr("start") || n.has_attr("end"))) {
        kept.push_back(std::move(n));  // sliced Shape (opset 15): left to its kernel
        continue;
      }
      Tensor out = n.op_type == "Shape" ? Tensor::from_vector(DType::I64, {static_cast<int64_t>(s.size())}, s)
                                        : Tensor::scalar_i64(shape_numel(s));
      Value& o = g->value(n.outputs[0]);
      o.constant = std::move(out);
      o.info.dtype = DType::I64;
      o.info.rank_known = true;
      o.info.shape = o.constant->shape();
      o.producer = -1;
      ++stats.removed;
      continue;
    }
    std::vector<const Tensor*> ins(n.inputs.size(), nullptr);
    for (size_t i = 0; i < n.inputs.size(); ++i)
      if (n.inputs[i] != kNoValue) ins[i] = &*g->value(n.inputs[i]).constant;
    // Bounded before anything is allocated: a ConstantOfShape of 2^50 elements is left alone.
    auto outs = eval_node(n, ins, g->opset_for(n), kMaxFoldedBytes);
    size_t bytes = 0;
    if (outs.ok())
      for (const Tensor& t : *outs) bytes += t.defined() ? t.nbytes() : 0;
    if (!outs.ok() || bytes > kMaxFoldedBytes) {
      if (!outs.ok()) GPUOPT_LOG(debug, "constant folding skipped: {}", outs.status().to_string());
      kept.push_back(std::move(n));
      continue;
    }
    for (size_t i = 0; i < n.outputs.size(); ++i) {
      if (n.outputs[i] == kNoValue) continue;
      Value& o = g->value(n.outputs[i]);
      o.constant = std::move((*outs)[i]);
      o.info.dtype = o.constant->dtype();
      o.info.rank_known = true;
      o.info.shape = o.constant->shape();
      o.producer = -1;
    }
    ++stats.removed;
  }
  g->nodes() = std::move(kept);
  g->rebuild_producers();
  return stats;
}

void erase_nodes(Graph* g, const std::vector<bool>& drop) {
  std::vector<Node> kept;
  kept.reserve(g->nodes().size());
  for (size_t n = 0; n < g->nodes().size(); ++n)
    if (!drop[n]) kept.push_back(std::move(g->nodes()[n]));
  g->nodes() = std::move(kept);
  g->rebuild_producers();
}

}  // namespace gpuopt
