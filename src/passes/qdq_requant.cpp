// drop_requantize: at --precision int8 on the GPU, a QuantizeLinear that re-quantizes a
// DequantizeLinear's output with the same scale and zero point is the identity on the integer
// codes: Q(DQ(q)) = q. Its readers read q itself, and the dequantize that only fed it goes (the
// dead-node pass).
//
// Exact: DQ gives (q - z) * s; Q gives saturate(round(v / s) + z). With one s and z, v / s is q - z
// up to a few ulp (|q - z| <= 255), so the rounding lands on q - z and the clamp keeps it. Where it
// comes from: a MaxPool's output shares its input's scale (ONNX Runtime's QDQ recipe, and gpuopt
// quantize's: qdq_writer.h), so once pool_before_qdq has moved the pool in front of its round trip,
// ResNet's pooled stem reads Q(s) -> DQ(s) -> Q(s) -> DQ(s) -> conv. Only per-tensor scales, the
// default saturating int8/uint8 Q, no block quantization, and codes of one dtype on both sides.
// The CPU reference keeps the model as written. GPUOPT_DISABLE_FUSION=qdq_requant keeps the pair.
#include "passes/match.h"
#include "passes/passes.h"

namespace gpuopt {

Result<PassStats> drop_requantize(Graph* g) {
  PassStats stats;
  g->rebuild_producers();
  Matcher m(g);
  std::vector<std::pair<ValueId, ValueId>> replace;  // (Q's output, the codes it equals)
  for (const Node& q : g->nodes()) {
    if (!is_default(q, "QuantizeLinear") || q.inputs.size() < 2 || q.outputs.size() != 1) continue;
    if (g->value(q.outputs[0]).is_graph_output) continue;
    if (q.attr_i("saturate", 1) != 1 || q.attr_i("output_dtype", 0) != 0 || q.attr_i("block_size", 0) != 0) continue;
    const Node* dq = m.producer(q.inputs[0], "DequantizeLinear");
    if (!dq || dq->inputs.size() < 2 || dq->inputs[0] == kNoValue || dq->attr_i("block_size", 0) != 0) continue;
    const Value& scale = g->value(q.inputs[1]);
    if (!scale.constant || scale.constant->numel() != 1) continue;
    bool same = true;
    for (size_t k = 1; k < 3 && same; ++k)
      same = same_scalar(*g, k < q.inputs.size() ? q.inputs[k] : kNoValue, k < dq->inputs.size() ? dq->inputs[k] : kNoValue);
    const DType codes = g->value(dq->inputs[0]).info.dtype;
    if (!same || (codes != DType::I8 && codes != DType::U8) || g->value(q.outputs[0]).info.dtype != codes) continue;
    replace.emplace_back(q.outputs[0], dq->inputs[0]);
    m.mark(&q);
  }
  if (replace.empty()) return stats;
  for (Node& n : g->nodes())
    for (ValueId& in : n.inputs)
      for (const auto& [from, to] : replace)
        if (in == from) in = to;
  stats.rewritten = static_cast<int>(replace.size());
  GPUOPT_RETURN_IF_ERROR(m.erase_dropped());
  g->rebuild_producers();
  return stats;
}

}  // namespace gpuopt
