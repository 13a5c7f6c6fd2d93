// pool_before_qdq: at --precision int8 on the GPU, a MaxPool that reads a QuantizeLinear ->
// DequantizeLinear round trip (one scale and zero point) pools the float tensor first, and the
// round trip follows it: MaxPool(DQ(Q(x))) becomes DQ(Q(MaxPool(x))).
//
// Exact: DQ(Q(.)) with one scale and zero point is monotone non-decreasing elementwise (a
// division, a rounding, a clamp, a multiplication), and a maximum over a window commutes with any
// such function; padding is outside the maximum on both sides. Why: gpuopt quantize (like
// TensorRT's recipe) quantizes a pool's input, so ResNet's stem writes its 112x112x64 output, then
// a quantize and a dequantize pass over it, then pools. Pooled first, the round trip runs on a
// quarter of the data (ResNet-50 b256: about 0.9 GB less traffic per run). The CPU reference keeps
// the model as written. GPUOPT_DISABLE_FUSION=qdq_pool keeps the order.
#include "passes/match.h"
#include "passes/passes.h"

namespace gpuopt {

Result<PassStats> pool_before_qdq(Graph* g) {
  PassStats stats;
  g->rebuild_producers();
  Matcher m(g);
  for (size_t i = 0; i < g->nodes().size(); ++i) {
    Node& pool = g->nodes()[i];
    if (!is_default(pool, "MaxPool") || pool.inputs.size() != 1 || pool.outputs.size() != 1) continue;
    const Node* dq = m.producer(pool.inputs[0], "DequantizeLinear");
    if (!dq || dq->inputs.empty() || dq->outputs.size() != 1 || !m.sole_reader(dq->outputs[0], "MaxPool")) continue;
    const Node* q = m.producer(dq->inputs[0], "QuantizeLinear");
    if (!q || q->inputs.empty() || q->inputs[0] == kNoValue || q->outputs.size() != 1) continue;
    if (!m.sole_reader(q->outputs[0], "DequantizeLinear")) continue;
    if (q->attr_i("axis", 1) != dq->attr_i("axis", 1) || q->attr_i("block_size", 0) != 0) continue;
    if (q->attr_i("saturate", 1) != 1 || q->attr_i("output_dtype", 0) != 0) continue;
    // One per-tensor scale and zero point on both sides (a per-channel scale is monotone per
    // channel too, but the quantizers write per-tensor ones for activations).
    bool round_trip = q->inputs.size() >= 2;
    for (size_t k = 1; k < 3 && round_trip; ++k)
      round_trip = same_scalar(*g, k < q->inputs.size() ? q->inputs[k] : kNoValue,
                               k < dq->inputs.size() ? dq->inputs[k] : kNoValue);
    const Value& scale = g->value(q->inputs[1]);
    if (!round_trip || !scale.constant || scale.constant->numel() != 1) continue;
    const int32_t qi = m.index_of(q), dqi = m.index_of(dq);
    const ValueId x = q->inputs[0], pooled_out = pool.outputs[0];
    // x -> MaxPool -> (new) p -> Q -> q_out -> DQ -> the pool's old output, which its readers keep.
    const ValueId p = g->add_value(g->value(pooled_out).name + "/pooled");
    Node& pn = g->nodes()[i];
    pn.inputs[0] = x;
    pn.outputs[0] = p;
    g->nodes()[static_cast<size_t>(qi)].inputs[0] = p;
    g->nodes()[static_cast<size_t>(dqi)].outputs[0] = pooled_out;
    ++stats.rewritten;
  }
  if (stats.rewritten == 0) return stats;
  g->rebuild_producers();
  GPUOPT_RETURN_IF_ERROR(g->topo_sort());
  GPUOPT_RETURN_IF_ERROR(g->infer_shapes());
  return stats;
}

}  // namespace gpuopt
