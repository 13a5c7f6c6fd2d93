// SkipLayerNormalization (ONNX Runtime contrib op, domain com.microsoft): s = input + skip [+ bias],
// output = LayerNorm(s) over the last axis * gamma [+ beta]; optional outputs mean and inv_std_var
// (float, [.., 1]) and input_skip_bias_sum (s). The fuse_epilogue pass writes it for a residual
// Add feeding LayerNormalization, so the GPU reads both addends once and never writes the sum
// unless something else reads it (pre-LN transformers do: output 3). skip broadcasts to input
// ([B,S,H], [1,S,H] or [S,H], as ORT allows). Statistics in double, as LayerNormalization's.
//
// gpuopt's extension, output 4 (the output's shape), for the quantized GEMMs reading the
// normalised rows, so they skip a quantize pass of their own:
//  - attribute fp8_scale (float > 0; --precision fp8, written by the fp8 rewrite, passes/fp8.h):
//    u8 e4m3 codes of output / fp8_scale (output 0 as stored, then divided in f32: what Fp8Gemm's
//    quantize of it would give);
//  - attribute int8_scale (float > 0; --precision int8 on the GPU, fuse_int8_norm in
//    passes/fuse_int8_epilogue.cpp, from the QuantizeLinear it replaces): i8, QuantizeLinear of
//    output 0 as stored with the scale in the output's float type, zero point 0.
#include "ops/common/broadcast.h"
#include "ops/common/nn_util.h"
#include "ops/quant/fp8_e4m3.h"
#include "ops/quant/quant_round.h"

#include <cmath>

