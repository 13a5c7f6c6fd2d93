// Int8Gemm (domain ai.gpuopt), written by the fold_qdq pass (src/passes/fold_qdq.cpp) from
// DequantizeLinear(x) -> MatMul/Gemm <- DequantizeLinear(w) [-> Add(bias)] [-> Relu]:
//
//   inputs  A int8 [..., K] (a quantized activation), B int8 [N, K] (the weight, transposed),
//           a_scale (scalar), b_scale (scalar or [N]), bias ([N], optional); scales and bias
//           share one float dtype, which is the output's.
//   attr    activation: "" or "Relu"
//   Y[..., n] = act(sum_k A[..., k] * B[n, k] * a_scale * b_scale[n] + bias[n])
//
// Zero points are 0 (symmetric int8, what gpuopt quantize writes and TensorRT requires). The
// reference accumulates exactly in int64, applies the scales in double and rounds once.
#include "ops/quant/int8_common.h"
#include "ops/common/nn_util.h"

#include <algorithm>
#include <cmath>

namespace gpuopt {

using quant::check_relu_activation;

Status infer_Int8Gemm(InferContext& ctx) {
  GPUOPT_RETURN_IF_ERROR(nn::require_inputs(ctx, 4));
  GPUOPT_RETURN_IF_ERROR(check_relu_activation(ctx));
  for (size_t i : {0, 1})
    if (ctx.in(i).dtype != DType::Undefined && ctx.in(i).dtype != DType::I8)
      return ctx.error("input {} has dtype {}; expected i8", i, dtype_name(ctx.in(i).dtype));
  GPUOPT_RETURN_IF_ERROR(nn::require_float(ctx, 2, "a_scale"));
  GPUOPT_RETURN_IF_ERROR(nn::require_same_dtype(ctx, 2, 3));
  if (ctx.has_input(4)) GPUOPT_RETURN_IF_ERROR(nn::require_same_dtype(ctx, 2, 4));
  ctx.outputs[0].dtype = ctx.in(2).dtype;
  const ValueInfo& a = ctx.in(0);
  const ValueInfo& b = ctx.in(1);
  if (!a.rank_known || !b.rank_known) return Status::Ok();
  if (a.shape.empty() || b.shape.size() != 2) return ctx.error("A needs rank >= 1 and B rank 2 ([N, K])");
  if (dim_is_known(a.shape.back()) && dim_is_known(b.shape[1]) && a.shape.back() != b.shape[1])
    return ctx.error("A {} and B {} differ in K", shape_to_string(a.shape), shape_to_string(b.shape));
  ctx.outputs[0].rank_known = true;
  ctx.outputs[0].shape = a.shape;
  ctx.outputs[0].shape.back() = b.shape[0];
  return Status::Ok();
}

Status cpu_Int8Gemm(KernelContext& ctx) {
  GPUOPT_RETURN_IF_ERROR(check_relu_activation(ctx));
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
  if (ctx.has_input(4) && ctx.in(4).numel() != n) return ctx.error("bias has {} values; expected {}", ctx.in(4).numel(), n);
  const bool relu = ctx.node.attr_s("activation", "") == "Relu";
  const double sa = ctx.in(2).get_f64(0);
  const int8_t* A = a.data<int8_t>();
  const int8_t* B = b.data<int8_t>();
  std::vector<double> y(static_cast<size_t>(m * n));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      int64_t acc = 0;
      for (int64_t q = 0; q < k; ++q) acc += static_cast<int64_t>(A[i * k + q]) * B[j * k + q];
      double v = static_cast<double>(acc) * sa * bs.get_f64(bs.numel() == 1 ? 0 : j);
      if (ctx.has_input(4)) v += ctx.in(4).get_f64(j);
      y[static_cast<size_t>(i * n + j)] = relu ? std::max(v, 0.0) : v;
    }
  nn::from_doubles(ctx.out(0), y);
  return Status::Ok();
}

double flops_Int8Gemm(const FlopsContext& ctx) {
  const double out = nn::est_numel(nn::flops_out(ctx, 0));
  return out < 0 ? 0 : 2 * out * nn::est_dim(nn::flops_in(ctx, 1), 1);
}

}  // namespace gpuopt
