// Normalisation variants: LpNormalization, LRN, MeanVarianceNormalization (LpPool and MaxUnpool
// are in ops/pool/lp_pool_unpool.cpp). Float inputs, accumulated in double and
// rounded once to the output dtype, like the other reference kernels.
#include "ops/common/nn_util.h"

#include <cmath>

namespace gpuopt {

namespace {

void same_as_input(InferContext& ctx) {
  ctx.outputs[0] = ctx.in(0);
  ctx.outputs[0].value = nullptr;
  ctx.outputs[0].dims_value.reset();
}

double per_element_flops(const FlopsContext& ctx, double per) {
  const double n = nn::est_numel(nn::flops_in(ctx, 0));
  return n < 0 ? 0 : n * per;
}

}  // namespace

// ---- LpNormalization ----------------------------------------------------------------------------

Status infer_LpNormalization(InferContext& ctx) {
  GPUOPT_RETURN_IF_ERROR(nn::require_nc_input(ctx, 0));
  const int64_t p = ctx.node.attr_i("p", 2);
  if (p != 1 && p != 2) return ctx.error("p {} must be 1 or 2", p);
  const ValueInfo& x = ctx.in(0);
  if (x.rank_known) {
    int64_t axis = ctx.node.attr_i("axis", -1);
    if (!normalize_axis(&axis, static_cast<int64_t>(x.shape.size())))
      return ctx.error("axis {} is out of range for rank {}", ctx.node.attr_i("axis", -1), x.shape.size());
  }
  same_as_input(ctx);
  return Status::Ok();
}
// y = x / ||x||_p along axis; a zero norm gives 0 (not NaN), as the node tests expect.
Status cpu_LpNormalization(KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  int64_t axis = ctx.node.attr_i("axis", -1);
  if (axis < 0) axis += x.rank();
  const bool l1 = ctx.node.attr_i("p", 2) == 1;
  const int64_t n = x.dim(axis);
  const int64_t inner = nn::product(x.shape(), static_cast<size_t>(axis) + 1, x.shape().size());
  const int64_t outer = nn::product(x.shape(), 0, static_cast<size_t>(axis));
  const std::vector<double> xv = nn::to_doubles(x);
  std::vector<double> y(xv.size());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t r = 0; r < inner; ++r) {
      double s = 0;
      for (int64_t k = 0; k < n; ++k) {
        const double v = xv[(o * n + k) * inner + r];
        s += l1 ? std::fabs(v) : v * v;
      }
      const double norm = l1 ? s : std::sqrt(s);
      for (int64_t k = 0; k < n; ++k) {
        const int64_t i = (o * n + k) * inner + r;
        y[i] = norm == 0 ? 0.0 : xv[i] / norm;
      }
    }
  nn::from_doubles(ctx.out(0), y);
  return Status::Ok();
}
double flops_LpNormalization(const FlopsContext& ctx) { return per_element_flops(ctx, 3); }

// ---- LRN ----------------------------------------------------------------------------------------

Status infer_LRN(InferContext& ctx) {
  GPUOPT_RETURN_IF_ERROR(nn::require_nc_input(ctx, 3));
  if (!ctx.node.has_attr("size")) return ctx.error("missing required attribute 'size'");
  if (ctx.node.attr_i("size", 0) < 1) return ctx.error("size {} must be positive", ctx.node.attr_i("size", 0));
  same_as_input(ctx);
  return Status::Ok();
}
// y = x / (bias + alpha / size * sum of x^2 over channels [c - floor((size-1)/2), c + ceil((size-1)/2)])^beta
Status cpu_LRN(KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  const double alpha = ctx.node.attr_f("alpha", 1e-4f), beta = ctx.node.attr_f("beta", 0.75f);
  const double bias = ctx.node.attr_f("bias", 1.0f);
  const int64_t size = ctx.node.attr_i("size", 1);
  const int64_t lo = (size - 1) / 2, hi = size / 2;  // floor and ceil of (size - 1) / 2
  const int64_t N = x.dim(0), C = x.dim(1), S = nn::product(x.shape(), 2, x.shape().size());
  const std::vector<double> xv = nn::to_doubles(x);
  std::vector<double> y(xv.size());
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t s = 0; s < S; ++s) {
        double sq = 0;
        for (int64_t k = std::max<int64_t>(0, c - lo); k <= std::min(C - 1, c + hi); ++k) {
          const double v = xv[(n * C + k) * S + s];
          sq += v * v;
        }
        const int64_t i = (n * C + c) * S + s;
        y[i] = xv[i] / std::pow(bias + alpha / static_cast<double>(size) * sq, beta);
      }
  nn::from_doubles(ctx.out(0), y);
  return Status::Ok();
}
double flops_LRN(const FlopsContext& ctx) {
  return per_element_flops(ctx, 2.0 * static_cast<double>(ctx.node.attr_i("size", 1)) + 4);
}

