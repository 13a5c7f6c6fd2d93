// Int8Gemm (domain ai.gpuopt), written by the fold_qdq pass (src/passes/fold_qdq.cpp) from
// DequantizeLinear(x) -> MatMul/Gemm <- DequantizeLinear(w) [-> Add(bias)] [-> Relu], and given
// the rest of its epilogue by fuse_int8_epilogue (src/passes/fuse_int8_epilogue.cpp):
//
//   inputs  0 A int8 [..., K] (a quantized activation), 1 B int8 [N, K] (the weight, transposed),
//           2 a_scale (scalar), 3 b_scale (scalar or [N]), 4 bias ([N], optional),
//           5 residual (Y's shape, optional), 6 y_scale (scalar, optional); the float inputs
//           share one dtype, which is the output's unless y_scale is given (then int8).
//   attrs   activation: "", "Relu" or "Gelu" (with approximate "none" | "tanh")
//   v[..., n] = act(sum_k A[..., k] * B[n, k] * a_scale * b_scale[n] + bias[n]) + residual[..., n]
//   Y = v, or with y_scale saturate(round_half_to_even(v / y_scale)) as int8 (QuantizeLinear,
//   zero point 0: the quotient rounded to the scale's type first, quant_round.h)
//
// Zero points are 0 (symmetric int8, what gpuopt quantize writes and TensorRT requires). The
// reference accumulates exactly in int64, applies the scales, bias, activation and residual in
// double and rounds once.
#include "ops/quant/int8_gemm_attrs.h"
#include "ops/quant/quant_round.h"
#include "ops/common/nn_util.h"

#include <algorithm>
#include <cmath>

namespace gpuopt {

Status infer_Int8Gemm(InferContext& ctx) {
  GPUOPT_RETURN_IF_ERROR(nn::require_inputs(ctx, 4));
  GPUOPT_ASSIGN_OR_RETURN(const quant::Int8GemmAttrs at, quant::Int8GemmAttrs::read(ctx));
  for (size_t i : {0, 1})
    if (ctx.in(i).dtype != DType::Undefined && ctx.in(i).dtype != DType::I8)
      return ctx.error("input {} has dtype {}; expected i8", i, dtype_name(ctx.in(i).dtype));
  GPUOPT_RETURN_IF_ERROR(nn::require_float(ctx, 2, "a_scale"));
  for (size_t i = 3; i < 7; ++i)
    if (ctx.has_input(i)) GPUOPT_RETURN_IF_ERROR(nn::require_same_dtype(ctx, 2, i));
  ctx.outputs[0].dtype = at.int8_out ? DType::I8 : ctx.in(2).dtype;
  const ValueInfo& a = ctx.in(0);
  const ValueInfo& b = ctx.in(1);
  if (!a.rank_known || !b.rank_known) return Status::Ok();
  if (a.shape.empty() || b.shape.size() != 2) return ctx.error("A needs rank >= 1 and B rank 2 ([N, K])");
  if (dim_is_known(a.shape.back()) && dim_is_known(b.shape[1]) && a.shape.back() != b.shape[1])
    return ctx.error("A {} and B {} differ in K", shape_to_string(a.shape), shape_to_string(b.shape));
  ctx.outputs[0].rank_known = true;
  ctx.outputs[0].shape = a.shape;
  ctx.outputs[0].shape.back() = b.shape[0];
  if (at.residual && ctx.in(5).rank_known) {  // no broadcasting: the residual is Y's shape
    const Shape& r = ctx.in(5).shape;
    const Shape& y = ctx.outputs[0].shape;
    bool ok = r.size() == y.size();
    for (size_t i = 0; ok && i < r.size(); ++i) ok = !dim_is_known(r[i]) || !dim_is_known(y[i]) || r[i] == y[i];
    if (!ok) return ctx.error("residual {} is not the output's shape {}", shape_to_string(r), shape_to_string(y));
  }
  return Status::Ok();
}

Status cpu_Int8Gemm(KernelContext& ctx) {
  GPUOPT_ASSIGN_OR_RETURN(const quant::Int8GemmAttrs at, quant::Int8GemmAttrs::read(ctx));
  const Tensor& a = ctx.in(0);
  const Tensor& b = ctx.in(1);
  if (a.dtype() != DType::I8 || b.dtype() != DType::I8 || b.rank() != 2)
    return ctx.error("A {} and B {} must be i8, B of rank 2", a.describe(), b.describe());
  const int64_t n = b.dim(0), k = b.dim(1);
  if (a.rank() < 1 || a.dim(-1) != k) return ctx.error("A {} does not end in K = {}", a.describe(), k);
  const int64_t m = a.numel() / std::max<int64_t>(k, 1);
  const Tensor& bs = ctx.in(3);
  if (ctx.in(2).numel() != 1) return ctx.error("a_scale has {} values; expected 1", ctx.in(2).numel());
  if (bs.numel() != 1 && bs.numel() != n) return ctx.error("b_scale has {} values; expected 1 or {}", bs.numel(), n);
  if (at.bias && ctx.in(4).numel() != n) return ctx.error("bias has {} values; expected {}", ctx.in(4).numel(), n);
  if (at.residual && ctx.in(5).numel() != m * n)
    return ctx.error("residual {} does not have the output's {} values", ctx.in(5).describe(), m * n);
  if (at.int8_out && ctx.in(6).numel() != 1) return ctx.error("y_scale has {} values; expected 1", ctx.in(6).numel());
  const double sa = ctx.in(2).get_f64(0);
  const double ys = at.int8_out ? ctx.in(6).get_f64(0) : 1.0;
  const int8_t* A = a.data<int8_t>();
  const int8_t* B = b.data<int8_t>();
  std::vector<double> y(static_cast<size_t>(m * n));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      int64_t acc = 0;
      for (int64_t q = 0; q < k; ++q) acc += static_cast<int64_t>(A[i * k + q]) * B[j * k + q];
      double v = static_cast<double>(acc) * sa * bs.get_f64(bs.numel() == 1 ? 0 : j);
      if (at.bias) v += ctx.in(4).get_f64(j);
      v = quant::apply_gemm_act(at.act, v);
      if (at.residual) v += ctx.in(5).get_f64(i * n + j);
      y[static_cast<size_t>(i * n + j)] = v;
    }
  if (!at.int8_out) {
    nn::from_doubles(ctx.out(0), y);
    return Status::Ok();
  }
  int8_t* out = ctx.out(0).data<int8_t>();
  const DType calc = ctx.in(6).dtype();  // QuantizeLinear divides in the scale's type
  for (size_t i = 0; i < y.size(); ++i) out[i] = quant::quantize_int8(y[i], ys, calc);
  return Status::Ok();
}

double flops_Int8Gemm(const FlopsContext& ctx) {
  const double out = nn::est_numel(nn::flops_out(ctx, 0));
  return out < 0 ? 0 : 2 * out * nn::est_dim(nn::flops_in(ctx, 1), 1);
}

}  // namespace gpuopt
