// BatchNormalization (inference; training_mode outputs), InstanceNormalization,
// GroupNormalization (opset 18 per-group and opset 21 per-channel affine), LayerNormalization
// (axis, Mean/InvStdDev outputs): CPU reference. Statistics in double, two-pass variance.
#include "ops/common/broadcast.h"
#include "ops/common/nn_util.h"

#include <cmath>

namespace gpuopt {
namespace {

// X is [N, C, spatial...]; checks rank and that every per-channel input i in `params` is a 1-D
// tensor of C values (or `alt` values when alt > 0, for GroupNormalization's opset-18 form).
Status check_channel_params(const InferContext& ctx, const std::vector<size_t>& params, const char* what) {
  const ValueInfo& x = ctx.in(0);
  if (x.rank_known && x.shape.size() < 2)
    return ctx.error("input rank {} is below 2 (expected [N, C, ...])", x.shape.size());
  const int64_t c = x.rank_known ? x.shape[1] : kUnknownDim;
  for (size_t i : params) {
    if (!ctx.has_input(i)) return ctx.error("required input {} ({}) is missing", i, what);
    const ValueInfo& p = ctx.in(i);
    if (p.dtype != DType::Undefined && !nn::is_float_dtype(p.dtype))
      return ctx.error("input {} has dtype {}; expected a float type", i, dtype_name(p.dtype));
    if (!p.rank_known) continue;
    if (p.shape.size() != 1) return ctx.error("input {} ({}) must be 1-D; got {}", i, what, shape_to_string(p.shape));
    if (dim_is_known(c) && dim_is_known(p.shape[0]) && p.shape[0] != c)
      return ctx.error("input {} ({}) has {} values for {} channels", i, what, p.shape[0], c);
  }
  return Status::Ok();
}

void same_as_input(InferContext& ctx, size_t out) {
  ctx.outputs[out].dtype = ctx.in(0).dtype;
  ctx.outputs[out].rank_known = ctx.in(0).rank_known;
  ctx.outputs[out].shape = ctx.in(0).shape;
}

// Mean and biased variance of n values at p with stride 1.
void moments(const double* p, int64_t n, double* mean, double* var) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += p[i];
  const double m = n ? s / static_cast<double>(n) : 0.0;
  double q = 0;
  for (int64_t i = 0; i < n; ++i) q += (p[i] - m) * (p[i] - m);
  *mean = m;
  *var = n ? q / static_cast<double>(n) : 0.0;
}

}  // namespace

// ---- BatchNormalization ------------------------------------------------------------------------