namespace gpuopt {

Status infer_SkipLayerNormalization(InferContext& ctx) {
  GPUOPT_RETURN_IF_ERROR(nn::require_inputs(ctx, 3));
  GPUOPT_RETURN_IF_ERROR(nn::require_float(ctx, 0, "input"));
  for (size_t i = 1; i <= 4; ++i)
    if (ctx.has_input(i)) GPUOPT_RETURN_IF_ERROR(nn::require_same_dtype(ctx, 0, i));
  const ValueInfo& x = ctx.in(0);
  if (x.rank_known) {
    if (x.shape.empty()) return ctx.error("input is a scalar; expected at least 1-D");
    const int64_t h = x.shape.back();
    if (ctx.in(1).rank_known && !broadcastable_to(ctx.in(1).shape, x.shape))
      return ctx.error("skip {} does not broadcast to input {}", shape_to_string(ctx.in(1).shape), shape_to_string(x.shape));
    static constexpr const char* kNames[] = {"", "", "gamma", "beta", "bias"};
    for (size_t i = 2; i <= 4; ++i) {
      if (!ctx.has_input(i) || !ctx.in(i).rank_known) continue;
      const Shape& p = ctx.in(i).shape;
      if (p.size() != 1 || (dim_is_known(p[0]) && dim_is_known(h) && p[0] != h))
        return ctx.error("{} {} must be 1-D with the hidden size {}", kNames[i], shape_to_string(p), h);
    }
  }
  if (ctx.outputs.size() > 5) return ctx.error("{} outputs; expected at most 5", ctx.outputs.size());
  const bool fp8 = ctx.node.has_attr("fp8_scale"), int8 = ctx.node.has_attr("int8_scale");
  if ((ctx.outputs.size() > 4) != (fp8 || int8) || (fp8 && int8))
    return ctx.error("output 4 goes with one of the attributes fp8_scale (e4m3) and int8_scale");
  if (fp8 || int8) {
    const float s = ctx.node.attr_f(fp8 ? "fp8_scale" : "int8_scale", 0.f);
    if (!(std::isfinite(s) && s > 0)) return ctx.error("{} {} must be finite and > 0", fp8 ? "fp8_scale" : "int8_scale", s);
  }
  for (size_t o = 0; o < ctx.outputs.size(); ++o) {
    ValueInfo& v = ctx.outputs[o];
    v.dtype = o == 1 || o == 2 ? DType::F32 : o == 4 ? (int8 ? DType::I8 : DType::U8) : x.dtype;
    v.rank_known = x.rank_known;
    v.shape = x.shape;
    if ((o == 1 || o == 2) && !v.shape.empty()) v.shape.back() = 1;
  }
  return Status::Ok();
}

Status cpu_SkipLayerNormalization(KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  if (x.rank() == 0) return ctx.error("input is a scalar; expected at least 1-D");
  const int64_t inner = x.shape().back();
  const int64_t outer = inner ? x.numel() / inner : 0;
  const double eps = ctx.node.attr_f("epsilon", 1e-12f);
  const std::vector<double> xv = nn::to_doubles(x), sk = nn::to_doubles(ctx.in(1)), gamma = nn::to_doubles(ctx.in(2));
  if (!broadcastable_to(ctx.in(1).shape(), x.shape()))
    return ctx.error("skip {} does not broadcast to input {}", shape_to_string(ctx.in(1).shape()), shape_to_string(x.shape()));
  const std::vector<int64_t> so = broadcast_offsets(ctx.in(1).shape(), x.shape());
  std::vector<double> beta, bias;
  if (ctx.has_input(3)) beta = nn::to_doubles(ctx.in(3));
  if (ctx.has_input(4)) bias = nn::to_doubles(ctx.in(4));
  const auto h = static_cast<size_t>(inner);
  if (gamma.size() != h || (!beta.empty() && beta.size() != h) || (!bias.empty() && bias.size() != h))
    return ctx.error("gamma, beta and bias must have the hidden size {}", inner);
  std::vector<double> sum(xv.size()), y(xv.size()), means(static_cast<size_t>(outer)), invs(static_cast<size_t>(outer));
  for (size_t i = 0; i < xv.size(); ++i) sum[i] = xv[i] + sk[so[i]] + (bias.empty() ? 0.0 : bias[i % h]);
  for (int64_t r = 0; r < outer; ++r) {
    const double* s = sum.data() + r * inner;
    double m = 0;
    for (int64_t k = 0; k < inner; ++k) m += s[k];
    m /= static_cast<double>(inner);
    double var = 0;
    for (int64_t k = 0; k < inner; ++k) var += (s[k] - m) * (s[k] - m);
    const double inv = 1.0 / std::sqrt(var / static_cast<double>(inner) + eps);
    means[r] = m;
    invs[r] = inv;
    for (int64_t k = 0; k < inner; ++k)
      y[r * inner + k] = (s[k] - m) * inv * gamma[k] + (beta.empty() ? 0.0 : beta[k]);
  }
  nn::from_doubles(ctx.out(0), y);
  if (ctx.outputs.size() > 1 && ctx.outputs[1]) nn::from_doubles(ctx.out(1), means);
  if (ctx.outputs.size() > 2 && ctx.outputs[2]) nn::from_doubles(ctx.out(2), invs);
  if (ctx.outputs.size() > 3 && ctx.outputs[3]) nn::from_doubles(ctx.out(3), sum);
  if (ctx.outputs.size() > 4 && ctx.outputs[4]) {
    const bool int8 = ctx.node.has_attr("int8_scale");
    const float scale = ctx.node.attr_f(int8 ? "int8_scale" : "fp8_scale", 0.f);
    if (!(std::isfinite(scale) && scale > 0)) return ctx.error("output 4's scale {} must be finite and > 0", scale);
    const Tensor& out = ctx.out(0);
    if (int8) {  // the scale as a constant of the output's type would hold it, then QuantizeLinear
      const DType t = out.dtype();
      const double s = quant::round_to_float_type(t, scale);
      int8_t* q = ctx.out(4).data<int8_t>();
      for (int64_t i = 0; i < out.numel(); ++i) q[i] = quant::quantize_int8(out.get_f64(i), s, t);
    } else {
      uint8_t* q = ctx.out(4).data<uint8_t>();
      for (int64_t i = 0; i < out.numel(); ++i) q[i] = fp8::f32_to_e4m3(static_cast<float>(out.get_f64(i)) / scale);
    }
  }
  return Status::Ok();
}

double flops_SkipLayerNormalization(const FlopsContext& ctx) {
  const double n = nn::est_numel(nn::flops_in(ctx, 0));
  return n < 0 ? 0 : 9 * n;
}

}  // namespace gpuopt
