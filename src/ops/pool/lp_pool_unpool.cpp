// LpPool and MaxUnpool. Float inputs, accumulated in double and rounded once to the output dtype,
// like the other reference kernels.
#include "ops/pool/pool_window.h"

#include <cmath>

namespace gpuopt {

using nn::Window;

// ---- LpPool -----------------------------------------------------------------------------------

Status infer_LpPool(InferContext& ctx) {
  GPUOPT_RETURN_IF_ERROR(nn::require_nc_input(ctx, 3));
  if (ctx.node.attr_i("p", 2) < 1) return ctx.error("p {} must be at least 1", ctx.node.attr_i("p", 2));
  const ValueInfo& x = ctx.in(0);
  ValueInfo& y = ctx.outputs[0];
  y.dtype = x.dtype;
  GPUOPT_ASSIGN_OR_RETURN(y.shape, pool::output_shape(ctx, x));
  y.rank_known = true;
  return Status::Ok();
}

// y = (sum over the window's taps inside the input of |x|^p)^(1/p): padding contributes zeros,
// as in the node tests' generator (onnx/reference/ops/op_pool_common.py, pool("LPPOOL")).
Status cpu_LpPool(KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  GPUOPT_ASSIGN_OR_RETURN(Window w, pool::window_of(ctx, x.shape()));
  const double p = static_cast<double>(ctx.node.attr_i("p", 2));
  std::vector<double> y = pool::window_sums(w, nn::window_gather_table(w), nn::to_doubles(x), x.dim(0) * x.dim(1),
                                            [p](double v) { return std::pow(std::fabs(v), p); });
  for (double& s : y) s = std::pow(s, 1.0 / p);
  nn::from_doubles(ctx.out(0), y);
  return Status::Ok();
}

double flops_LpPool(const FlopsContext& ctx) {
  return pool::window_flops(ctx, 2);
}

// ---- MaxUnpool --------------------------------------------------------------------------------

namespace {
// The default output extent per spatial dim: (in - 1) * stride - pad_begin - pad_end + kernel.
Result<Shape> unpool_default_shape(const Node& node, const Shape& x) {
  const std::vector<int64_t> kernel = node.attr_ints("kernel_shape");
  const size_t nd = kernel.size();
  if (nd == 0) return Status::InvalidArgument("missing required attribute 'kernel_shape'");
  if (x.size() != nd + 2)
    return Status::InvalidArgument("input rank {} does not match kernel_shape {} (+2)", x.size(), nn::ints_str(kernel));
  std::vector<int64_t> strides = node.attr_ints("strides", std::vector<int64_t>(nd, 1));
  std::vector<int64_t> pads = node.attr_ints("pads", std::vector<int64_t>(2 * nd, 0));
  if (strides.empty()) strides.assign(nd, 1);
  if (pads.empty()) pads.assign(2 * nd, 0);
  if (strides.size() != nd || pads.size() != 2 * nd)
    return Status::InvalidArgument("strides {} / pads {} do not match {} spatial dims", nn::ints_str(strides),
                                   nn::ints_str(pads), nd);
  Shape out = {x[0], x[1]};
  for (size_t d = 0; d < nd; ++d)
    out.push_back(dim_is_known(x[d + 2]) ? (x[d + 2] - 1) * strides[d] - pads[d] - pads[nd + d] + kernel[d]
                                         : kUnknownDim);
  return out;
}
}  // namespace

Status infer_MaxUnpool(InferContext& ctx) {
  GPUOPT_RETURN_IF_ERROR(nn::require_nc_input(ctx, 3));
  GPUOPT_RETURN_IF_ERROR(nn::require_inputs(ctx, 2));
  if (ctx.in(1).dtype != DType::Undefined && ctx.in(1).dtype != DType::I64)
    return ctx.error("indices (input 1) must be int64, got {}", dtype_name(ctx.in(1).dtype));
  const ValueInfo& x = ctx.in(0);
  ValueInfo& y = ctx.outputs[0];
  y.dtype = x.dtype;
  if (ctx.has_input(2)) {
    if (const Tensor* s = ctx.in(2).value) {
      y.rank_known = true;
      y.shape = s->to_i64_vector();
      if (x.rank_known && y.shape.size() != x.shape.size())
        return ctx.error("output_shape {} has rank {}; input has rank {}", nn::ints_str(y.shape), y.shape.size(),
                         x.shape.size());
      for (int64_t d : y.shape)
        if (d < 0) return ctx.error("output_shape {} has a negative extent", nn::ints_str(y.shape));
    } else {
      y.rank_known = x.rank_known;
      y.shape = x.rank_known ? Shape(x.shape.size(), kUnknownDim) : Shape{};
    }
    return Status::Ok();
  }
  if (!x.rank_known) return Status::Ok();
  Result<Shape> s = unpool_default_shape(ctx.node, x.shape);
  if (!s.ok()) return ctx.error("{}", s.status().message());
  y.rank_known = true;
  y.shape = *s;
  return Status::Ok();
}

// As onnx/reference/ops/op_max_unpool.py: each value goes to the flat position its index names
// in a tensor of the default shape, which then sits in the top-left corner of output_shape.
Status cpu_MaxUnpool(KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  const Tensor& ind = ctx.in(1);
  Tensor& y = ctx.out(0);
  if (ind.numel() != x.numel())
    return ctx.error("indices has {} elements for {} values", ind.numel(), x.numel());
  Result<Shape> def = unpool_default_shape(ctx.node, x.shape());
  if (!def.ok()) return ctx.error("{}", def.status().message());
  const Shape& inner = *def;
  if (static_cast<size_t>(y.rank()) != inner.size()) return ctx.error("output_shape rank {} is not {}", y.rank(), inner.size());
  for (size_t d = 0; d < inner.size(); ++d)
    if (y.shape()[d] < inner[d])
      return ctx.error("output_shape {} is smaller than the unpooled shape {}", nn::ints_str(y.shape()),
                       nn::ints_str(inner));
  const int64_t n_inner = shape_numel(inner);
  std::vector<double> dense(static_cast<size_t>(n_inner), 0.0);
  const std::vector<double> xv = nn::to_doubles(x);
  const int64_t* iv = ind.data<int64_t>();
  for (int64_t i = 0; i < x.numel(); ++i) {
    if (iv[i] < 0 || iv[i] >= n_inner) return ctx.error("index {} at position {} is outside [0, {})", iv[i], i, n_inner);
    dense[iv[i]] = xv[i];
  }
  std::vector<double> out(static_cast<size_t>(y.numel()), 0.0);
  const size_t r = inner.size();
  std::vector<int64_t> c(r, 0);
  for (int64_t i = 0; i < n_inner; ++i) {
    int64_t rem = i, off = 0;
    for (size_t d = r; d-- > 0;) {
      c[d] = rem % inner[d];
      rem /= inner[d];
    }
    for (size_t d = 0; d < r; ++d) off = off * y.shape()[d] + c[d];
    out[off] = dense[i];
  }
  nn::from_doubles(y, out);
  return Status::Ok();
}
double flops_MaxUnpool(const FlopsContext&) { return 0.0; }

}  // namespace gpuopt