namespace {
// The three ONNX forms: `spatial` attribute (opsets 1-8, _v1), neither (9-13, _v9),
// `training_mode` attribute (14+).
struct BnForm {
  bool spatial_attr = false;
  bool training_attr = false;
};
constexpr BnForm kBnSpatial{true, false}, kBnPlain{false, false}, kBnTraining{false, true};

bool bn_training(const Node& n, BnForm form) { return form.training_attr && n.attr_i("training_mode", 0) != 0; }

Status infer_batchnorm(InferContext& ctx, BnForm form) {
  GPUOPT_RETURN_IF_ERROR(nn::require_inputs(ctx, 5));
  GPUOPT_RETURN_IF_ERROR(nn::require_float(ctx, 0, "X"));
  const bool per_activation = form.spatial_attr && ctx.node.attr_i("spatial", 1) == 0;
  if (!per_activation) GPUOPT_RETURN_IF_ERROR(check_channel_params(ctx, {1, 2, 3, 4}, "scale/B/mean/var"));
  same_as_input(ctx, 0);
  const bool training = bn_training(ctx.node, form);
  if (!training && ctx.outputs.size() > 1 && form.training_attr)
    return ctx.error("running_mean/running_var outputs need training_mode=1");
  for (size_t o = 1; o < ctx.outputs.size(); ++o) {
    ctx.outputs[o].dtype = ctx.in(3).dtype;
    ctx.outputs[o].rank_known = ctx.in(3).rank_known;
    ctx.outputs[o].shape = ctx.in(3).shape;
  }
  return Status::Ok();
}

Status cpu_batchnorm(KernelContext& ctx, BnForm form) {
  const Tensor& x = ctx.in(0);
  const int64_t N = x.dim(0), C = x.rank() > 1 ? x.dim(1) : 1;
  const int64_t S = N != 0 && C != 0 ? x.numel() / (N * C) : 0;
  const double eps = ctx.node.attr_f("epsilon", 1e-5f);
  const std::vector<double> xv = nn::to_doubles(x), sc = nn::to_doubles(ctx.in(1)), bi = nn::to_doubles(ctx.in(2));
  std::vector<double> mean = nn::to_doubles(ctx.in(3)), var = nn::to_doubles(ctx.in(4));
  // Per-activation form (opset < 9, spatial=0): parameters cover C x spatial, not just C.
  const int64_t P = static_cast<int64_t>(sc.size());
  if (P != C && P != C * S) return ctx.error("scale has {} values; expected {} or {}", P, C, C * S);
  if (static_cast<int64_t>(mean.size()) != P || static_cast<int64_t>(var.size()) != P ||
      static_cast<int64_t>(bi.size()) != P)
    return ctx.error("scale, B, mean and var must have the same number of values");
  const bool training = bn_training(ctx.node, form);
  std::vector<double> run_mean, run_var;
  if (training) {
    if (P != C) return ctx.error("training_mode needs per-channel parameters");
    const double momentum = ctx.node.attr_f("momentum", 0.9f);
    std::vector<double> bm(C, 0.0), bv(C, 0.0);
    const double cnt = static_cast<double>(N * S);
    for (int64_t n = 0; n < N; ++n)
      for (int64_t c = 0; c < C; ++c)
        for (int64_t s = 0; s < S; ++s) bm[c] += xv[(n * C + c) * S + s];
    for (int64_t c = 0; c < C; ++c) bm[c] /= cnt;
    for (int64_t n = 0; n < N; ++n)
      for (int64_t c = 0; c < C; ++c)
        for (int64_t s = 0; s < S; ++s) {
          const double d = xv[(n * C + c) * S + s] - bm[c];
          bv[c] += d * d;
        }
    for (int64_t c = 0; c < C; ++c) bv[c] /= cnt;
    run_mean.resize(C);
    run_var.resize(C);
    for (int64_t c = 0; c < C; ++c) {
      run_mean[c] = mean[c] * momentum + bm[c] * (1 - momentum);
      run_var[c] = var[c] * momentum + bv[c] * (1 - momentum);
    }
    mean = bm;
    var = bv;
  }
  std::vector<double> y(xv.size());
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t s = 0; s < S; ++s) {
        const int64_t p = P == C ? c : c * S + s;
        const int64_t i = (n * C + c) * S + s;
        y[i] = sc[p] * (xv[i] - mean[p]) / std::sqrt(var[p] + eps) + bi[p];
      }
  nn::from_doubles(ctx.out(0), y);
  if (training) {
    if (ctx.outputs.size() > 1 && ctx.outputs[1]) nn::from_doubles(ctx.out(1), run_mean);
    if (ctx.outputs.size() > 2 && ctx.outputs[2]) nn::from_doubles(ctx.out(2), run_var);
  }
  return Status::Ok();
}

}  // namespace

Status infer_BatchNormalization_v1(InferContext& ctx) { return infer_batchnorm(ctx, kBnSpatial); }
Status cpu_BatchNormalization_v1(KernelContext& ctx) { return cpu_batchnorm(ctx, kBnSpatial); }
Status infer_BatchNormalization_v9(InferContext& ctx) { return infer_batchnorm(ctx, kBnPlain); }
Status cpu_BatchNormalization_v9(KernelContext& ctx) { return cpu_batchnorm(ctx, kBnPlain); }
Status infer_BatchNormalization(InferContext& ctx) { return infer_batchnorm(ctx, kBnTraining); }
Status cpu_BatchNormalization(KernelContext& ctx) { return cpu_batchnorm(ctx, kBnTraining); }

// Inference form folds to one multiply-add per element (sub, div, mul, add before folding).
double flops_BatchNormalization(const FlopsContext& ctx) {
  const double n = nn::est_numel(nn::flops_in(ctx, 0));
  return n < 0 ? 0 : 4 * n;
}

// ---- InstanceNormalization -------------------------------------------------------------------

Status infer_InstanceNormalization(InferContext& ctx) {
  GPUOPT_RETURN_IF_ERROR(nn::require_inputs(ctx, 3));
  GPUOPT_RETURN_IF_ERROR(nn::require_float(ctx, 0, "input"));
  if (ctx.in(0).rank_known && ctx.in(0).shape.size() < 3)
    return ctx.error("input rank {} is below 3 (expected [N, C, spatial...])", ctx.in(0).shape.size());
  GPUOPT_RETURN_IF_ERROR(check_channel_params(ctx, {1, 2}, "scale/B"));
  same_as_input(ctx, 0);
  return Status::Ok();
}

