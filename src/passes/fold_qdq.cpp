// fold_qdq: QDQ pairs around a MatMul or Gemm become one Int8Gemm (ai.gpuopt, cpu kernel in
// ops/quant/int8_gemm.cpp) that reads the int8 tensors themselves, so the GPU runs an int8
// tensor-core GEMM (cuBLASLt, int32 accumulate) with the dequantize, bias and Relu in its
// epilogue instead of a float GEMM on dequantized copies. Matched:
//
//   DequantizeLinear(xq i8, sx scalar, 0) ─► MatMul / Gemm ◄─ DequantizeLinear(Wq const i8 rank 2, sw, 0, axis = N's)
//        [─► Add(bias const [N])] [─► Relu]
//
// MatMul: X of any rank >= 2, W [K, N]. Gemm: transA 0, alpha 1, beta 1, bias C const [N]. The
// weight is stored transposed ([N, K], what cuBLASLt's int8 kernels want). Zero points must be
// 0 (symmetric). Run for --precision int8 on the GPU before constant folding (which would fold
// the weight's DequantizeLinear into a float constant); the unused DequantizeLinear nodes are
// then dead and removed by the default passes.
//
// With `convs` (the default; GPUOPT_INT8_CONV=0 clears it), QDQ convolutions become Int8Conv (ai.gpuopt, cpu kernel in
// ops/quant/int8_conv.cpp) the same way:
//
//   DequantizeLinear(xq i8, sx scalar, 0) ─► Conv ◄─ DequantizeLinear(Wq const i8 [M, C, kH, kW], sw, 0, axis 0)
//        [◄─ B const [M]] [─► BatchNormalization] [─► Relu] [─► QuantizeLinear(sy scalar, zero point i8 0)]
//
// 2-D, group 1, explicit symmetric pads, C and M multiples of 16 (the int8 tensor-core kernels'
// alignment; the 3-channel stem stays on the float path). A QuantizeLinear that is the only
// reader of the conv (or of its Relu) is absorbed: the node then writes int8 itself, so int8
// stays int8 between consecutive quantized convs. Int8Conv is written NCHW (channels_last 0);
// layout_nhwc makes it channels-last with the rest of its region. And a residual add of two
// int8 tensors of one shape, DequantizeLinear(a) -> Add <- DequantizeLinear(b) [-> Relu]
// [-> QuantizeLinear], becomes one elementwise Int8Add (ops/quant/int8_add.cpp).
#include "ir/conv2d_attrs.h"
#include "passes/match.h"
#include "passes/passes.h"

#include <algorithm>
#include <cmath>

