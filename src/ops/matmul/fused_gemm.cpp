// FusedGemm (ONNX Runtime contrib op, domain com.microsoft): Y = act(alpha * op(A) op(B) + beta * C).
// The fuse_epilogue pass writes it for Gemm -> [Reshape] -> Relu|Gelu, so the activation rides in
// the GEMM's epilogue on the GPU (cuBLASLt RELU_BIAS / GELU_BIAS) instead of a pass over the
// output. Activations: ORT's "Relu", and gpuopt's "Gelu" with ONNX Gelu's `approximate` attribute
// ("none": erf, "tanh"). The reference is Gemm's, then the activation in double.
#include "ops/common/nn_util.h"

#include <cmath>

namespace gpuopt {
namespace {

enum class GemmAct { kNone, kRelu, kGelu, kGeluTanh };

template <class Ctx>
Result<GemmAct> gemm_activation(const Ctx& ctx) {
  const std::string name = ctx.node.attr_s("activation", "");
  if (name.empty()) return GemmAct::kNone;
  if (name == "Relu") return GemmAct::kRelu;
  if (name == "Gelu") {
    const std::string approx = ctx.node.attr_s("approximate", "none");
    if (approx == "none") return GemmAct::kGelu;
    if (approx == "tanh") return GemmAct::kGeluTanh;
    return ctx.error("activation Gelu: approximate is '{}'; expected 'none' or 'tanh'", approx);
  }
  return ctx.error("activation '{}' is not supported (Relu, Gelu)", name);
}

}  // namespace

Status infer_FusedGemm(InferContext& ctx) {
  GPUOPT_RETURN_IF_ERROR(gemm_activation(ctx).status());
  GPUOPT_RETURN_IF_ERROR(infer_Gemm(ctx));
  if (ctx.in(0).dtype != DType::Undefined && !nn::is_float_dtype(ctx.in(0).dtype))
    return ctx.error("dtype {} is not supported (float types)", dtype_name(ctx.in(0).dtype));
  return Status::Ok();
}

Status cpu_FusedGemm(KernelContext& ctx) {
  GPUOPT_ASSIGN_OR_RETURN(GemmAct act, gemm_activation(ctx));
  GPUOPT_RETURN_IF_ERROR(cpu_Gemm(ctx));
  if (act == GemmAct::kNone) return Status::Ok();
  Tensor& y = ctx.out(0);
  std::vector<double> v = nn::to_doubles(y);
  constexpr double kSqrt1_2 = 0.70710678118654752440, kSqrt2OverPi = 0.79788456080286535588;
  for (double& x : v) {
    if (act == GemmAct::kRelu)
      x = x > 0 ? x : 0.0;
    else if (act == GemmAct::kGelu)
      x = 0.5 * x * (1.0 + std::erf(x * kSqrt1_2));
    else
      x = 0.5 * x * (1.0 + std::tanh(kSqrt2OverPi * (x + 0.044715 * x * x * x)));
  }
  nn::from_doubles(y, v);
  return Status::Ok();
}

double flops_FusedGemm(const FlopsContext& ctx) {
  return flops_Gemm(ctx) + 8 * std::max(0.0, nn::est_numel(nn::flops_out(ctx, 0)));
}

}  // namespace gpuopt
