// Recurrent-state sequence ops (opset 27): CausalConvWithState (depthwise causal conv1d with a
// carried left context and optional fused SiLU) and LinearAttention (linear / gated / delta /
// gated-delta state updates, grouped query heads). Computed in double; the intermediate
// roundings the ONNX reference does (conv output to the input dtype before SiLU) are kept so
// f16 results round the same way.
#include "ops/common/nn_util.h"
#include "ops/common/tensor_util.h"

#include <cmath>

namespace gpuopt {

namespace {

// Rounds v to dtype dt (f16/bf16/f32) and back, like an intermediate numpy astype.
double round_to_dtype(double v, DType dt) {
  switch (dt) {
    case DType::F32: return static_cast<double>(static_cast<float>(v));
    case DType::F16: return static_cast<double>(static_cast<float>(Half(nn::to_float_round_odd(v))));
    case DType::BF16: return static_cast<double>(static_cast<float>(BFloat16(nn::to_float_round_odd(v))));
    default: return v;
  }
}

}  // namespace

// ---- CausalConvWithState -------------------------------------------------------------------------
// Inputs: input [B, C, L], weight [C, 1, K], bias [C] (optional), past_state [B, C, K-1] (optional).
// Outputs: output [B, C, L], present_state [B, C, K-1] (the last K-1 positions of past ++ input).

Status infer_CausalConvWithState(InferContext& ctx) {
  GPUOPT_RETURN_IF_ERROR(tensor_util::check_inputs(ctx, 2, 4));
  for (size_t i = 0; i < 4; ++i)
    if (ctx.has_input(i)) GPUOPT_RETURN_IF_ERROR(nn::require_float(ctx, i, i == 0 ? "input" : i == 1 ? "weight" : i == 2 ? "bias" : "past_state"));
  const std::string act = ctx.node.attr_s("activation", "none");
  if (act != "none" && act != "silu" && act != "swish") return ctx.error("activation '{}' is not none, silu or swish", act);
  const ValueInfo& x = ctx.in(0);
  const ValueInfo& w = ctx.in(1);
  if (x.rank_known && x.shape.size() != 3) return ctx.error("input must be [batch, channels, length], got rank {}", x.shape.size());
  if (w.rank_known && (w.shape.size() != 3 || (w.shape[1] >= 0 && w.shape[1] != 1)))
    return ctx.error("weight must be [channels, 1, kernel], got {}", dims_string(w.shape));
  if (x.rank_known && w.rank_known && x.shape[1] >= 0 && w.shape[0] >= 0 && x.shape[1] != w.shape[0])
    return ctx.error("weight has {} channels, input {}", w.shape[0], x.shape[1]);
  const int64_t K = w.rank_known && w.shape.size() == 3 ? w.shape[2] : kUnknownDim;
  if (K == 0) return ctx.error("kernel size must be positive");
  if (x.rank_known) {
    tensor_util::set_output(ctx, 0, x.dtype, x.shape);
    tensor_util::set_output(ctx, 1, x.dtype, {x.shape[0], x.shape[1], K >= 0 ? K - 1 : kUnknownDim});
  } else {
    tensor_util::set_output_rank(ctx, 0, x.dtype, 3);
    tensor_util::set_output_rank(ctx, 1, x.dtype, 3);
  }
  return Status::Ok();
}

Status cpu_CausalConvWithState(KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  const Tensor& w = ctx.in(1);
  const int64_t B = x.dim(0), C = x.dim(1), L = x.dim(2), K = w.dim(2), P = K - 1, T = L + P;
  if (w.dim(0) != C) return ctx.error("weight has {} channels, input {}", w.dim(0), C);
  if (ctx.has_input(2) && ctx.in(2).numel() != C) return ctx.error("bias has {} values for {} channels", ctx.in(2).numel(), C);
  if (ctx.has_input(3) && ctx.in(3).shape() != Shape{B, C, P})
    return ctx.error("past_state {} must be [{}, {}, {}]", ctx.in(3).describe(), B, C, P);
  const std::vector<double> xv = nn::to_doubles(x), wv = nn::to_doubles(w);
  const std::vector<double> bv = ctx.has_input(2) ? nn::to_doubles(ctx.in(2)) : std::vector<double>(C, 0.0);
  const std::vector<double> pv = ctx.has_input(3) ? nn::to_doubles(ctx.in(3)) : std::vector<double>(B * C * P, 0.0);
  const bool silu = ctx.node.attr_s("activation", "none") != "none";
  std::vector<double> y(static_cast<size_t>(B * C * L)), st(static_cast<size_t>(B * C * P));
  std::vector<double> padded(static_cast<size_t>(T));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t c = 0; c < C; ++c) {
      const int64_t bc = b * C + c;
      for (int64_t t = 0; t < P; ++t) padded[t] = pv[bc * P + t];
      for (int64_t t = 0; t < L; ++t) padded[P + t] = xv[bc * L + t];
      for (int64_t t = 0; t < L; ++t) {
        double s = bv[c];
        for (int64_t k = 0; k < K; ++k) s += wv[c * K + k] * padded[t + k];
        if (silu) {
          s = round_to_dtype(s, x.dtype());
          s = s / (1.0 + std::exp(-s));
        }
        y[bc * L + t] = s;
      }
      for (int64_t t = 0; t < P; ++t) st[bc * P + t] = padded[T - P + t];
    }
  nn::from_doubles(ctx.out(0), y);
  if (ctx.outputs.size() > 1 && ctx.outputs[1]) nn::from_doubles(ctx.out(1), st);
  return Status::Ok();
}