Status cpu_InstanceNormalization(KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  const int64_t N = x.dim(0), C = x.dim(1), S = N != 0 && C != 0 ? x.numel() / (N * C) : 0;
  const double eps = ctx.node.attr_f("epsilon", 1e-5f);
  const std::vector<double> xv = nn::to_doubles(x), sc = nn::to_doubles(ctx.in(1)), bi = nn::to_doubles(ctx.in(2));
  std::vector<double> y(xv.size());
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c) {
      const int64_t base = (n * C + c) * S;
      double m, v;
      moments(xv.data() + base, S, &m, &v);
      const double inv = 1.0 / std::sqrt(v + eps);
      for (int64_t s = 0; s < S; ++s) y[base + s] = (xv[base + s] - m) * inv * sc[c] + bi[c];
    }
  nn::from_doubles(ctx.out(0), y);
  return Status::Ok();
}

// Mean, variance (sub, square, add), normalise and affine: about 7 per element.
double flops_InstanceNormalization(const FlopsContext& ctx) {
  const double n = nn::est_numel(nn::flops_in(ctx, 0));
  return n < 0 ? 0 : 7 * n;
}

// ---- GroupNormalization ----------------------------------------------------------------------

Status infer_GroupNormalization(InferContext& ctx) {
  GPUOPT_RETURN_IF_ERROR(nn::require_inputs(ctx, 3));
  GPUOPT_RETURN_IF_ERROR(nn::require_float(ctx, 0, "X"));
  if (!ctx.node.has_attr("num_groups")) return ctx.error("missing required attribute 'num_groups'");
  const int64_t G = ctx.node.attr_i("num_groups", 0);
  if (G < 1) return ctx.error("num_groups {} must be positive", G);
  const ValueInfo& x = ctx.in(0);
  if (x.rank_known && x.shape.size() < 2) return ctx.error("input rank {} is below 2", x.shape.size());
  const int64_t C = x.rank_known ? x.shape[1] : kUnknownDim;
  if (dim_is_known(C) && C % G != 0) return ctx.error("{} channels are not divisible by num_groups {}", C, G);
  for (size_t i = 1; i <= 2; ++i) {
    const ValueInfo& p = ctx.in(i);
    if (!p.rank_known) continue;
    if (p.shape.size() != 1) return ctx.error("input {} (scale/bias) must be 1-D; got {}", i, shape_to_string(p.shape));
    // opset 21: one value per channel; opset 18: one per group (deprecated form, still accepted)
    if (dim_is_known(p.shape[0]) && dim_is_known(C) && p.shape[0] != C && p.shape[0] != G)
      return ctx.error("input {} (scale/bias) has {} values; expected {} (channels) or {} (groups)", i, p.shape[0], C,
                       G);
  }
  same_as_input(ctx, 0);
  return Status::Ok();
}

Status cpu_GroupNormalization(KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  const int64_t G = ctx.node.attr_i("num_groups", 1);
  const int64_t N = x.dim(0), C = x.dim(1), S = N != 0 && C != 0 ? x.numel() / (N * C) : 0, Cg = C / G;
  const double eps = ctx.node.attr_f("epsilon", 1e-5f);
  const std::vector<double> xv = nn::to_doubles(x), sc = nn::to_doubles(ctx.in(1)), bi = nn::to_doubles(ctx.in(2));
  // opset 21 gives one affine value per channel, opset 18 one per group; the count tells which.
  const bool sc_per_channel = static_cast<int64_t>(sc.size()) == C,
             bi_per_channel = static_cast<int64_t>(bi.size()) == C;
  std::vector<double> y(xv.size());
  for (int64_t n = 0; n < N; ++n)
    for (int64_t g = 0; g < G; ++g) {
      const int64_t base = (n * C + g * Cg) * S;
      double m, v;
      moments(xv.data() + base, Cg * S, &m, &v);
      const double inv = 1.0 / std::sqrt(v + eps);
      for (int64_t c = 0; c < Cg; ++c) {
        const int64_t ch = g * Cg + c;
        const double s = sc[sc_per_channel ? ch : g], b = bi[bi_per_channel ? ch : g];
        for (int64_t k = 0; k < S; ++k) {
          const int64_t i = base + c * S + k;
          y[i] = (xv[i] - m) * inv * s + b;
        }
      }
    }
  nn::from_doubles(ctx.out(0), y);
  return Status::Ok();
}

