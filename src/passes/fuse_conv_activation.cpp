// Conv -> act, Conv -> Add(z) -> act and Conv -> Add(z) become one FusedConv (ONNX Runtime's
// com.microsoft op): Y = act(Conv(X, W, B) + Z). act is Relu, HardSwish (MobileNetV3), Swish
// (ONNX's, alpha 1) or SiLU as the exporters write it, t * Sigmoid(t) (EfficientNet): the
// activations the GPU epilogues apply (ops/conv/conv_activation.h). On the GPU that is one cuDNN call
// (cudnnConvolutionBiasActivationForward) instead of a conv plus one or two elementwise kernels
// that each read and write the whole activation again: ResNet-50 has 16 residual Adds and 49
// Relus after its 53 Convs.
//
// Fused only where nothing else can see the intermediates: each intermediate value (the Conv
// output, the Add output, the Sigmoid output) is read only by the nodes the fusion replaces and
// is not a graph output. Z must have
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
  // The activation applied to t by the nodes after it ("" for none), appended to chain.
  auto match_activation = [&](ValueId t, std::vector<int32_t>* chain) -> std::string {
    if (const int32_t r = sole_reader(t); r >= 0) {
      const Node& n = g->nodes()[static_cast<size_t>(r)];
      const bool swish = is_default(n, "Swish") && n.attr_f("alpha", 1.0f) == 1.0f;
      if (is_default(n, "Relu") || is_default(n, "HardSwish") || swish) {
        chain->push_back(r);
        return swish ? "Swish" : n.op_type;
      }
      return "";
    }
    // SiLU: t read by exactly a Sigmoid and a Mul(t, Sigmoid(t)), the Sigmoid by the Mul alone.
    if (t == kNoValue || g->value(t).is_graph_output) return "";
    const auto& c = consumers[static_cast<size_t>(t)];
    if (c.size() != 2 || c[0] == c[1]) return "";
    for (int i = 0; i < 2; ++i) {
      const int32_t si = c[static_cast<size_t>(i)], mi = c[static_cast<size_t>(1 - i)];
      if (drop[static_cast<size_t>(si)] || drop[static_cast<size_t>(mi)]) return "";
      const Node& sig = g->nodes()[static_cast<size_t>(si)];
      const Node& mul = g->nodes()[static_cast<size_t>(mi)];
      if (!is_default(sig, "Sigmoid") || sig.inputs.size() != 1 || sig.outputs.size() != 1) continue;
      if (!is_default(mul, "Mul") || mul.inputs.size() != 2 || sole_reader(sig.outputs[0]) != mi) continue;
      const ValueId s = sig.outputs[0];
      if (!((mul.inputs[0] == t && mul.inputs[1] == s) || (mul.inputs[0] == s && mul.inputs[1] == t))) continue;
      chain->push_back(si);
      chain->push_back(mi);
      return "Swish";
    }
    return "";
  };

  for (size_t ci = 0; ci < g->nodes().size(); ++ci) {
    if (drop[ci]) continue;
    const Node& conv = g->nodes()[ci];
    if (!is_default(conv, "Conv") || conv.inputs.size() < 2 || conv.outputs.empty()) continue;
    const ValueId conv_out = conv.outputs[0];
    const int32_t next = sole_reader(conv_out);  // -1 also when a Sigmoid and a Mul read it (SiLU)
    ValueId z = kNoValue;
    std::vector<int32_t> chain;  // nodes after the Conv that the fused node replaces
    std::string act;
    const Node* n1 = next >= 0 ? &g->nodes()[static_cast<size_t>(next)] : nullptr;
    if (n1 && is_default(*n1, "Add") && n1->inputs.size() == 2 && n1->inputs[0] != n1->inputs[1]) {
      z = n1->inputs[0] == conv_out ? n1->inputs[1] : n1->inputs[0];
      if (!same_known_shape(g->value(z).info, g->value(conv_out).info) ||
          !same_known_shape(g->value(n1->outputs[0]).info, g->value(conv_out).info))
        continue;
      chain.push_back(next);
      act = match_activation(n1->outputs[0], &chain);
    } else {
      act = match_activation(conv_out, &chain);
      if (act.empty()) continue;
    }
    const Node& last = g->nodes()[static_cast<size_t>(chain.back())];

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
    if (!act.empty()) {  // identity: no attribute, as ONNX Runtime writes it
      Attribute a;
      a.kind = Attribute::Kind::kString;
      a.s = act;
      fused.attrs["activation"] = a;
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
