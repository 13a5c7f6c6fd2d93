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
#include "passes/match.h"
#include "passes/passes.h"

namespace gpuopt {
namespace {

const Tensor* const_of(const Graph& g, ValueId v) {
  if (v == kNoValue || !g.value(v).constant) return nullptr;
  return &*g.value(v).constant;
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

}  // namespace

Result<PassStats> fold_qdq(Graph* g) {
  PassStats stats;
  g->rebuild_producers();
  Matcher m(g);
  const size_t num_nodes = g->nodes().size();
  for (size_t i = 0; i < num_nodes; ++i) {
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
      const Tensor* c = const_of(*g, mm.inputs[2]);
      if (!c || c->dtype() != DType::F32 || c->rank() != 1 || c->numel() != n || mm.attr_f("beta", 1.f) != 1.f) continue;
      bias = mm.inputs[2];
    } else if (!gemm) {
      if (const Node* add = m.sole_reader(out, "Add")) {
        const ValueId b = Matcher::other(*add, out);
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
  std::vector<bool> drop = m.drop();
  drop.resize(g->nodes().size(), false);
  erase_nodes(g, drop);
  GPUOPT_RETURN_IF_ERROR(g->topo_sort());
  return stats;
}

}  // namespace gpuopt
