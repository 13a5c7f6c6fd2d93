// Fp8Gemm (domain ai.gpuopt), written by the fp8 rewrite (src/passes/fp8_gemm.cpp, gpuopt run
// --precision fp8) from a MatMul/Gemm whose weight is a constant:
//
//   inputs  A [..., K]: float (f32, f16 or bf16: the activation) or u8 (e4m3 bit patterns of
//           A / a_scale, what a chained Fp8Gemm wrote), B u8 [N, K] (the weight, transposed, as
//           e4m3fn bit patterns: fp8_e4m3.h), bias ([N], float; A's dtype when A is float;
//           required when A is u8: its dtype is the output's)
//   attrs   a_scale, b_scale (floats > 0: per-tensor scales, amax / 448 from calibration),
//           activation "", "Relu" or "Gelu" (approximate "none" or "tanh", as ONNX Gelu),
//           y_scale (optional float > 0: the output is u8 e4m3(Y * (1 / y_scale)), the next
//           Fp8Gemm's A; cuBLASLt's D scale multiplies by the reciprocal, and so does this)
//   outputs Y; optional Aq (u8, A's shape: e4m3(A / a_scale), the codes it multiplied, for
//           sibling Fp8Gemms reading the same A, so the activation is quantized once; float A only)
//   Y[..., n] = act(sum_k e4m3(A[..., k] / a_scale) * B[n, k] * a_scale * b_scale + bias[n])
//
// e4m3(x) rounds to nearest even and saturates at +-448 (fp8_e4m3.h). The scales are attributes,
// not inputs, so the precision pass leaves them f32 and the CUDA kernel has them at plan time.
// The reference sums the products exactly (each is 8 significant bits between 2^-18 and 2^18,
// so a double holds any sum of up to 2^30 of them), applies the scales in double and rounds once.
#include "ops/quant/fp8_e4m3.h"
#include "ops/quant/fp8_gemm_attrs.h"
#include "ops/common/nn_util.h"

#include <algorithm>
#include <cmath>

