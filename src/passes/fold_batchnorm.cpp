// Inference BatchNormalization after a Conv folds into the Conv's weights and bias:
//
//   s[o] = scale[o] / sqrt(var[o] + epsilon)
//   W'[o, ...] = W[o, ...] * s[o]          b'[o] = (b[o] - mean[o]) * s[o] + B[o]
//
// One node and one full pass over the activations fewer per folded pair (ResNet-50 has 53), and
// the Conv's bias epilogue does the rest. Folded only when it is exact up to rounding: every BN
// parameter and the Conv weight (and bias) are constants of one float dtype, BN runs in inference
// mode on per-channel (1-D) parameters, and nothing else reads the Conv's output. The arithmetic
// is done in double and rounded once to the weight's dtype.
#include "passes/passes.h"

#include <cmath>

namespace gpuopt {
namespace {

bool is_float(DType t) { return t == DType::F32 || t == DType::F16 || t == DType::BF16 || t == DType::F64; }

const Tensor* constant_of(const Graph& g, const Node& n, size_t i) {
  if (i >= n.inputs.size() || n.inputs[i] == kNoValue) return nullptr;
  const Value& v = g.value(n.inputs[i]);
  return v.constant ? &*v.constant : nullptr;
}

}  // namespace

Result<PassStats> fold_batchnorm(Graph* g) {
  PassStats stats;
  g->rebuild_producers();  // Value::producer is read below; earlier passes edited the node list
  const auto consumers = g->consumers();
  std::vector<bool> drop(g->nodes().size(), false);

  for (size_t bn_i = 0; bn_i < g->nodes().size(); ++bn_i) {
    const Node& bn = g->nodes()[bn_i];
    if (bn.op_type != "BatchNormalization" || !bn.domain.empty() || bn.inputs.size() != 5) continue;
    if (bn.attr_i("training_mode", 0) != 0 || bn.attr_i("spatial", 1) != 1) continue;
    bool extra_outputs = false;
    for (size_t o = 1; o < bn.outputs.size(); ++o)
      extra_outputs |= bn.outputs[o] != kNoValue && !consumers[static_cast<size_t>(bn.outputs[o])].empty();
    if (extra_outputs || bn.inputs[0] == kNoValue) continue;
    const ValueId x = bn.inputs[0];
    const int32_t conv_i = g->value(x).producer;
    if (conv_i < 0 || drop[static_cast<size_t>(conv_i)]) continue;
    const Node& conv = g->nodes()[static_cast<size_t>(conv_i)];
    if (conv.op_type != "Conv" || !conv.domain.empty() || conv.inputs.size() < 2) continue;
    if (g->value(x).is_graph_output || consumers[static_cast<size_t>(x)].size() != 1) continue;

    const Tensor* w = constant_of(*g, conv, 1);
    const Tensor* cb = constant_of(*g, conv, 2);
    const bool has_bias = conv.inputs.size() > 2 && conv.inputs[2] != kNoValue;
    const Tensor* p[4];
    bool ok = w && w->rank() >= 1 && is_float(w->dtype()) && (!has_bias || cb);
    for (int k = 0; ok && k < 4; ++k) {
      p[k] = constant_of(*g, bn, static_cast<size_t>(k + 1));
      ok = p[k] && p[k]->dtype() == w->dtype() && p[k]->rank() == 1 && p[k]->dim(0) == w->dim(0);
    }
    if (!ok || (cb && (cb->dtype() != w->dtype() || cb->rank() != 1 || cb->dim(0) != w->dim(0)))) continue;

    const int64_t cout = w->dim(0);
    const int64_t per = cout ? w->numel() / cout : 0;
    const double eps = bn.attr_f("epsilon", 1e-5f);
    Tensor nw = Tensor::empty(w->dtype(), w->shape());
    Tensor nb = Tensor::empty(w->dtype(), Shape{cout});
    for (int64_t o = 0; o < cout; ++o) {
      const double s = p[0]->get_f64(o) / std::sqrt(p[3]->get_f64(o) + eps);
      const double b = cb ? cb->get_f64(o) : 0.0;
      nb.set_f64(o, (b - p[2]->get_f64(o)) * s + p[1]->get_f64(o));
      if (w->dtype() == DType::F32) {
        const float* src = w->data<float>() + o * per;
        float* dst = nw.data<float>() + o * per;
        for (int64_t j = 0; j < per; ++j) dst[j] = static_cast<float>(static_cast<double>(src[j]) * s);
      } else {
        for (int64_t j = 0; j < per; ++j) nw.set_f64(o * per + j, w->get_f64(o * per + j) * s);
      }
    }
    const std::string base = conv.name.empty() ? g->value(bn.outputs[0]).name : conv.name;
    const ValueId wv = g->add_constant(base + "/W_bn_folded", std::move(nw));
    const ValueId bv = g->add_constant(base + "/B_bn_folded", std::move(nb));
    Node& c = g->nodes()[static_cast<size_t>(conv_i)];  // index again: add_constant may grow values only
    c.inputs.resize(3);
    c.inputs[1] = wv;
    c.inputs[2] = bv;
    c.outputs[0] = g->nodes()[bn_i].outputs[0];  // the Conv now writes what the BN wrote
    drop[bn_i] = true;
    ++stats.removed;
  }
  if (stats.removed > 0) erase_nodes(g, drop);
  return stats;
}

}  // namespace gpuopt
