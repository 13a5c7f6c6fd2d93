// Adagrad, Adam, Momentum (domain ai.onnx.preview.training): one optimizer step, CPU reference,
// computed in double and rounded once to X's type. Inputs: R (learning rate), T (step count),
// then n tensors of each kind (X, G, [V], [H]); outputs: the n new X, then the new V / H.
#include "ops/common/nn_util.h"
#include "ops/common/tensor_util.h"

#include <cmath>

namespace gpuopt {
using namespace tensor_util;

namespace {

// n optimised tensors from `groups` groups of inputs after R and T; every group member has X's
// dtype and shape, and each output takes it too.
Result<size_t> infer_optimizer(InferContext& ctx, size_t groups) {
  const size_t in = ctx.num_inputs();
  if (in < 2 + groups || (in - 2) % groups != 0)
    return ctx.error("takes R, T and {} groups of tensors; got {} inputs", groups, in);
  const size_t n = (in - 2) / groups;
  if (ctx.outputs.size() > (groups - 1) * n)
    return ctx.error("has {} outputs; {} tensors give at most {}", ctx.outputs.size(), n, (groups - 1) * n);
  for (size_t i = 0; i < in; ++i)
    if (!ctx.has_input(i)) return ctx.error("input {} is missing", i);
  if (ctx.in(0).dtype != DType::Undefined && !nn::is_float_dtype(ctx.in(0).dtype))
    return ctx.error("R has dtype {}; expected a float type", dtype_name(ctx.in(0).dtype));
  if (ctx.in(1).dtype != DType::Undefined && ctx.in(1).dtype != DType::I64)
    return ctx.error("T has dtype {}; expected i64", dtype_name(ctx.in(1).dtype));
  for (size_t k = 0; k < n; ++k) {
    const ValueInfo& x = ctx.in(2 + k);
    if (x.dtype != DType::Undefined && !nn::is_float_dtype(x.dtype))
      return ctx.error("input {} has dtype {}; expected a float type", 2 + k, dtype_name(x.dtype));
    for (size_t g = 1; g < groups; ++g) {
      const ValueInfo& y = ctx.in(2 + g * n + k);
      if (x.dtype != DType::Undefined && y.dtype != DType::Undefined && y.dtype != x.dtype)
        return ctx.error("input {} has dtype {}, its X (input {}) {}", 2 + g * n + k, dtype_name(y.dtype), 2 + k,
                         dtype_name(x.dtype));
      if (x.rank_known && y.rank_known && shape_is_concrete(x.shape) && shape_is_concrete(y.shape) && x.shape != y.shape)
        return ctx.error("input {} has shape {}, its X (input {}) {}", 2 + g * n + k, shape_to_string(y.shape), 2 + k,
                         shape_to_string(x.shape));
    }
    for (size_t g = 0; g + 1 < groups; ++g) {
      const size_t o = g * n + k;
      if (o < ctx.outputs.size()) {
        ctx.outputs[o] = x;
        ctx.outputs[o].value = nullptr;
        ctx.outputs[o].dims_value.reset();
      }
    }
  }
  return n;
}

struct Step {
  double r;
  int64_t t;
};

Result<Step> step_of(const KernelContext& ctx) {
  if (ctx.in(0).numel() != 1 || ctx.in(1).numel() != 1) return ctx.error("R and T must be single values");
  return Step{ctx.in(0).get_f64(0), ctx.in(1).get_i64(0)};
}

// Runs `update(x, g, state..., out...)` element by element over tensor k of every group.
template <size_t kState, class F>
Status for_each_element(const KernelContext& ctx, size_t n, F update) {
  for (size_t k = 0; k < n; ++k) {
    const Tensor& x = ctx.in(2 + k);
    const Tensor& g = ctx.in(2 + n + k);
    for (size_t s = 0; s <= kState; ++s)
      if (ctx.in(2 + (1 + s) * n + k).numel() != x.numel())
        return ctx.error("input {} has {} elements, its X {}", 2 + (1 + s) * n + k, ctx.in(2 + (1 + s) * n + k).numel(),
                         x.numel());
    std::vector<std::vector<double>> outs(kState + 1, std::vector<double>(static_cast<size_t>(x.numel())));
    for (int64_t i = 0; i < x.numel(); ++i) {
      double st[kState + 1];
      for (size_t s = 0; s < kState; ++s) st[s] = ctx.in(2 + (2 + s) * n + k).get_f64(i);
      double res[kState + 1];
      update(x.get_f64(i), g.get_f64(i), st, res);
      for (size_t s = 0; s <= kState; ++s) outs[s][static_cast<size_t>(i)] = res[s];
    }
    for (size_t s = 0; s <= kState; ++s)
      if (s * n + k < ctx.outputs.size() && ctx.outputs[s * n + k]) nn::from_doubles(ctx.out(s * n + k), outs[s]);
  }
  return Status::Ok();
}

}  // namespace

Status infer_Adagrad(InferContext& ctx) { return infer_optimizer(ctx, 3).status(); }
Status cpu_Adagrad(KernelContext& ctx) {
  GPUOPT_ASSIGN_OR_RETURN(const Step s, step_of(ctx));
  const double decay = ctx.node.attr_f("decay_factor", 0.0f), eps = ctx.node.attr_f("epsilon", 0.0f),
               norm = ctx.node.attr_f("norm_coefficient", 0.0f);
  const double r = s.r / (1.0 + static_cast<double>(s.t) * decay);
  return for_each_element<1>(ctx, (ctx.num_inputs() - 2) / 3, [&](double x, double g, const double* st, double* out) {
    const double gr = norm * x + g, h = st[0] + gr * gr;
    out[0] = x - r * gr / (std::sqrt(h) + eps);
    out[1] = h;
  });
}
double flops_Adagrad(const FlopsContext&) { return 0.0; }

Status infer_Momentum(InferContext& ctx) {
  const std::string mode = ctx.node.attr_s("mode", "standard");
  if (mode != "standard" && mode != "nesterov") return ctx.error("mode '{}' is not standard or nesterov", mode);
  return infer_optimizer(ctx, 3).status();
}
Status cpu_Momentum(KernelContext& ctx) {
  GPUOPT_ASSIGN_OR_RETURN(const Step s, step_of(ctx));
  const double alpha = ctx.node.attr_f("alpha", 0.0f), beta = s.t > 0 ? ctx.node.attr_f("beta", 0.0f) : 1.0,
               norm = ctx.node.attr_f("norm_coefficient", 0.0f);
  const bool nesterov = ctx.node.attr_s("mode", "standard") == "nesterov";
  return for_each_element<1>(ctx, (ctx.num_inputs() - 2) / 3, [&](double x, double g, const double* st, double* out) {
    const double gr = norm * x + g, v = alpha * st[0] + beta * gr;
    out[0] = nesterov ? x - s.r * (gr + alpha * v) : x - s.r * v;
    out[1] = v;
  });
}
double flops_Momentum(const FlopsContext&) { return 0.0; }

Status infer_Adam(InferContext& ctx) { return infer_optimizer(ctx, 4).status(); }
Status cpu_Adam(KernelContext& ctx) {
  GPUOPT_ASSIGN_OR_RETURN(const Step s, step_of(ctx));
  const double alpha = ctx.node.attr_f("alpha", 0.9f), beta = ctx.node.attr_f("beta", 0.999f),
               eps = ctx.node.attr_f("epsilon", 0.0f), norm = ctx.node.attr_f("norm_coefficient", 0.0f),
               post = ctx.node.attr_f("norm_coefficient_post", 0.0f);
  const double t = static_cast<double>(s.t);
  // Bias correction of both momentums after the first step.
  const double r = s.t > 0 ? s.r * std::sqrt(1.0 - std::pow(beta, t)) / (1.0 - std::pow(alpha, t)) : s.r;
  return for_each_element<2>(ctx, (ctx.num_inputs() - 2) / 4, [&](double x, double g, const double* st, double* out) {
    const double gr = norm * x + g;
    const double v = alpha * st[0] + (1.0 - alpha) * gr, h = beta * st[1] + (1.0 - beta) * gr * gr;
    out[0] = (1.0 - post) * (x - r * (v / (std::sqrt(h) + eps)));
    out[1] = v;
    out[2] = h;
  });
}
double flops_Adam(const FlopsContext&) { return 0.0; }

}  // namespace gpuopt
