// Unary ONNX ops on the GPU through the generic elementwise kernel.
#include "backends/cuda/cuda_ops.h"
#include "backends/cuda/elementwise.h"

namespace gpuopt::cuda {
namespace {

template <UnaryOp kOp>
Status run_unary(CudaKernelContext& k) {
  UnaryParams p;
  const Node& n = k.node;
  switch (kOp) {
    case UnaryOp::kLeakyRelu: p.alpha = n.attr_f("alpha", 0.01f); break;
    case UnaryOp::kElu: p.alpha = n.attr_f("alpha", 1.0f); break;
    case UnaryOp::kSelu:
      p.alpha = n.attr_f("alpha", 1.67326319217681884765625f);
      p.gamma = n.attr_f("gamma", 1.05070102214813232421875f);
      break;
    case UnaryOp::kHardSigmoid:
      p.alpha = n.attr_f("alpha", 0.2f);
      p.beta = n.attr_f("beta", 0.5f);
      break;
    case UnaryOp::kIsInf:
      p.alpha = static_cast<float>(n.attr_i("detect_positive", 1));
      p.beta = static_cast<float>(n.attr_i("detect_negative", 1));
      break;
    default: break;
  }
  return launch_unary(kOp, k.in(0).dtype(), k.in(0).raw(), k.out(0).raw(), k.in(0).numel(), p, k.ctx.stream);
}

Status run_gelu(CudaKernelContext& k) {
  const bool tanh = k.node.attr_s("approximate", "none") == "tanh";
  return launch_unary(tanh ? UnaryOp::kGeluTanh : UnaryOp::kGelu, k.in(0).dtype(), k.in(0).raw(), k.out(0).raw(),
                      k.in(0).numel(), {}, k.ctx.stream);
}

// Clip: bounds from attributes (attr_bounds: the form before opset 11) or optional scalar inputs
// read on the host.
Status run_clip_impl(CudaKernelContext& k, bool attr_bounds) {
  UnaryParams p;
  p.alpha = -3.402823466e38f;
  p.beta = 3.402823466e38f;
  if (attr_bounds) {
    p.alpha = k.node.attr_f("min", p.alpha);
    p.beta = k.node.attr_f("max", p.beta);
  } else {
    if (k.host.size() > 1 && k.host[1]) p.alpha = static_cast<float>(k.host[1]->get_f64(0));
    if (k.host.size() > 2 && k.host[2]) p.beta = static_cast<float>(k.host[2]->get_f64(0));
  }
  return launch_unary(UnaryOp::kClip, k.in(0).dtype(), k.in(0).raw(), k.out(0).raw(), k.in(0).numel(), p, k.ctx.stream);
}

Status run_clip_v1(CudaKernelContext& k) { return run_clip_impl(k, true); }
Status run_clip(CudaKernelContext& k) { return run_clip_impl(k, false); }

bool float_input(const Node&, const std::vector<DType>& in) {
  return !in.empty() && (in[0] == DType::F32 || in[0] == DType::F16 || in[0] == DType::BF16);
}

}  // namespace

#define GPUOPT_CUDA_UNARY(NAME, OP) GPUOPT_CUDA_OP(NAME, &run_unary<UnaryOp::OP>, &float_input)
GPUOPT_CUDA_UNARY(Relu, kRelu);
GPUOPT_CUDA_UNARY(LeakyRelu, kLeakyRelu);
GPUOPT_CUDA_UNARY(Elu, kElu);
GPUOPT_CUDA_UNARY(Selu, kSelu);
GPUOPT_CUDA_UNARY(Sigmoid, kSigmoid);
GPUOPT_CUDA_UNARY(HardSigmoid, kHardSigmoid);
GPUOPT_CUDA_UNARY(HardSwish, kHardSwish);
GPUOPT_CUDA_UNARY(Tanh, kTanh);
GPUOPT_CUDA_UNARY(Softplus, kSoftplus);
GPUOPT_CUDA_UNARY(Erf, kErf);
GPUOPT_CUDA_UNARY(Sqrt, kSqrt);
GPUOPT_CUDA_UNARY(Exp, kExp);
GPUOPT_CUDA_UNARY(Log, kLog);
GPUOPT_CUDA_UNARY(Neg, kNeg);
GPUOPT_CUDA_UNARY(Abs, kAbs);
GPUOPT_CUDA_UNARY(Reciprocal, kReciprocal);
GPUOPT_CUDA_UNARY(Floor, kFloor);
GPUOPT_CUDA_UNARY(Ceil, kCeil);
GPUOPT_CUDA_UNARY(Round, kRound);
GPUOPT_CUDA_UNARY(Sign, kSign);
GPUOPT_CUDA_UNARY(Sin, kSin);
GPUOPT_CUDA_UNARY(Cos, kCos);
GPUOPT_CUDA_UNARY(IsNaN, kIsNaN);
GPUOPT_CUDA_UNARY(IsInf, kIsInf);
GPUOPT_CUDA_OP(Gelu, &run_gelu, &float_input);
GPUOPT_CUDA_OP_RANGE(Clip, 1, 10, &run_clip_v1, &float_input);
GPUOPT_CUDA_OP_RANGE(Clip, 11, kOpsetMax, &run_clip, &float_input, host_inputs_mask({1, 2}));
#undef GPUOPT_CUDA_UNARY

}  // namespace gpuopt::cuda