namespace gpuopt {

Status infer_Fp8Gemm(InferContext& ctx) {
  GPUOPT_RETURN_IF_ERROR(nn::require_inputs(ctx, 2));
  GPUOPT_ASSIGN_OR_RETURN(const quant::Fp8GemmAttrs at, quant::Fp8GemmAttrs::read(ctx));
  const ValueInfo& a = ctx.in(0);
  const ValueInfo& b = ctx.in(1);
  const bool float_a = a.dtype == DType::F32 || a.dtype == DType::F16 || a.dtype == DType::BF16;
  if (a.dtype != DType::Undefined && !float_a && a.dtype != DType::U8)
    return ctx.error("input 0 (A) has dtype {}; expected f32, f16, bf16 or u8 (e4m3)", dtype_name(a.dtype));
  if (b.dtype != DType::Undefined && b.dtype != DType::U8)
    return ctx.error("input 1 (B) has dtype {}; expected u8 (e4m3 bit patterns)", dtype_name(b.dtype));
  if (a.dtype == DType::U8 && !ctx.has_input(2))
    return ctx.error("an e4m3 (u8) A needs a bias: its float dtype is the output's");
  if (ctx.has_input(2) && a.dtype == DType::U8) {
    GPUOPT_RETURN_IF_ERROR(nn::require_float(ctx, 2, "bias"));
  } else if (ctx.has_input(2)) {
    GPUOPT_RETURN_IF_ERROR(nn::require_same_dtype(ctx, 0, 2));
  }
  ctx.outputs[0].dtype = at.y_scale > 0 ? DType::U8 : a.dtype == DType::U8 ? ctx.in(2).dtype : a.dtype;
  if (ctx.outputs.size() > 1) {
    if (a.dtype == DType::U8) return ctx.error("output 1 (the e4m3 A) needs a float A, not u8");
    ctx.outputs[1].dtype = DType::U8;
    ctx.outputs[1].rank_known = a.rank_known;
    ctx.outputs[1].shape = a.shape;
  }
  if (!a.rank_known || !b.rank_known) return Status::Ok();
  if (a.shape.empty() || b.shape.size() != 2) return ctx.error("A needs rank >= 1 and B rank 2 ([N, K])");
  if (dim_is_known(a.shape.back()) && dim_is_known(b.shape[1]) && a.shape.back() != b.shape[1])
    return ctx.error("A {} and B {} differ in K", shape_to_string(a.shape), shape_to_string(b.shape));
  if (ctx.has_input(2) && ctx.in(2).rank_known &&
      (ctx.in(2).shape.size() != 1 || (dim_is_known(ctx.in(2).shape[0]) && dim_is_known(b.shape[0]) &&
                                       ctx.in(2).shape[0] != b.shape[0])))
    return ctx.error("bias {} is not [N] for B {}", shape_to_string(ctx.in(2).shape), shape_to_string(b.shape));
  ctx.outputs[0].rank_known = true;
  ctx.outputs[0].shape = a.shape;
  ctx.outputs[0].shape.back() = b.shape[0];
  return Status::Ok();
}

Status cpu_Fp8Gemm(KernelContext& ctx) {
  GPUOPT_ASSIGN_OR_RETURN(const quant::Fp8GemmAttrs at, quant::Fp8GemmAttrs::read(ctx));
  const Tensor& a = ctx.in(0);
  const Tensor& b = ctx.in(1);
  if (b.dtype() != DType::U8 || b.rank() != 2) return ctx.error("B {} must be u8 of rank 2", b.describe());
  const int64_t n = b.dim(0), k = b.dim(1);
  if (a.rank() < 1 || a.dim(-1) != k) return ctx.error("A {} does not end in K = {}", a.describe(), k);
  if (ctx.has_input(2) && ctx.in(2).numel() != n) return ctx.error("bias has {} values; expected {}", ctx.in(2).numel(), n);
  const int64_t m = a.numel() / std::max<int64_t>(k, 1);
  // The activation quantized as the CUDA kernel does: in f32, x / a_scale, then e4m3 (or given
  // as e4m3 already).
  std::vector<float> qa(static_cast<size_t>(a.numel()));
  if (a.dtype() == DType::U8) {
    if (!ctx.has_input(2)) return ctx.error("an e4m3 (u8) A needs a bias");
    for (int64_t i = 0; i < a.numel(); ++i) qa[static_cast<size_t>(i)] = fp8::e4m3_to_f32(a.data<uint8_t>()[i]);
  } else {
    uint8_t* codes = ctx.outputs.size() > 1 && ctx.outputs[1] ? ctx.out(1).data<uint8_t>() : nullptr;
    for (int64_t i = 0; i < a.numel(); ++i) {
      const uint8_t c = fp8::f32_to_e4m3(static_cast<float>(a.get_f64(i)) / at.a_scale);
      qa[static_cast<size_t>(i)] = fp8::e4m3_to_f32(c);
      if (codes) codes[i] = c;
    }
  }
  std::vector<float> qb(static_cast<size_t>(b.numel()));
  const uint8_t* B = b.data<uint8_t>();
  for (int64_t i = 0; i < b.numel(); ++i) qb[static_cast<size_t>(i)] = fp8::e4m3_to_f32(B[i]);
  const double scale = static_cast<double>(at.a_scale) * static_cast<double>(at.b_scale);
  std::vector<double> y(static_cast<size_t>(m * n));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0;
      const float* ra = &qa[static_cast<size_t>(i * k)];
      const float* rb = &qb[static_cast<size_t>(j * k)];
      for (int64_t q = 0; q < k; ++q) acc += static_cast<double>(ra[q]) * static_cast<double>(rb[q]);
      double v = acc * scale;
      if (ctx.has_input(2)) v += ctx.in(2).get_f64(j);
      y[static_cast<size_t>(i * n + j)] = at.apply(v);
    }
  if (at.y_scale > 0) {  // e4m3 out: the f32 result times the f32 reciprocal, as cuBLASLt's D scale
    const float inv = 1.0f / at.y_scale;
    uint8_t* out = ctx.out(0).data<uint8_t>();
    for (size_t i = 0; i < y.size(); ++i) out[i] = fp8::f32_to_e4m3(static_cast<float>(y[i]) * inv);
    return Status::Ok();
  }
  nn::from_doubles(ctx.out(0), y);
  return Status::Ok();
}

double flops_Fp8Gemm(const FlopsContext& ctx) {
  const double out = nn::est_numel(nn::flops_out(ctx, 0));
  return out < 0 ? 0 : 2 * out * nn::est_dim(nn::flops_in(ctx, 1), 1);
}

}  // namespace gpuopt