double flops_CausalConvWithState(const FlopsContext& ctx) {
  const double n = nn::est_numel(nn::flops_out(ctx, 0));
  return n < 0 ? 0 : n * 2 * nn::est_dim(nn::flops_in(ctx, 1), 2);
}

// ---- LinearAttention ------------------------------------------------------------------------------
// Inputs: query [B, T, Hq*Dk], key [B, T, Hkv*Dk], value [B, T, Hkv*Dv], past_state
// [B, Hkv, Dk, Dv], decay [B, T, Hkv or Hkv*Dk] (gated rules), beta [B, T, Hkv or 1] (delta rules).
// Outputs: output [B, T, Hq*Dv], present_state [B, Hkv, Dk, Dv].

namespace {
struct LinAttn {
  int64_t hq = 0, hkv = 0;
  bool gating = false, delta = false;
};

Result<LinAttn> lin_attn_attrs(const Node& node, bool has_decay, bool has_beta) {
  LinAttn a;
  if (!node.has_attr("q_num_heads") || !node.has_attr("kv_num_heads"))
    return Status::InvalidArgument("{}: attributes q_num_heads and kv_num_heads are required", node_label(node));
  a.hq = node.attr_i("q_num_heads", 0);
  a.hkv = node.attr_i("kv_num_heads", 0);
  if (a.hq <= 0 || a.hkv <= 0 || a.hq % a.hkv != 0)
    return Status::InvalidArgument("{}: q_num_heads {} must be a positive multiple of kv_num_heads {}", node_label(node), a.hq, a.hkv);
  const std::string rule = node.attr_s("update_rule", "gated_delta");
  if (rule != "linear" && rule != "gated" && rule != "delta" && rule != "gated_delta")
    return Status::InvalidArgument("{}: update_rule '{}' is not linear, gated, delta or gated_delta", node_label(node), rule);
  a.gating = rule == "gated" || rule == "gated_delta";
  a.delta = rule == "delta" || rule == "gated_delta";
  if (a.gating != has_decay)
    return Status::InvalidArgument("{}: update_rule '{}' {} the decay input", node_label(node), rule, a.gating ? "requires" : "forbids");
  if (a.delta != has_beta)
    return Status::InvalidArgument("{}: update_rule '{}' {} the beta input", node_label(node), rule, a.delta ? "requires" : "forbids");
  return a;
}
}  // namespace