// ---- MeanVarianceNormalization ------------------------------------------------------------------

Status infer_MeanVarianceNormalization(InferContext& ctx) {
  GPUOPT_RETURN_IF_ERROR(nn::require_nc_input(ctx, 0));
  const ValueInfo& x = ctx.in(0);
  if (x.rank_known)
    for (int64_t a : ctx.node.attr_ints("axes", {0, 2, 3}))
      if (!normalize_axis(&a, static_cast<int64_t>(x.shape.size())))
        return ctx.error("axes {} do not fit rank {}", nn::ints_str(ctx.node.attr_ints("axes", {0, 2, 3})),
                         x.shape.size());
  same_as_input(ctx);
  return Status::Ok();
}
// y = (x - mean) / (sqrt(mean(x^2) - mean^2) + 1e-9) over `axes` (default [0, 2, 3]), the
// formula of the ONNX function body and its node test.
Status cpu_MeanVarianceNormalization(KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  const int64_t rank = x.rank();
  std::vector<bool> reduced(static_cast<size_t>(rank), false);
  for (int64_t a : ctx.node.attr_ints("axes", {0, 2, 3})) {
    if (!normalize_axis(&a, rank)) return ctx.error("axis {} is out of range for rank {}", a, rank);
    reduced[a] = true;
  }
  // Group id of each element: its coordinates on the kept axes, row-major.
  const std::vector<double> xv = nn::to_doubles(x);
  std::vector<int64_t> group(xv.size());
  int64_t groups = 1;
  for (int64_t d = 0; d < rank; ++d)
    if (!reduced[d]) groups *= x.dim(d);
  std::vector<int64_t> c(static_cast<size_t>(rank), 0);
  for (int64_t i = 0; i < x.numel(); ++i) {
    int64_t rem = i, g = 0;
    for (int64_t d = rank; d-- > 0;) {
      c[d] = rem % x.dim(d);
      rem /= x.dim(d);
    }
    for (int64_t d = 0; d < rank; ++d)
      if (!reduced[d]) g = g * x.dim(d) + c[d];
    group[i] = g;
  }
  std::vector<double> sum(static_cast<size_t>(groups), 0.0), sq(static_cast<size_t>(groups), 0.0),
      cnt(static_cast<size_t>(groups), 0.0);
  for (size_t i = 0; i < xv.size(); ++i) {
    sum[group[i]] += xv[i];
    sq[group[i]] += xv[i] * xv[i];
    cnt[group[i]] += 1;
  }
  std::vector<double> y(xv.size());
  for (size_t i = 0; i < xv.size(); ++i) {
    const int64_t g = group[i];
    const double mean = sum[g] / cnt[g];
    const double var = std::max(0.0, sq[g] / cnt[g] - mean * mean);
    y[i] = (xv[i] - mean) / (std::sqrt(var) + 1e-9);
  }
  nn::from_doubles(ctx.out(0), y);
  return Status::Ok();
}
double flops_MeanVarianceNormalization(const FlopsContext& ctx) { return per_element_flops(ctx, 6); }

}  // namespace gpuopt