namespace gpuopt {
namespace {

const Tensor* const_of(const Graph& g, ValueId v) {
  if (v == kNoValue || !g.value(v).constant) return nullptr;
  return &*g.value(v).constant;
}

// The value a chain of Identity nodes ending at `v` starts from: torch's legacy exporter writes
// an initializer shared by several parameters (equal biases: all zero in a freshly initialised
// model) once and gives each user an Identity of it. fold_qdq runs before the Identity removal,
// so a bias behind one is still a constant.
ValueId through_identities(const Matcher& m, ValueId v) {
  for (int hops = 0; hops < 8 && v != kNoValue; ++hops) {
    const Node* id = m.producer(v, "Identity");
    if (!id || id->inputs.empty()) break;
    v = id->inputs[0];
  }
  return v;
}

bool all_zero(const Graph& g, ValueId v) {
  if (v == kNoValue) return true;
  const Tensor* t = const_of(g, v);
  if (!t || t->dtype() != DType::I8) return false;
  for (int64_t i = 0; i < t->numel(); ++i)
    if (t->get_i64(i) != 0) return false;
  return true;
}

// A per-tensor DequantizeLinear of a non-constant i8 tensor with an f32 scale and zero point 0.
const Node* act_dq(const Matcher& m, ValueId v) {
  const Node* dq = m.producer(v, "DequantizeLinear");
  if (!dq || dq->inputs.size() < 2) return nullptr;
  const Graph& g = const_cast<Matcher&>(m).graph();
  const Value& x = g.value(dq->inputs[0]);
  const Tensor* s = const_of(g, dq->inputs[1]);
  if (x.constant || x.info.dtype != DType::I8 || !s || s->numel() != 1 || s->dtype() != DType::F32) return nullptr;
  if (dq->inputs.size() > 2 && !all_zero(g, dq->inputs[2])) return nullptr;
  return dq;
}

// A per-tensor QuantizeLinear to i8 with an f32 scale and an i8 zero point of 0 (an absent zero
// point would mean u8).
bool int8_quantize(const Graph& g, const Node& q) {
  if (q.inputs.size() < 3 || q.attr_i("block_size", 0) != 0 || q.attr_i("output_dtype", 0) > 0) return false;
  const Tensor* s = const_of(g, q.inputs[1]);
  const Tensor* z = const_of(g, q.inputs[2]);
  return s && s->numel() == 1 && s->dtype() == DType::F32 && z && z->numel() == 1 && all_zero(g, q.inputs[2]);
}

// Every value of t (a scale) of magnitude within fp16's normal range, [2^-14, 65504].
bool fp16_normal(const Tensor& t) {
  for (int64_t i = 0; i < t.numel(); ++i) {
    const double v = std::fabs(t.get_f64(i));
    if (v < 6.104e-5 || v > 65504) return false;
  }
  return true;
}

// The epilogue an int8 node takes over after `*out`: a Relu read only by the pattern, then a
// per-tensor int8 QuantizeLinear (its scale in fp16's normal range), which makes the node write
// int8. Moves *out to the last absorbed node's output.
void absorb_relu_and_quantize(Matcher& m, const Graph& g, ValueId* out, std::string* activation, ValueId* y_scale,
                              std::vector<const Node*>* absorbed) {
  if (const Node* relu = m.sole_reader(*out, "Relu")) {
    *activation = "Relu";
    *out = relu->outputs[0];
    absorbed->push_back(relu);
  }
  if (const Node* q = m.sole_reader(*out, "QuantizeLinear"); q && q->inputs[0] == *out && int8_quantize(g, *q) &&
                                                             fp16_normal(*g.value(q->inputs[1]).constant)) {
    *y_scale = q->inputs[1];
    *out = q->outputs[0];
    absorbed->push_back(q);
  }
}

// DequantizeLinear(x) -> Conv <- DequantizeLinear(W) [-> Relu] [-> QuantizeLinear] as one
// Int8Conv in place of node i; false when the pattern does not hold.
bool fold_conv(Graph* g, Matcher& m, size_t i, PassStats* stats) {
  const Node conv = g->nodes()[i];
  if (conv.inputs.size() < 2 || conv.outputs.size() != 1 || conv.attr_i("group", 1) != 1 ||
      conv.attr_s("auto_pad", "NOTSET") != "NOTSET")
    return false;
  const Node* dx = act_dq(m, conv.inputs[0]);
  const Node* dw = m.producer(conv.inputs[1], "DequantizeLinear");
  if (!dx || !dw || dw->inputs.size() < 2) return false;
  const Tensor* wq = const_of(*g, dw->inputs[0]);
  const Tensor* sw = const_of(*g, dw->inputs[1]);
  if (!wq || wq->dtype() != DType::I8 || wq->rank() != 4 || !sw || sw->dtype() != DType::F32) return false;
  if (dw->inputs.size() > 2 && !all_zero(*g, dw->inputs[2])) return false;
  const int64_t M = wq->dim(0), C = wq->dim(1);
  if (sw->numel() != 1 && !(sw->rank() == 1 && sw->numel() == M && dw->attr_i("axis", 1) == 0)) return false;
  if (M % 16 != 0 || C % 16 != 0) return false;
  const ValueInfo& xi = g->value(conv.inputs[0]).info;
  if (!xi.rank_known || xi.shape.size() != 4 || (dim_is_known(xi.shape[1]) && xi.shape[1] != C)) return false;
  Node probe;
  probe.attrs = conv.attrs;
  if (!conv.has_attr("kernel_shape")) {
    probe.attrs["kernel_shape"].kind = Attribute::Kind::kInts;
    probe.attrs["kernel_shape"].ints = {wq->dim(2), wq->dim(3)};
  }
  if (!conv2d_attrs_supported(probe) || probe.attr_ints("kernel_shape") != std::vector<int64_t>{wq->dim(2), wq->dim(3)})
    return false;
  ValueId bias = kNoValue;
  if (conv.inputs.size() > 2 && conv.inputs[2] != kNoValue) {
    // Through Identity nodes, as the Gemm bias: a freshly initialised torchvision model's
    // BN-folded conv biases are all zero, one shared initializer behind an Identity per conv.
    bias = through_identities(m, conv.inputs[2]);
    const Tensor* b = const_of(*g, bias);
    if (!b || b->dtype() != DType::F32 || b->rank() != 1 || b->numel() != M) return false;
  }
  ValueId out = conv.outputs[0], y_scale = kNoValue, w_scale = dw->inputs[1];
  std::vector<const Node*> absorbed;
  // An inference BatchNormalization after the conv (models that were not BN-folded before
  // quantization) becomes part of the per-channel scale and the bias: y * a + (B - mean) * a + beta
  // with a = gamma / sqrt(var + eps).
  if (const Node* bn = m.sole_reader(out, "BatchNormalization"); bn && bn->inputs[0] == out) {
    std::vector<const Tensor*> p;
    for (size_t k = 1; k < 5 && k < bn->inputs.size(); ++k) p.push_back(const_of(*g, bn->inputs[k]));
    bool ok = p.size() == 4 && bn->attr_i("training_mode", 0) == 0 &&
              std::none_of(bn->outputs.begin() + 1, bn->outputs.end(), [](ValueId v) { return v != kNoValue; });
    for (const Tensor* t : p) ok = ok && t && t->dtype() == DType::F32 && t->numel() == M;
    if (ok) {
      const double eps = bn->attr_f("epsilon", 1e-5f);
      Tensor sw2 = Tensor::empty(DType::F32, {M}), b2 = Tensor::empty(DType::F32, {M});
      for (int64_t c = 0; c < M; ++c) {
        const double a = p[0]->get_f64(c) / std::sqrt(p[3]->get_f64(c) + eps);
        const double b0 = bias != kNoValue ? g->value(bias).constant->get_f64(c) : 0.0;
        sw2.set_f64(c, sw->get_f64(sw->numel() == 1 ? 0 : c) * a);
        b2.set_f64(c, (b0 - p[2]->get_f64(c)) * a + p[1]->get_f64(c));
      }
      const std::string bn_name = bn->name.empty() ? g->value(bn->outputs[0]).name : bn->name;
      w_scale = g->add_constant(bn_name + "/int8_w_scale", std::move(sw2));
      bias = g->add_constant(bn_name + "/int8_bias", std::move(b2));
      out = bn->outputs[0];
      absorbed.push_back(bn);
    }
  }
  // The session runs the scales in fp16: one below fp16's normal range would lose precision.
  if (!fp16_normal(*g->value(w_scale).constant) || !fp16_normal(*g->value(dx->inputs[1]).constant)) return false;
  std::string activation;
  absorb_relu_and_quantize(m, *g, &out, &activation, &y_scale, &absorbed);
  const std::string base = conv.name.empty() ? g->value(conv.outputs[0]).name : conv.name;
  Node n;
  n.op = Op::Int8Conv;
  n.op_type = "Int8Conv";
  n.domain = "ai.gpuopt";
  n.name = base + "/int8";
  n.attrs = probe.attrs;
  n.attrs["channels_last"].i = 0;  // an Attribute is an int by default
  if (!activation.empty()) {
    n.attrs["activation"].kind = Attribute::Kind::kString;
    n.attrs["activation"].s = activation;
  }
  n.inputs = {dx->inputs[0], dw->inputs[0], dx->inputs[1], w_scale, bias};
  if (y_scale != kNoValue) n.inputs.push_back(y_scale);
  while (n.inputs.back() == kNoValue) n.inputs.pop_back();
  n.outputs = {out};
  for (const Node* a : absorbed) m.mark(a);
  g->nodes()[i] = std::move(n);
  ++stats->rewritten;
  stats->removed += static_cast<int>(absorbed.size());
  return true;
}

// DequantizeLinear(a) -> Add <- DequantizeLinear(b) [-> Relu] [-> QuantizeLinear] (a residual
// add: both int8 of one shape) as one Int8Add in place of node i.
bool fold_add(Graph* g, Matcher& m, size_t i, PassStats* stats) {
  const Node add = g->nodes()[i];
  if (add.inputs.size() != 2 || add.outputs.size() != 1) return false;
  const Node* da = act_dq(m, add.inputs[0]);
  const Node* db = act_dq(m, add.inputs[1]);
  if (!da || !db) return false;
  const ValueInfo& ai = g->value(da->inputs[0]).info;
  const ValueInfo& bi = g->value(db->inputs[0]).info;
  // Equal shapes, every dim known or one symbol (the batch): no broadcasting at run time.
  if (!ai.rank_known || !bi.rank_known || ai.shape != bi.shape ||
      std::count(ai.shape.begin(), ai.shape.end(), kUnknownDim) != 0)
    return false;
  if (!fp16_normal(*g->value(da->inputs[1]).constant) || !fp16_normal(*g->value(db->inputs[1]).constant)) return false;
  ValueId out = add.outputs[0], y_scale = kNoValue;
  std::vector<const Node*> absorbed;
  std::string activation;
  absorb_relu_and_quantize(m, *g, &out, &activation, &y_scale, &absorbed);
  Node n;
  n.op = Op::Int8Add;
  n.op_type = "Int8Add";
  n.domain = "ai.gpuopt";
  n.name = (add.name.empty() ? g->value(add.outputs[0]).name : add.name) + "/int8";
  if (!activation.empty()) {
    n.attrs["activation"].kind = Attribute::Kind::kString;
    n.attrs["activation"].s = activation;
  }
  n.inputs = {da->inputs[0], da->inputs[1], db->inputs[0], db->inputs[1]};
  if (y_scale != kNoValue) n.inputs.push_back(y_scale);
  n.outputs = {out};
  for (const Node* a : absorbed) m.mark(a);
  g->nodes()[i] = std::move(n);
  ++stats->rewritten;
  stats->removed += static_cast<int>(absorbed.size());
  return true;
}

}  // namespace

Result<PassStats> fold_qdq(Graph* g, bool convs) {
  PassStats stats;
  g->rebuild_producers();
  Matcher m(g);
  const size_t num_nodes = g->nodes().size();
  for (size_t i = 0; i < num_nodes; ++i) {
    if (convs && !m.drop()[i] && g->nodes()[i].domain.empty() && g->nodes()[i].op_type == "Conv") {
      fold_conv(g, m, i, &stats);
      continue;
    }
    if (convs && !m.drop()[i] && g->nodes()[i].domain.empty() && g->nodes()[i].op_type == "Add") {
      fold_add(g, m, i, &stats);
      continue;
    }
    const Node mm = g->nodes()[i];
    if (m.drop()[i] || !mm.domain.empty() || (mm.op_type != "MatMul" && mm.op_type != "Gemm") || mm.inputs.size() < 2) continue;
    const bool gemm = mm.op_type == "Gemm";
    if (gemm && (mm.attr_i("transA", 0) != 0 || mm.attr_f("alpha", 1.f) != 1.f)) continue;
    const Node* dx = act_dq(m, mm.inputs[0]);
    const Node* dw = m.producer(mm.inputs[1], "DequantizeLinear");
    if (!dx || !dw || dw->inputs.size() < 2) continue;
    const Tensor* wq = const_of(*g, dw->inputs[0]);
    const Tensor* sw = const_of(*g, dw->inputs[1]);
    if (!wq || wq->dtype() != DType::I8 || wq->rank() != 2 || !sw || sw->dtype() != DType::F32) continue;
    if (dw->inputs.size() > 2 && !all_zero(*g, dw->inputs[2])) continue;
    const bool tb = gemm && mm.attr_i("transB", 0) != 0;
    const int64_t k = tb ? wq->dim(1) : wq->dim(0), n = tb ? wq->dim(0) : wq->dim(1);
    int64_t axis = dw->attr_i("axis", 1);
    if (axis < 0) axis += 2;
    if (sw->numel() != 1 && !(sw->rank() == 1 && sw->numel() == n && axis == (tb ? 0 : 1))) continue;
    const ValueInfo& xi = g->value(mm.inputs[0]).info;
    if (!xi.rank_known || xi.shape.size() < (gemm ? 2u : 1u) || (gemm && xi.shape.size() != 2)) continue;
    if (dim_is_known(xi.shape.back()) && xi.shape.back() != k) continue;
    // Bias: Gemm's C, or a sole Add reader of the MatMul with a constant [N].
    ValueId bias = kNoValue, out = mm.outputs[0];
    std::vector<const Node*> absorbed;
    if (gemm && mm.inputs.size() > 2 && mm.inputs[2] != kNoValue) {
      bias = through_identities(m, mm.inputs[2]);
      const Tensor* c = const_of(*g, bias);
      if (!c || c->dtype() != DType::F32 || c->rank() != 1 || c->numel() != n || mm.attr_f("beta", 1.f) != 1.f) continue;
    } else if (!gemm) {
      if (const Node* add = m.sole_reader(out, "Add")) {
        const ValueId b = through_identities(m, Matcher::other(*add, out));
        const Tensor* c = const_of(*g, b);
        if (c && c->dtype() == DType::F32 && c->rank() == 1 && c->numel() == n) {
          bias = b;
          out = add->outputs[0];
          absorbed.push_back(add);
        }
      }
    }
    std::string activation;
    if (const Node* relu = m.sole_reader(out, "Relu")) {
      activation = "Relu";
      out = relu->outputs[0];
      absorbed.push_back(relu);
    }
    // The weight, transposed to [N, K].
    Tensor wt = Tensor::empty(DType::I8, {n, k});
    for (int64_t r = 0; r < n; ++r)
      for (int64_t c = 0; c < k; ++c) wt.data<int8_t>()[r * k + c] = tb ? wq->data<int8_t>()[r * k + c] : wq->data<int8_t>()[c * n + r];
    const std::string base = mm.name.empty() ? g->value(mm.outputs[0]).name : mm.name;
    const ValueId wv = g->add_constant(base + "/int8_weight", std::move(wt));
    Node q;
    q.op = Op::Int8Gemm;
    q.op_type = "Int8Gemm";
    q.domain = "ai.gpuopt";
    q.name = base + "/int8";
    q.inputs = {dx->inputs[0], wv, dx->inputs[1], dw->inputs[1]};
    if (bias != kNoValue) q.inputs.push_back(bias);
    if (!activation.empty()) {
      q.attrs["activation"].kind = Attribute::Kind::kString;
      q.attrs["activation"].s = activation;
    }
    q.outputs = {out};
    for (const Node* a : absorbed) m.mark(a);
    g->nodes()[i] = std::move(q);
    ++stats.rewritten;
    stats.removed += static_cast<int>(absorbed.size());
  }
  if (stats.rewritten == 0) return stats;
  GPUOPT_RETURN_IF_ERROR(m.erase_dropped());
  return stats;
}

}  // namespace gpuopt
