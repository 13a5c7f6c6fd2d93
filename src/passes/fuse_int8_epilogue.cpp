// fuse_int8_epilogue: at --precision int8 on the GPU, after the default fusions, each Int8Gemm
// (fold_qdq.cpp: the GEMM with its dequantize, bias and Relu) takes over what follows it when
// each step is the previous one's only reader:
//
//   Int8Gemm [─► Relu | Gelu] [─► Add(residual)] [─► QuantizeLinear(y_scale, i8 zero point 0)]
//
// Gelu: the ONNX op that fuse_gelu writes (erf, or approximate "tanh"), only where the node has
// no activation yet. The residual: an Add whose other input is a non-constant tensor of the
// output's own known shape (no broadcasting). The QuantizeLinear: per tensor, int8, zero point
// 0, its scale in fp16's normal range (the session runs the scales in fp16): the node then
// writes int8 itself, so the next Int8Gemm (which reads the quantized tensor: fold_qdq made it
// so) gets int8 with no quantize pass and no f16 round trip between them. A QuantizeLinear with
// a per-channel scale or a nonzero zero point is left as it is, and so is each step read by
// anything else. The CPU kernel of Int8Gemm computes the same formula (ops/quant/int8_gemm.cpp),
// so the rewritten graph runs on the CPU reference too. GPUOPT_DISABLE_FUSION=int8_epilogue.
//
// fuse_int8_norm, the same idea for the LayerNorms: a SkipLayerNormalization whose output is read
// by such a QuantizeLinear (BERT: the one before Q/K/V and the one before the FFN, which the
// Int8Gemms read through fold_qdq) writes the int8 tensor itself as its output 4 (attribute
// int8_scale, ops/norm/skip_layernorm.cpp) beside the float output the residual still reads, and
// the QuantizeLinear goes. GPUOPT_DISABLE_FUSION=int8_norm.
#include "passes/match.h"
#include "passes/passes.h"

#include <cmath>

namespace gpuopt {
namespace {

const Tensor* const_of(const Graph& g, ValueId v) {
  if (v == kNoValue || !g.value(v).constant) return nullptr;
  return &*g.value(v).constant;
}

// A per-tensor QuantizeLinear to i8 (explicit i8 zero point 0) whose f32 scale is within fp16's
// normal range, reading `v` as its data (fold_qdq's test for Int8Conv's absorbed quantize).
bool absorbable_quantize(const Graph& g, const Node& q, ValueId v) {
  if (q.inputs.size() < 3 || q.inputs[0] != v || q.attr_i("block_size", 0) != 0 || q.attr_i("output_dtype", 0) > 0)
    return false;
  const Tensor* s = const_of(g, q.inputs[1]);
  const Tensor* z = const_of(g, q.inputs[2]);
  if (!s || s->numel() != 1 || s->dtype() != DType::F32 || !z || z->numel() != 1 || z->dtype() != DType::I8 ||
      z->get_i64(0) != 0)
    return false;
  const double a = std::fabs(s->get_f64(0));
  return a >= 6.104e-5 && a <= 65504;
}

}  // namespace

Result<PassStats> fuse_int8_epilogue(Graph* g) {
  PassStats stats;
  g->rebuild_producers();
  Matcher m(g);
  for (size_t i = 0; i < g->nodes().size(); ++i) {
    if (m.drop()[i]) continue;
    Node node = g->nodes()[i];
    if (node.op_type != "Int8Gemm" || node.domain != "ai.gpuopt" || node.outputs.size() != 1 || node.inputs.size() < 4 ||
        node.inputs.size() > 5)  // already given a residual or y_scale: nothing more to take
      continue;
    ValueId out = node.outputs[0];
    if (g->value(out).info.dtype != DType::F32) continue;  // before the precision pass: the float output
    std::vector<const Node*> absorbed;
    if (node.attr_s("activation", "").empty()) {
      if (const Node* r = m.sole_reader(out, "Relu")) {
        node.attrs["activation"] = string_attr("Relu");
        out = r->outputs[0];
        absorbed.push_back(r);
      } else if (const Node* ge = m.sole_reader(out, "Gelu"); ge && ge->inputs.size() == 1) {
        const std::string approx = ge->attr_s("approximate", "none");
        if (approx == "none" || approx == "tanh") {
          node.attrs["activation"] = string_attr("Gelu");
          if (approx == "tanh") node.attrs["approximate"] = string_attr("tanh");
          out = ge->outputs[0];
          absorbed.push_back(ge);
        }
      }
    }
    ValueId residual = kNoValue, y_scale = kNoValue;
    if (const Node* add = m.sole_reader(out, "Add")) {
      const ValueId r = Matcher::other(*add, out);
      if (r != kNoValue && !g->value(r).constant && same_known_shape(g->value(r).info, g->value(out).info) &&
          same_known_shape(g->value(add->outputs[0]).info, g->value(out).info)) {
        residual = r;
        out = add->outputs[0];
        absorbed.push_back(add);
      }
    }
    if (const auto readers = m.readers(out); readers.size() == 1) {
      const Node& q = g->nodes()[static_cast<size_t>(readers[0])];
      if (is_default(q, "QuantizeLinear") && absorbable_quantize(*g, q, out)) {
        y_scale = q.inputs[1];
        out = q.outputs[0];
        absorbed.push_back(&q);
      }
    }
    if (absorbed.empty()) continue;
    node.inputs.resize(7, kNoValue);
    node.inputs[5] = residual;
    node.inputs[6] = y_scale;
    while (node.inputs.back() == kNoValue) node.inputs.pop_back();
    node.outputs = {out};
    for (const Node* a : absorbed) m.mark(a);
    g->nodes()[i] = std::move(node);
    ++stats.rewritten;
    stats.removed += static_cast<int>(absorbed.size());
  }
  if (stats.rewritten == 0) return stats;
  GPUOPT_RETURN_IF_ERROR(m.erase_dropped());
  GPUOPT_RETURN_IF_ERROR(g->infer_shapes());
  return stats;
}

Result<PassStats> fuse_int8_norm(Graph* g) {
  PassStats stats;
  g->rebuild_producers();
  Matcher m(g);
  for (size_t i = 0; i < g->nodes().size(); ++i) {
    const Node& ln = g->nodes()[i];
    if (m.drop()[i] || ln.op_type != "SkipLayerNormalization" || ln.domain != "com.microsoft" || ln.outputs.empty() ||
        ln.outputs.size() > 4 || ln.has_attr("fp8_scale") || ln.has_attr("int8_scale"))
      continue;
    const ValueId y = ln.outputs[0];
    if (y == kNoValue || g->value(y).info.dtype != DType::F32) continue;  // before the precision pass
    const Node* q = nullptr;
    for (int32_t r : m.readers(y)) {
      const Node& n = g->nodes()[static_cast<size_t>(r)];
      if (is_default(n, "QuantizeLinear") && absorbable_quantize(*g, n, y)) {
        q = &n;
        break;
      }
    }
    if (!q) continue;
    const float scale = static_cast<float>(g->value(q->inputs[1]).constant->get_f64(0));
    const ValueId codes = q->outputs[0];
    m.mark(q);
    Node& n = g->nodes()[i];
    n.outputs.resize(5, kNoValue);
    n.outputs[4] = codes;
    n.attrs["int8_scale"] = float_attr(scale);
    ++stats.rewritten;
    ++stats.removed;
  }
  if (stats.rewritten == 0) return stats;
  GPUOPT_RETURN_IF_ERROR(m.erase_dropped());
  GPUOPT_RETURN_IF_ERROR(g->infer_shapes());
  return stats;
}

}  // namespace gpuopt
