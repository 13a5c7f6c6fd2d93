// qdq_attention_in_float: at --precision int8 on the GPU, the Q -> DQ pairs in front of a MatMul
// whose two operands are both activations (an attention's Q.K^T and P.V, as gpuopt quantize, ORT's
// quantize_static and ModelOpt place them) are bypassed: the MatMul reads the float tensors, so
// fuse_attention sees the pattern and the attention runs as one fp16 flash-attention kernel.
//
// Why: gpuopt has no int8 attention kernel. Kept, the pairs cut the attention into MatMul, Softmax
// and MatMul with a quantize and a dequantize pass around each (BERT-base int8 at b256 ran 3.4x
// slower than fp16 on the H200). This is the precision choice TensorRT makes where it has no int8
// kernel for a layer: the layer runs in higher precision. Only the GPU session does it; the CPU
// reference keeps exact ONNX QDQ semantics. The pairs are left where the dequantized value is a
// constant (a weight: fold_qdq's int8 GEMMs take those) or where the Q's and DQ's scale or zero
// point differ (not a round trip). GPUOPT_DISABLE_FUSION=qdq_attention keeps them.
#include "passes/match.h"
#include "passes/passes.h"

namespace gpuopt {

Result<PassStats> qdq_attention_in_float(Graph* g) {
  PassStats stats;
  g->rebuild_producers();
  Matcher m(g);
  // The float tensor x behind v = DequantizeLinear(QuantizeLinear(x, s, z), s, z), or kNoValue.
  auto round_trip_source = [&](ValueId v) -> ValueId {
    const Node* dq = m.producer(v, "DequantizeLinear");
    if (!dq || dq->inputs.empty()) return kNoValue;
    const Node* q = m.producer(dq->inputs[0], "QuantizeLinear");
    if (!q || q->inputs.empty() || q->inputs[0] == kNoValue) return kNoValue;
    if (g->value(q->inputs[0]).constant) return kNoValue;  // a weight
    for (size_t i = 1; i < 3; ++i) {  // the same scale and zero point (absent on both sides counts)
      const ValueId a = i < q->inputs.size() ? q->inputs[i] : kNoValue;
      const ValueId b = i < dq->inputs.size() ? dq->inputs[i] : kNoValue;
      if (a != b) return kNoValue;
    }
    if (q->attr_i("axis", 1) != dq->attr_i("axis", 1)) return kNoValue;
    return q->inputs[0];
  };
  for (Node& n : g->nodes()) {
    if (!is_default(n, "MatMul") || n.inputs.size() != 2) continue;
    const ValueId a = round_trip_source(n.inputs[0]), b = round_trip_source(n.inputs[1]);
    if (a == kNoValue || b == kNoValue) continue;
    n.inputs = {a, b};
    ++stats.rewritten;
  }
  return stats;  // the bypassed pairs, read by nothing else, go with the dead nodes
}

}  // namespace gpuopt
