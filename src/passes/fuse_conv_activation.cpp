// Conv -> Relu, Conv -> Add(z) -> Relu and Conv -> Add(z) become one FusedConv (ONNX Runtime's
// com.microsoft op): Y = act(Conv(X, W, B) + Z). On the GPU that is one cuDNN call
// (cudnnConvolutionBiasActivationForward) instead of a conv plus one or two elementwise kernels
// that each read and write the whole activation again: ResNet-50 has 16 residual Adds and 49
// Relus after its 53 Convs.
//
// Fused only where nothing else can see the intermediates: each intermediate value (the Conv
// output, the Add output) is read by exactly one node and is not a graph output. Z must have
// the Conv output's dtype and a fully known shape equal to it (no broadcasting: cuDNN's z is an
// output-shaped tensor). The fused node takes the place of the chain's last node, so every
// input (Z included) is computed before it and the node list stays topologically sorted.
#include "passes/match.h"
#include "passes/passes.h"

namespace gpuopt {

Result<PassStats> fuse_conv_activation(Graph* g) {
  PassStats stats;
  g->rebuild_producers();
  const auto consumers = g->consumers();
  const auto fusion_op = op_from_name("FusedConv");
  if (!fusion_op) return stats;
  std::vector<bool> drop(g->nodes().size(), false);
  // The one node reading v, or -1 (v read by several nodes, by none, or a graph output).
  auto sole_reader = [&](ValueId v) -> int32_t {
    if (v == kNoValue || g->value(v).is_graph_output) return -1;
    const auto& c = consumers[static_cast<size_t>(v)];
    if (c.size() != 1 || drop[static_cast<size_t>(c[0])]) return -1;
    return c[0];
  };

  for (size_t ci = 0; ci < g->nodes().size(); ++ci) {
    if (drop[ci]) continue;
    const Node& conv = g->nodes()[ci];
    if (!is_default(conv, "Conv") || conv.inputs.size() < 2 || conv.outputs.empty()) continue;
    const ValueId conv_out = conv.outputs[0];
    int32_t next = sole_reader(conv_out);
    if (next < 0) continue;
    ValueId z = kNoValue;
    std::vector<int32_t> chain;  // nodes after the Conv that the fused node replaces
    const Node* n1 = &g->nodes()[static_cast<size_t>(next)];
    if (is_default(*n1, "Add") && n1->inputs.size() == 2 && n1->inputs[0] != n1->inputs[1]) {
      z = n1->inputs[0] == conv_out ? n1->inputs[1] : n1->inputs[0];
      if (!same_known_shape(g->value(z).info, g->value(conv_out).info) ||
          !same_known_shape(g->value(n1->outputs[0]).info, g->value(conv_out).info))
        continue;
      chain.push_back(next);
      next = sole_reader(n1->outputs[0]);
      if (next >= 0 && is_default(g->nodes()[static_cast<size_t>(next)], "Relu")) chain.push_back(next);
    } else if (is_default(*n1, "Relu")) {
      chain.push_back(next);
    } else {
      continue;
    }
    const Node& last = g->nodes()[static_cast<size_t>(chain.back())];
    const bool relu = is_default(last, "Relu");

    Node fused;
    fused.op = *fusion_op;
    fused.op_type = "FusedConv";
    fused.domain = "com.microsoft";
    fused.name = conv.name.empty() ? last.name : conv.name;
    fused.attrs = conv.attrs;
    // kernel_shape is optional in Conv; the fused node spells it out from the weight when it is
    // known, since the CUDA kernel tells a 2-D conv by it.
    const ValueInfo& wi = g->value(conv.inputs[1]).info;
    if (!fused.has_attr("kernel_shape") && wi.rank_known && wi.shape.size() > 2) {
      Attribute ks;
      ks.kind = Attribute::Kind::kInts;
      ks.ints.assign(wi.shape.begin() + 2, wi.shape.end());
      bool known = true;
      for (int64_t d : ks.ints) known &= dim_is_known(d);
      if (known) fused.attrs["kernel_shape"] = ks;
    }
    if (relu) {  // identity: no attribute, as ONNX Runtime writes it
      Attribute act;
      act.kind = Attribute::Kind::kString;
      act.s = "Relu";
      fused.attrs["activation"] = act;
    }
    fused.inputs = {conv.inputs[0], conv.inputs[1], conv.inputs.size() > 2 ? conv.inputs[2] : kNoValue};
    if (z != kNoValue) fused.inputs.push_back(z);
    while (fused.inputs.size() > 2 && fused.inputs.back() == kNoValue) fused.inputs.pop_back();
    fused.outputs = {last.outputs[0]};
    drop[ci] = true;
    for (size_t k = 0; k + 1 < chain.size(); ++k) drop[static_cast<size_t>(chain[k])] = true;
    g->nodes()[static_cast<size_t>(chain.back())] = std::move(fused);
    stats.removed += static_cast<int>(chain.size());
  }
  if (stats.removed > 0) erase_nodes(g, drop);
  return stats;
}

}  // namespace gpuopt