Status infer_LinearAttention(InferContext& ctx) {
  GPUOPT_RETURN_IF_ERROR(tensor_util::check_inputs(ctx, 3, 6));
  for (size_t i = 0; i < 6; ++i)
    if (ctx.has_input(i)) GPUOPT_RETURN_IF_ERROR(nn::require_float(ctx, i, "input"));
  GPUOPT_ASSIGN_OR_RETURN(LinAttn a, lin_attn_attrs(ctx.node, ctx.has_input(4), ctx.has_input(5)));
  const ValueInfo& q = ctx.in(0);
  const ValueInfo& k = ctx.in(1);
  const ValueInfo& v = ctx.in(2);
  for (const ValueInfo* t : {&q, &k, &v})
    if (t->rank_known && t->shape.size() != 3) return ctx.error("query, key and value must be rank 3 [B, T, H*D]");
  int64_t dk = kUnknownDim, dv = kUnknownDim;
  if (q.rank_known && q.shape[2] >= 0) {
    if (q.shape[2] % a.hq != 0) return ctx.error("query width {} is not divisible by q_num_heads {}", q.shape[2], a.hq);
    dk = q.shape[2] / a.hq;
  }
  if (k.rank_known && k.shape[2] >= 0 && dk >= 0 && k.shape[2] != dk * a.hkv)
    return ctx.error("key width {} must be kv_num_heads x {} = {}", k.shape[2], dk, dk * a.hkv);
  if (v.rank_known && v.shape[2] >= 0) {
    if (v.shape[2] % a.hkv != 0) return ctx.error("value width {} is not divisible by kv_num_heads {}", v.shape[2], a.hkv);
    dv = v.shape[2] / a.hkv;
  }
  const int64_t B = q.rank_known ? q.shape[0] : kUnknownDim, T = q.rank_known ? q.shape[1] : kUnknownDim;
  tensor_util::set_output(ctx, 0, q.dtype, {B, T, dv >= 0 ? dv * a.hq : kUnknownDim});
  tensor_util::set_output(ctx, 1, ctx.has_input(3) ? ctx.in(3).dtype : q.dtype, {B, a.hkv, dk, dv});
  return Status::Ok();
}

