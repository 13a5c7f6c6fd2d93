// Int8Add (domain ai.gpuopt), written by the fold_qdq pass from a residual add of a QDQ model:
//
//   DequantizeLinear(A, a_scale) -> Add <- DequantizeLinear(B, b_scale) [-> Relu] [-> QuantizeLinear(y_scale)]
//
//   inputs  A int8, a_scale (scalar), B int8 of A's shape, b_scale (scalar), y_scale (scalar,
//           optional); the scales share one float dtype.
//   attr    activation: "" or "Relu"
//   v = act(A * a_scale + B * b_scale); Y = saturate(round_half_even(v / y_scale)) as int8 when
//   y_scale is given, else v in the scales' float dtype.
//
// Elementwise on equal shapes, so any layout will do (layout_nhwc takes it into a region). Zero
// points are 0. The reference computes in double: against the unfolded graph (f32 products and
// sum) an int8 output differs by at most one step, where that rounding moves v / y_scale across
// a half.
#include "ops/quant/int8_common.h"
#include "ops/common/nn_util.h"

#include <algorithm>
#include <cmath>

namespace gpuopt {

using quant::check_relu_activation;

Status infer_Int8Add(InferContext& ctx) {
  GPUOPT_RETURN_IF_ERROR(nn::require_inputs(ctx, 4));
  GPUOPT_RETURN_IF_ERROR(check_relu_activation(ctx));
  for (size_t i : {0, 2})
    if (ctx.in(i).dtype != DType::Undefined && ctx.in(i).dtype != DType::I8)
      return ctx.error("input {} has dtype {}; expected i8", i, dtype_name(ctx.in(i).dtype));
  GPUOPT_RETURN_IF_ERROR(nn::require_float(ctx, 1, "a_scale"));
  GPUOPT_RETURN_IF_ERROR(nn::require_same_dtype(ctx, 1, 3));
  if (ctx.has_input(4)) GPUOPT_RETURN_IF_ERROR(nn::require_same_dtype(ctx, 1, 4));
  const ValueInfo& a = ctx.in(0);
  const ValueInfo& b = ctx.in(2);
  ValueInfo& y = ctx.outputs[0];
  y.dtype = ctx.has_input(4) ? DType::I8 : ctx.in(1).dtype;
  if (a.rank_known && b.rank_known) {
    bool differ = a.shape.size() != b.shape.size();
    for (size_t d = 0; !differ && d < a.shape.size(); ++d)
      differ = dim_is_known(a.shape[d]) && dim_is_known(b.shape[d]) && a.shape[d] != b.shape[d];
    if (differ) return ctx.error("A {} and B {} differ in shape", shape_to_string(a.shape), shape_to_string(b.shape));
  }
  if (a.rank_known) {
    y.rank_known = true;
    y.shape = a.shape;
  }
  return Status::Ok();
}

Status cpu_Int8Add(KernelContext& ctx) {
  GPUOPT_RETURN_IF_ERROR(check_relu_activation(ctx));
  const Tensor& a = ctx.in(0);
  const Tensor& b = ctx.in(2);
  if (a.dtype() != DType::I8 || b.dtype() != DType::I8 || a.shape() != b.shape())
    return ctx.error("A {} and B {} must be i8 of one shape", a.describe(), b.describe());
  for (size_t i : {1, 3, 4})
    if (ctx.has_input(i) && ctx.in(i).numel() != 1) return ctx.error("input {} has {} values; expected 1", i, ctx.in(i).numel());
  const bool relu = ctx.node.attr_s("activation", "") == "Relu", quant = ctx.has_input(4);
  const double sa = ctx.in(1).get_f64(0), sb = ctx.in(3).get_f64(0), sy = quant ? ctx.in(4).get_f64(0) : 1.0;
  const int8_t* A = a.data<int8_t>();
  const int8_t* B = b.data<int8_t>();
  std::vector<double> y(static_cast<size_t>(a.numel()));
  for (size_t i = 0; i < y.size(); ++i) {
    double v = A[i] * sa + B[i] * sb;
    if (relu) v = std::max(v, 0.0);
    y[i] = quant ? std::clamp(std::nearbyint(v / sy), -128.0, 127.0) : v;
  }
  nn::from_doubles(ctx.out(0), y);
  return Status::Ok();
}

double flops_Int8Add(const FlopsContext& ctx) {
  const double out = nn::est_numel(nn::flops_out(ctx, 0));
  return out < 0 ? 0 : out;
}

}  // namespace gpuopt
