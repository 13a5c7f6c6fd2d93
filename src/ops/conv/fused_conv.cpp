// FusedConv (ONNX Runtime contrib op, domain com.microsoft): Y = act(Conv(X, W, B) + Z).
// fuse_conv_activation writes it for Conv -> [Add] -> Relu; ORT-optimized models may carry it too.
// The reference runs the Conv kernel into doubles, adds Z and applies the activation there, and
// rounds once to the output dtype (the unfused graph rounds after each node: same to ~1 ulp).
#include "ops/common/nn_util.h"
#include "ops/conv/conv_activation.h"

#include <cmath>

namespace gpuopt {
namespace {

enum class Act { kIdentity, kRelu, kLeakyRelu, kSigmoid, kTanh, kClip, kHardSigmoid, kHardSwish, kSwish };

struct Activation {
  Act kind = Act::kIdentity;
  double a = 0, b = 0;  // LeakyRelu alpha; Clip min/max; HardSigmoid alpha/beta
};

// ORT's names and activation_params (MLAS_ACTIVATION): LeakyRelu [alpha], Clip [min, max],
// HardSigmoid [alpha, beta]; "" or absent = none. gpuopt's HardSwish and Swish (SiLU) take no
// params (ops/conv/conv_activation.h).
template <class Ctx>
Result<Activation> parse_activation(const Ctx& ctx) {
  const std::string name = ctx.node.attr_s("activation", "");
  const std::vector<float> p = ctx.node.attr_floats("activation_params");
  Activation act;
  auto need = [&](size_t n) -> Status {
    if (p.size() != n) return ctx.error("activation '{}' takes {} activation_params, {} given", name, n, p.size());
    return Status::Ok();
  };
  if (name.empty()) return act;
  if (name == "Relu") {
    act.kind = Act::kRelu;
  } else if (name == "Sigmoid") {
    act.kind = Act::kSigmoid;
  } else if (name == "Tanh") {
    act.kind = Act::kTanh;
  } else if (name == "HardSwish") {
    act.kind = Act::kHardSwish;
  } else if (name == "Swish") {
    act.kind = Act::kSwish;
  } else if (name == "LeakyRelu") {
    GPUOPT_RETURN_IF_ERROR(need(1));
    act = {Act::kLeakyRelu, p[0], 0};
  } else if (name == "Clip") {
    GPUOPT_RETURN_IF_ERROR(need(2));
    act = {Act::kClip, p[0], p[1]};
  } else if (name == "HardSigmoid") {
    GPUOPT_RETURN_IF_ERROR(need(2));
    act = {Act::kHardSigmoid, p[0], p[1]};
  } else {
    return ctx.error("activation '{}' is not one of Relu, LeakyRelu, Sigmoid, Tanh, Clip, HardSigmoid, HardSwish, "
                     "Swish or \"\"",
                     name);
  }
  return act;
}

double apply(const Activation& act, double v) {
  switch (act.kind) {
    case Act::kIdentity:
      return v;
    case Act::kRelu:  // as the Relu kernel: x > 0 ? x : 0
      return conv_act_apply(ConvAct::kRelu, v);
    case Act::kLeakyRelu:
      return v >= 0 ? v : act.a * v;
    case Act::kSigmoid:
      return 1.0 / (1.0 + std::exp(-v));
    case Act::kTanh:
      return std::tanh(v);
    case Act::kClip:
      return std::min(std::max(v, act.a), act.b);
    case Act::kHardSigmoid:
      return std::max(0.0, std::min(1.0, act.a * v + act.b));
    case Act::kHardSwish:  // as the HardSwish kernel: x * max(0, min(1, x / 6 + 0.5))
      return conv_act_apply(ConvAct::kHardSwish, v);
    case Act::kSwish:  // x * sigmoid(x)
      return conv_act_apply(ConvAct::kSwish, v);
  }
  return v;
}

}  // namespace

Status infer_FusedConv(InferContext& ctx) {
  GPUOPT_RETURN_IF_ERROR(parse_activation(ctx).status());
  GPUOPT_RETURN_IF_ERROR(infer_Conv(ctx));
  if (!ctx.has_input(3)) return Status::Ok();
  GPUOPT_RETURN_IF_ERROR(nn::require_same_dtype(ctx, 0, 3));
  const ValueInfo& z = ctx.in(3);
  const ValueInfo& y = ctx.outputs[0];
  if (!z.rank_known || !y.rank_known) return Status::Ok();
  bool same = z.shape.size() == y.shape.size();
  for (size_t i = 0; same && i < y.shape.size(); ++i)
    same = !dim_is_known(z.shape[i]) || !dim_is_known(y.shape[i]) || z.shape[i] == y.shape[i];
  if (!same)
    return ctx.error("Z has shape {} but the convolution output is {} (Z is added element by element)",
                     shape_to_string(z.shape), shape_to_string(y.shape));
  return Status::Ok();
}

Status cpu_FusedConv(KernelContext& ctx) {
  GPUOPT_ASSIGN_OR_RETURN(Activation act, parse_activation(ctx));
  Tensor& y = ctx.out(0);
  // The Conv kernel writes into a double tensor: its exact sums, not yet rounded.
  Tensor acc = Tensor::empty(DType::F64, y.shape());
  std::vector<const Tensor*> conv_in(ctx.inputs.begin(), ctx.inputs.begin() + std::min<size_t>(3, ctx.inputs.size()));
  KernelContext conv{ctx.node, conv_in, {&acc}};
  GPUOPT_RETURN_IF_ERROR(cpu_Conv(conv));
  double* a = acc.data<double>();
  if (ctx.has_input(3)) {
    const Tensor& z = ctx.in(3);
    if (z.shape() != y.shape())
      return ctx.error("Z has shape {} but the convolution output is {}", shape_to_string(z.shape()),
                       shape_to_string(y.shape()));
    const std::vector<double> zv = nn::to_doubles(z);
    for (int64_t i = 0; i < acc.numel(); ++i) a[i] += zv[static_cast<size_t>(i)];
  }
  for (int64_t i = 0; i < acc.numel(); ++i) a[i] = apply(act, a[i]);
  nn::from_doubles(y, a);
  return Status::Ok();
}

// The Conv's FLOPs, plus one per output element for Z and one for the activation.
double flops_FusedConv(const FlopsContext& ctx) {
  const double conv = flops_Conv(ctx);
  const double out = nn::est_numel(nn::flops_out(ctx, 0));
  if (out < 0) return conv;
  return conv + out * ((ctx.inputs.size() > 3 && ctx.inputs[3] ? 1 : 0) + 1);
}

}  // namespace gpuopt
