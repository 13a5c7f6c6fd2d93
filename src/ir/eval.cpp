#include "ir/eval.h"

namespace gpuopt {

Status check_output_size(const Node& node, size_t index, const ValueInfo& vi, size_t max_tensor_bytes) {
  if (!vi.rank_known) return Status::Ok();
  const Status st = check_tensor_size(vi.dtype, vi.shape, max_tensor_bytes);
  if (st.ok()) return st;
  return Status(st.code(), fmt::format("{}: output {} {}", node_label(node), index, st.message()));
}

Result<std::vector<ValueInfo>> infer_node(const Node& node, const std::vector<const ValueInfo*>& inputs, int opset,
                                          size_t max_tensor_bytes) {
  // Every op in the table produces at least one output; infer functions write output 0 unchecked.
  if (node.outputs.empty()) return Status::InvalidArgument("{}: the node has no outputs", node_label(node));
  GPUOPT_ASSIGN_OR_RETURN(const OpVersion* version, node_version(node, opset));
  InferContext ctx{node, inputs, std::vector<ValueInfo>(node.outputs.size())};
  GPUOPT_RETURN_IF_ERROR(version->infer(ctx));
  for (size_t i = 0; i < ctx.outputs.size(); ++i)
    GPUOPT_RETURN_IF_ERROR(check_output_size(node, i, ctx.outputs[i], max_tensor_bytes));
  return std::move(ctx.outputs);
}

Result<std::vector<ValueInfo>> infer_from_tensors(const Node& node, const std::vector<const Tensor*>& inputs, int opset,
                                                  size_t max_tensor_bytes) {
  std::vector<ValueInfo> infos(inputs.size());
  std::vector<const ValueInfo*> in_ptrs(inputs.size(), nullptr);
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i]) continue;
    infos[i].dtype = inputs[i]->dtype();
    infos[i].rank_known = true;
    infos[i].shape = inputs[i]->shape();
    infos[i].value = inputs[i];
    in_ptrs[i] = &infos[i];
  }
  return infer_node(node, in_ptrs, opset, max_tensor_bytes);
}

Result<std::vector<Tensor>> eval_node(const Node& node, const std::vector<const Tensor*>& inputs, int opset,
                                      size_t max_tensor_bytes) {
  return eval_node_into(node, inputs, opset, max_tensor_bytes, [&](size_t i, const ValueInfo& vi) {
    return Tensor::try_empty(vi.dtype, vi.shape, fmt::format("{}:{}", node.name, i));
  });
}

Result<std::vector<Tensor>> eval_node_into(const Node& node, const std::vector<const Tensor*>& inputs, int opset,
                                           size_t max_tensor_bytes, const OutputAllocFn& alloc) {
  GPUOPT_ASSIGN_OR_RETURN(std::vector<ValueInfo> out_infos, infer_from_tensors(node, inputs, opset, max_tensor_bytes));
  std::vector<Tensor> outs(out_infos.size());
  std::vector<Tensor*> out_ptrs(out_infos.size());
  for (size_t i = 0; i < out_infos.size(); ++i) {
    const ValueInfo& vi = out_infos[i];
    if (node.outputs[i] == kNoValue) continue;  // optional output nobody asked for
    if (!vi.rank_known || !shape_is_concrete(vi.shape) || vi.dtype == DType::Undefined)
      return Status::Internal("{}: output {} has no concrete type/shape after inference with all inputs known",
                              node_label(node), i);
    GPUOPT_ASSIGN_OR_RETURN(outs[i], alloc(i, vi));
    out_ptrs[i] = &outs[i];
  }
  KernelContext kctx{node, inputs, out_ptrs};
  GPUOPT_RETURN_IF_ERROR(op_version(node.op, opset)->cpu(kctx));  // infer_node found the version
  return outs;
}

Result<std::vector<Tensor>> run_graph(const Graph& g, const std::vector<Tensor>& inputs, size_t max_tensor_bytes) {
  if (inputs.size() != g.inputs().size())
    return Status::InvalidArgument("subgraph '{}' takes {} inputs, {} given", g.name, g.inputs().size(), inputs.size());
  std::vector<Tensor> values(g.values().size());
  for (size_t i = 0; i < g.values().size(); ++i)
    if (g.values()[i].constant) values[i] = *g.values()[i].constant;
  for (size_t i = 0; i < inputs.size(); ++i) values[static_cast<size_t>(g.inputs()[i])] = inputs[i];
  for (const Node& n : g.nodes()) {
    std::vector<const Tensor*> in(n.inputs.size(), nullptr);
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      if (n.inputs[i] == kNoValue) continue;
      const Tensor& t = values[static_cast<size_t>(n.inputs[i])];
      if (!t.defined())
        return Status::InvalidArgument("{}: input '{}' has no value (subgraph '{}')", node_label(n),
                                       g.value(n.inputs[i]).name, g.name);
      in[i] = &t;
    }
    GPUOPT_ASSIGN_OR_RETURN(std::vector<Tensor> outs, eval_node(n, in, g.opset_for(n), max_tensor_bytes));
    for (size_t i = 0; i < n.outputs.size(); ++i)
      if (n.outputs[i] != kNoValue) values[static_cast<size_t>(n.outputs[i])] = std::move(outs[i]);
  }
  std::vector<Tensor> outs;
  for (ValueId o : g.outputs()) {
    if (!values[static_cast<size_t>(o)].defined())
      return Status::InvalidArgument("subgraph '{}': output '{}' has no value", g.name, g.value(o).name);
    outs.push_back(values[static_cast<size_t>(o)]);
  }
  return outs;
}

}  // namespace gpuopt
