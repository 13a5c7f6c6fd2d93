// fuse_int8_residual: an Int8Conv with an int8 output whose only reader is an Int8Add (fold_qdq's
// residual add, as ResNet's bottlenecks end) becomes one Int8Conv in its residual form
// (ops/quant/int8_conv.cpp, input positions in int8_conv_schema.h):
//
//   Int8Conv(x, W, ...) -> c (i8, y_scale)  ─► Int8Add(c, a_scale, Z, z_scale [, out_scale]) [Relu] ─► Y
//   =>  Int8Conv(x, W, ..., y_scale, Z, z_scale [, out_scale]; residual_activation) ─► Y
//
// (c may be either addend). The add's scale of c must be the conv's y_scale (the same value: the
// QuantizeLinear/DequantizeLinear pair of one tensor), so the fused node computes what the pair
// computed, term for term, and the CPU reference gives the same bytes. On the GPU the residual
// graph (cuDNN) spares writing and reading c; where cuDNN does not build it, the node runs as the
// pair did. Run after layout_nhwc (an Int8Add between two channels-last tensors has them in one
// layout, so Z is in the conv's). GPUOPT_DISABLE_FUSION=int8_residual turns it off.
#include "ops/quant/int8_conv_schema.h"
#include "passes/match.h"
#include "passes/passes.h"

namespace gpuopt {
namespace {

using namespace int8conv;

bool is_op(const Node& n, Op op) {
  return n.op == op && n.domain == "ai.gpuopt";
}

// The Int8Conv producing v that can take the residual: int8 output (y_scale given), no residual
// yet, v read by nothing but `reader` and no graph output.
const Node* fusable_conv(Matcher& m, ValueId v, int32_t reader) {
  const Graph& g = m.graph();
  if (v == kNoValue) return nullptr;
  const int32_t p = g.value(v).producer;
  if (p < 0 || m.drop()[static_cast<size_t>(p)]) return nullptr;
  const Node& n = g.nodes()[static_cast<size_t>(p)];
  if (!is_op(n, Op::Int8Conv) || n.outputs.size() != 1 || n.outputs[0] != v) return nullptr;
  if (n.inputs.size() <= kYScale || n.inputs[kYScale] == kNoValue || n.inputs.size() > kZ) return nullptr;
  const auto r = m.readers(v);
  if (r.size() != 1 || r[0] != reader) return nullptr;
  return &n;
}

}  // namespace

Result<PassStats> fuse_int8_residual(Graph* g) {
  PassStats stats;
  g->rebuild_producers();
  Matcher m(g);
  const size_t num_nodes = g->nodes().size();
  for (size_t i = 0; i < num_nodes; ++i) {
    if (m.drop()[i]) continue;
    const Node add = g->nodes()[i];
    // Int8Add: A, a_scale, B, b_scale [, y_scale]
    if (!is_op(add, Op::Int8Add) || add.inputs.size() < 4 || add.outputs.size() != 1) continue;
    if (add.inputs[0] == add.inputs[2]) continue;  // x + x: no other addend
    for (int side : {0, 2}) {
      const Node* conv = fusable_conv(m, add.inputs[static_cast<size_t>(side)], static_cast<int32_t>(i));
      if (!conv || !same_scalar(*g, conv->inputs[kYScale], add.inputs[static_cast<size_t>(side) + 1])) continue;
      const size_t other = side == 0 ? 2 : 0;
      const ValueInfo& zi = g->value(add.inputs[other]).info;
      if (zi.dtype != DType::I8) continue;
      Node n = *conv;
      n.inputs.resize(kNumInputs - 1, kNoValue);
      n.inputs[kZ] = add.inputs[other];
      n.inputs[kZScale] = add.inputs[other + 1];
      if (add.inputs.size() > 4 && add.inputs[4] != kNoValue) n.inputs.push_back(add.inputs[4]);
      const std::string act = add.attr_s("activation", "");
      if (!act.empty()) {
        n.attrs[kResidualActivation].kind = Attribute::Kind::kString;
        n.attrs[kResidualActivation].s = act;
      }
      n.outputs = add.outputs;
      n.name = conv->name + "+residual";
      const size_t ci = static_cast<size_t>(m.index_of(conv));
      m.mark(&g->nodes()[i]);
      g->nodes()[ci] = std::move(n);
      ++stats.rewritten;
      ++stats.removed;
      break;
    }
  }
  if (stats.rewritten == 0) return stats;
  GPUOPT_RETURN_IF_ERROR(m.erase_dropped());
  return stats;
}

}  // namespace gpuopt
