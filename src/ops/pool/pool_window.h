// The window every sliding-window pool shares (MaxPool, AveragePool, LpPool): kernel_shape
// (required), strides, dilations, pads, auto_pad, ceil_mode over the spatial dims of
// x [N, C, spatial...]; the output shape it gives and the FLOPs it costs.
#pragma once

#include "ops/common/nn_util.h"

namespace gpuopt::pool {

// The window over x's spatial dims (x's rank known; its dims may be unknown at load time).
template <class Ctx>
inline Result<nn::Window> window_of(const Ctx& ctx, const Shape& x) {
  return nn::resolve_window(ctx, Shape(x.begin() + 2, x.end()), ctx.node.attr_ints("kernel_shape"),
                            ctx.node.attr_i("ceil_mode", 0) != 0);
}

// y = [N, C, out...] for x (whose rank, when unknown, is the kernel's + 2).
inline Result<Shape> output_shape(const InferContext& ctx, const ValueInfo& x) {
  const std::vector<int64_t> kernel = ctx.node.attr_ints("kernel_shape");
  if (kernel.empty()) return ctx.error("missing required attribute 'kernel_shape'");
  const size_t rank = x.rank_known ? x.shape.size() : kernel.size() + 2;
  if (rank - 2 != kernel.size())
    return ctx.error("kernel_shape {} has rank {}; input has {} spatial dims", nn::ints_str(kernel), kernel.size(),
                     rank - 2);
  const Shape known = x.rank_known ? x.shape : Shape(rank, kUnknownDim);
  GPUOPT_ASSIGN_OR_RETURN(nn::Window w, window_of(ctx, known));
  Shape y = {known[0], known[1]};
  for (int64_t o : w.out) y.push_back(o);
  return y;
}

// For each of the `nc` [N x C] planes of x (values `xv`) and each output position, the sum of
// f(x) over the window's taps inside the input (`table`: nn::window_gather_table(w)), in tap
// order. [nc, out] row-major.
template <class F>
inline std::vector<double> window_sums(const nn::Window& w, const std::vector<int64_t>& table,
                                       const std::vector<double>& xv, int64_t nc, F f) {
  const int64_t K = w.kernel_size(), O = w.out_size(), I = w.in_size();
  std::vector<double> sums(static_cast<size_t>(nc * O));
  for (int64_t p = 0; p < nc; ++p)
    for (int64_t o = 0; o < O; ++o) {
      double s = 0;
      for (int64_t t = 0; t < K; ++t) {
        const int64_t off = table[t * O + o];
        if (off >= 0) s += f(xv[p * I + off]);
      }
      sums[p * O + o] = s;
    }
  return sums;
}

// `per_tap` FLOPs for each kernel tap of each output element.
inline double window_flops(const FlopsContext& ctx, double per_tap) {
  const double out = nn::est_numel(nn::flops_out(ctx, 0));
  double k = 1;
  for (int64_t d : ctx.node.attr_ints("kernel_shape")) k *= static_cast<double>(d);
  return out < 0 ? 0 : out * k * per_tap;
}

}  // namespace gpuopt::pool
