// conv1d_as_2d (passes.h). A 1-D convolution (x [N, C, L], w [M, C/g, k]) is the 2-D one of
// x [N, C, 1, L] and w [M, C/g, 1, k] with unit height: kernel_shape [1, k], strides [1, s],
// dilations [1, d], pads [0, p0, 0, p1]. Written that way it gets everything the 2-D path has on
// the GPU (the fused activation epilogue, channels-last, the depthwise kernel; the CUDA Conv of a
// rank-3 node is cuDNN alone) — audio encoders (Whisper's Conv1d stem, wav2vec feature
// extractors) and 1-D signal models.
//
// The input is reshaped to 4-D before the conv and the output back to 3-D after it (Reshape with
// 0 = "copy this dim", a view on every backend). Between two such convs, elementwise ops of one
// input (GELU, ReLU, ...) move behind the back-reshape so that the pair cancels: Whisper's
// Conv -> GELU -> Conv becomes Conv2d -> GELU -> Conv2d and the first conv can take the GELU in.
#include "passes/match.h"
#include "passes/passes.h"

#include <array>
#include <string_view>

namespace gpuopt {
namespace {

bool is_1d_conv(const Graph& g, const Node& n) {
  if (!is_default(n, "Conv") || n.inputs.size() < 2 || n.outputs.size() != 1) return false;
  const ValueInfo& x = g.value(n.inputs[0]).info;
  const ValueInfo& w = g.value(n.inputs[1]).info;
  if (!x.rank_known || x.shape.size() != 3 || !w.rank_known || w.shape.size() != 3) return false;
  for (const char* a : {"kernel_shape", "strides", "dilations"})
    if (n.has_attr(a) && n.attr_ints(a).size() != 1) return false;
  return !n.has_attr("pads") || n.attr_ints("pads").size() == 2;
}

// Ops of one tensor input that act on each element alone (shape-preserving, layout-free).
bool unary_elementwise(const Node& n) {
  static constexpr std::array<std::string_view, 16> kOps = {
      "Relu", "Gelu", "Sigmoid", "Tanh", "Erf", "LeakyRelu", "Elu", "Selu", "HardSigmoid", "HardSwish",
      "Softplus", "Softsign", "Mish", "Abs", "Neg", "Identity"};
  if (!n.domain.empty() || n.outputs.size() != 1) return false;
  for (std::string_view op : kOps)
    if (n.op_type == op) return n.inputs.size() == 1;
  return false;
}

ValueId shape_constant(Graph* g, const std::string& name, std::vector<int64_t> dims) {
  const int64_t n = static_cast<int64_t>(dims.size());
  return g->add_constant(name, Tensor::from_vector<int64_t>(DType::I64, {n}, dims));
}

}  // namespace

Result<PassStats> conv1d_as_2d(Graph* g) {
  PassStats stats;
  const size_t count = g->nodes().size();
  ValueId to4 = kNoValue, to3 = kNoValue;  // [0, 0, 1, -1] and [0, 0, -1], made on first use
  const auto reshape_op = op_from_name("Reshape");
  if (!reshape_op) return Status::Internal("conv1d_as_2d: no Reshape in the op table");
  for (size_t i = 0; i < count; ++i) {
    if (!is_1d_conv(*g, g->nodes()[i])) continue;
    if (to4 == kNoValue) {
      to4 = shape_constant(g, "conv1d_as_2d/to4", {0, 0, 1, -1});
      to3 = shape_constant(g, "conv1d_as_2d/to3", {0, 0, -1});
    }
    Node conv = g->nodes()[i];  // a copy: add_node may move the node array
    const std::string base = conv.name.empty() ? "conv1d_" + std::to_string(i) : conv.name;
    const ValueId x4 = g->add_node(*reshape_op, base + "/to2d", {conv.inputs[0], to4}, 1)[0];
    ValueId w4;
    const Value& wv = g->value(conv.inputs[1]);
    if (wv.constant) {
      Shape ws = wv.constant->shape();
      GPUOPT_ASSIGN_OR_RETURN(Tensor w, wv.constant->reshaped(Shape{ws[0], ws[1], 1, ws[2]}));
      w4 = g->add_constant(base + "/w2d", std::move(w));
    } else {
      w4 = g->add_node(*reshape_op, base + "/w2d", {conv.inputs[1], to4}, 1)[0];
    }
    const ValueId y = conv.outputs[0];
    const ValueId y4 = g->add_value(base + "/y2d");
    Node& c = g->nodes()[i];
    c.inputs[0] = x4;
    c.inputs[1] = w4;
    c.outputs[0] = y4;
    auto one = [&](const char* a, int64_t def) { return c.attr_ints(a, {def})[0]; };
    if (c.has_attr("kernel_shape")) c.attrs["kernel_shape"] = ints_attr({1, c.attr_ints("kernel_shape")[0]});
    c.attrs["strides"] = ints_attr({1, one("strides", 1)});
    c.attrs["dilations"] = ints_attr({1, one("dilations", 1)});
    if (c.has_attr("pads")) {
      const auto p = c.attr_ints("pads");
      c.attrs["pads"] = ints_attr({0, p[0], 0, p[1]});
    }
    (void)g->add_node(*reshape_op, base + "/to1d", {y4, to3}, 1);
    // The back-reshape writes the conv's old output value, so its readers need no change.
    Node& back = g->nodes().back();
    g->value(back.outputs[0]).producer = -1;
    back.outputs[0] = y;
    ++stats.rewritten;
  }
  if (stats.rewritten == 0) return stats;
  g->rebuild_producers();
  GPUOPT_RETURN_IF_ERROR(g->topo_sort());
  GPUOPT_RETURN_IF_ERROR(g->infer_shapes());

  // Reshape(to3) -> U -> Reshape(to4), each read only by the next: U on the 4-D tensor; and
  // Reshape(to3) -> Reshape(to4): the reader of the second reads the first's input.
  for (bool changed = true; changed;) {
    changed = false;
    g->rebuild_producers();
    Matcher m(g);
    for (size_t i = 0; i < g->nodes().size(); ++i) {
      const Node& back = g->nodes()[i];
      if (!is_default(back, "Reshape") || back.inputs.size() != 2 || back.inputs[1] != to3) continue;
      const ValueId y4 = back.inputs[0], y3 = back.outputs[0];
      const auto readers = m.readers(y3);
      if (readers.size() != 1 || g->value(y3).is_graph_output) continue;
      Node& u = g->nodes()[static_cast<size_t>(readers[0])];
      if (is_default(u, "Reshape") && u.inputs.size() == 2 && u.inputs[1] == to4) {
        const ValueId out = u.outputs[0];
        if (g->value(out).is_graph_output) continue;
        for (const int32_t r : m.readers(out))
          for (ValueId& in : g->nodes()[static_cast<size_t>(r)].inputs)
            if (in == out) in = y4;
        changed = true;
        break;
      }
      if (!unary_elementwise(u)) continue;
      // back: y4 -> y3; u: y3 -> z.  Becomes u: y4 -> z4; back: z4 -> z.
      const ValueId z = u.outputs[0];
      const ValueId z4 = g->add_value(u.name + "/2d");
      Node& u2 = g->nodes()[static_cast<size_t>(readers[0])];
      Node& back2 = g->nodes()[i];
      u2.inputs[0] = y4;
      u2.outputs[0] = z4;
      back2.inputs[0] = z4;
      back2.outputs[0] = z;
      changed = true;
      break;
    }
    if (changed) {
      g->rebuild_producers();
      GPUOPT_RETURN_IF_ERROR(g->topo_sort());  // dead-node removal walks the nodes in order
      GPUOPT_ASSIGN_OR_RETURN(PassStats dead, remove_dead_nodes(g));
      stats.removed += dead.removed;
      GPUOPT_RETURN_IF_ERROR(g->topo_sort());
      GPUOPT_RETURN_IF_ERROR(g->infer_shapes());
    }
  }
  return stats;
}

}  // namespace gpuopt