double flops_GroupNormalization(const FlopsContext& ctx) {
  const double n = nn::est_numel(nn::flops_in(ctx, 0));
  return n < 0 ? 0 : 7 * n;
}

// ---- LayerNormalization ----------------------------------------------------------------------

Status infer_LayerNormalization(InferContext& ctx) {
  GPUOPT_RETURN_IF_ERROR(nn::require_inputs(ctx, 2));
  GPUOPT_RETURN_IF_ERROR(nn::require_float(ctx, 0, "X"));
  const int64_t stash = ctx.node.attr_i("stash_type", 1);
  const std::optional<DType> stash_dt = dtype_from_onnx(static_cast<int>(stash));
  if (!stash_dt || !nn::is_float_dtype(*stash_dt)) return ctx.error("stash_type {} is not a float type", stash);
  same_as_input(ctx, 0);
  const ValueInfo& x = ctx.in(0);
  int64_t axis = ctx.node.attr_i("axis", -1);
  if (x.rank_known) {
    if (!normalize_axis(&axis, static_cast<int64_t>(x.shape.size())))
      return ctx.error("axis {} is out of range for rank {}", ctx.node.attr_i("axis", -1), x.shape.size());
    for (size_t i = 1; i <= 2; ++i)
      if (ctx.has_input(i) && ctx.in(i).rank_known && !broadcastable_to(ctx.in(i).shape, x.shape))
        return ctx.error("input {} ({}) {} does not broadcast to X {}", i, i == 1 ? "Scale" : "B",
                         shape_to_string(ctx.in(i).shape), shape_to_string(x.shape));
  }
  for (size_t o = 1; o < ctx.outputs.size(); ++o) {
    ValueInfo& v = ctx.outputs[o];
    v.dtype = *stash_dt;
    v.rank_known = x.rank_known;
    v.shape = x.shape;
    for (size_t d = static_cast<size_t>(std::max<int64_t>(axis, 0)); x.rank_known && d < v.shape.size(); ++d)
      v.shape[d] = 1;
  }
  return Status::Ok();
}

Status cpu_LayerNormalization(KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  int64_t axis = ctx.node.attr_i("axis", -1);
  GPUOPT_ASSERT(normalize_axis(&axis, x.rank()), "LayerNormalization axis");
  const double eps = ctx.node.attr_f("epsilon", 1e-5f);
  const int64_t inner = nn::product(x.shape(), static_cast<size_t>(axis), x.shape().size());
  const int64_t outer = inner ? x.numel() / inner : 0;
  const std::vector<double> xv = nn::to_doubles(x), sc = nn::to_doubles(ctx.in(1));
  const std::vector<int64_t> so = broadcast_offsets(ctx.in(1).shape(), x.shape());
  std::vector<double> bi;
  std::vector<int64_t> bo;
  if (ctx.has_input(2)) {
    bi = nn::to_doubles(ctx.in(2));
    bo = broadcast_offsets(ctx.in(2).shape(), x.shape());
  }
  std::vector<double> y(xv.size()), means(static_cast<size_t>(outer)), invs(static_cast<size_t>(outer));
  for (int64_t r = 0; r < outer; ++r) {
    double m, v;
    moments(xv.data() + r * inner, inner, &m, &v);
    const double inv = 1.0 / std::sqrt(v + eps);
    means[r] = m;
    invs[r] = inv;
    for (int64_t k = 0; k < inner; ++k) {
      const int64_t i = r * inner + k;
      y[i] = (xv[i] - m) * inv * sc[so[i]] + (bi.empty() ? 0.0 : bi[bo[i]]);
    }
  }
  nn::from_doubles(ctx.out(0), y);
  if (ctx.outputs.size() > 1 && ctx.outputs[1]) nn::from_doubles(ctx.out(1), means);
  if (ctx.outputs.size() > 2 && ctx.outputs[2]) nn::from_doubles(ctx.out(2), invs);
  return Status::Ok();
}

double flops_LayerNormalization(const FlopsContext& ctx) {
  const double n = nn::est_numel(nn::flops_in(ctx, 0));
  return n < 0 ? 0 : 7 * n;
}

}  // namespace gpuopt