// Per time step t and kv head h (state S: Dk x Dv):
//   gated:  S *= exp(decay_t)            (per head, or per key row)
//   delta:  v_t = beta_t * (v_t - S^T k_t)
//   S += k_t v_t^T;  out_t (each query head of the group) = scale * q_t^T S
// scale = 1/sqrt(Dk) unless the attribute gives a non-zero one.
Status cpu_LinearAttention(KernelContext& ctx) {
  GPUOPT_ASSIGN_OR_RETURN(LinAttn a, lin_attn_attrs(ctx.node, ctx.has_input(4), ctx.has_input(5)));
  const Tensor& q = ctx.in(0);
  const Tensor& k = ctx.in(1);
  const Tensor& v = ctx.in(2);
  const int64_t B = q.dim(0), T = q.dim(1), Dk = q.dim(2) / a.hq, Dv = v.dim(2) / a.hkv, G = a.hq / a.hkv;
  if (k.dim(0) != B || v.dim(0) != B || k.dim(1) != T || v.dim(1) != T || k.dim(2) != a.hkv * Dk)
    return ctx.error("query {}, key {} and value {} do not agree", q.describe(), k.describe(), v.describe());
  const std::vector<double> qv = nn::to_doubles(q), kv = nn::to_doubles(k), vv = nn::to_doubles(v);
  std::vector<double> S(static_cast<size_t>(B * a.hkv * Dk * Dv), 0.0);
  if (ctx.has_input(3)) {
    if (ctx.in(3).shape() != Shape{B, a.hkv, Dk, Dv})
      return ctx.error("past_state {} must be [{}, {}, {}, {}]", ctx.in(3).describe(), B, a.hkv, Dk, Dv);
    S = nn::to_doubles(ctx.in(3));
  }
  std::vector<double> dec, bet;
  int64_t dec_w = 0, bet_w = 0;
  if (a.gating) {
    const Tensor& d = ctx.in(4);
    dec_w = d.rank() == 3 ? d.dim(2) : -1;
    if (d.rank() != 3 || d.dim(0) != B || d.dim(1) != T || (dec_w != a.hkv && dec_w != a.hkv * Dk))
      return ctx.error("decay {} must be [{}, {}, {} or {}]", d.describe(), B, T, a.hkv, a.hkv * Dk);
    dec = nn::to_doubles(d);
  }
  if (a.delta) {
    const Tensor& bt = ctx.in(5);
    bet_w = bt.rank() == 3 ? bt.dim(2) : -1;
    if (bt.rank() != 3 || bt.dim(0) != B || bt.dim(1) != T || (bet_w != a.hkv && bet_w != 1))
      return ctx.error("beta {} must be [{}, {}, {} or 1]", bt.describe(), B, T, a.hkv);
    bet = nn::to_doubles(bt);
  }
  const double sc_attr = ctx.node.attr_f("scale", 0.0f);
  const double scale = sc_attr == 0.0 ? 1.0 / std::sqrt(static_cast<double>(Dk)) : sc_attr;
  std::vector<double> out(static_cast<size_t>(B * T * a.hq * Dv));
  std::vector<double> vt(static_cast<size_t>(Dv));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t)
      for (int64_t h = 0; h < a.hkv; ++h) {
        double* s = S.data() + (b * a.hkv + h) * Dk * Dv;
        const double* kt = kv.data() + (b * T + t) * a.hkv * Dk + h * Dk;
        const double* vsrc = vv.data() + (b * T + t) * a.hkv * Dv + h * Dv;
        if (a.gating)
          for (int64_t i = 0; i < Dk; ++i) {
            const double g = dec_w == a.hkv ? dec[(b * T + t) * a.hkv + h] : dec[(b * T + t) * a.hkv * Dk + h * Dk + i];
            const double e = std::exp(g);
            for (int64_t j = 0; j < Dv; ++j) s[i * Dv + j] *= e;
          }
        for (int64_t j = 0; j < Dv; ++j) vt[j] = vsrc[j];
        if (a.delta) {
          const double be = bet[(b * T + t) * bet_w + (bet_w == 1 ? 0 : h)];
          for (int64_t j = 0; j < Dv; ++j) {
            double r = 0;
            for (int64_t i = 0; i < Dk; ++i) r += s[i * Dv + j] * kt[i];
            vt[j] = be * (vt[j] - r);
          }
        }
        for (int64_t i = 0; i < Dk; ++i)
          for (int64_t j = 0; j < Dv; ++j) s[i * Dv + j] += kt[i] * vt[j];
        for (int64_t g = 0; g < G; ++g) {
          const int64_t hq = h * G + g;
          const double* qt = qv.data() + (b * T + t) * a.hq * Dk + hq * Dk;
          for (int64_t j = 0; j < Dv; ++j) {
            double o = 0;
            for (int64_t i = 0; i < Dk; ++i) o += qt[i] * s[i * Dv + j];
            out[((b * T + t) * a.hq + hq) * Dv + j] = scale * o;
          }
        }
      }
  nn::from_doubles(ctx.out(0), out);
  if (ctx.outputs.size() > 1 && ctx.outputs[1]) nn::from_doubles(ctx.out(1), S);
  return Status::Ok();
}

double flops_LinearAttention(const FlopsContext& ctx) {
  const double n = nn::est_numel(nn::flops_out(ctx, 0));
  return n < 0 ? 0 : n * 6 * nn::est_dim(nn::flops_out(ctx, 1), 2);
}

}  // namespace gpuopt
