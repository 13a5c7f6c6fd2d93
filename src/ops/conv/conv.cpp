// Conv and ConvTranspose: CPU reference (N-d, groups, dilations, pads/auto_pad, output_padding,
// output_shape). Direct loops over a precomputed tap->input offset table, accumulated in double.
#include "ops/common/nn_util.h"
#include "core/thread_pool.h"

namespace gpuopt {

using nn::Window;

namespace {

struct ConvDims {
  int64_t group = 1;
  bool rank_known = false;
  size_t rank = 0;
};

// Shared validation of X/W/B for Conv (w_in_axis=1: W is [M, C/group, k...]) and ConvTranspose
// (W is [C, M/group, k...]). Returns the rank when known.
Result<ConvDims> check_conv_inputs(const InferContext& ctx, bool transpose) {
  GPUOPT_RETURN_IF_ERROR(nn::require_inputs(ctx, 2));
  GPUOPT_RETURN_IF_ERROR(nn::require_float(ctx, 0, "X"));
  GPUOPT_RETURN_IF_ERROR(nn::require_same_dtype(ctx, 0, 1));
  if (ctx.has_input(2)) GPUOPT_RETURN_IF_ERROR(nn::require_same_dtype(ctx, 0, 2));
  ConvDims d;
  d.group = ctx.node.attr_i("group", 1);
  if (d.group < 1) return ctx.error("group {} must be positive", d.group);
  const ValueInfo& x = ctx.in(0);
  const ValueInfo& w = ctx.in(1);
  if (x.rank_known && x.shape.size() < 3)
    return ctx.error("input rank {} is below 3 (expected [N, C, spatial...])", x.shape.size());
  if (w.rank_known && w.shape.size() < 3) return ctx.error("kernel rank {} is below 3", w.shape.size());
  if (x.rank_known && w.rank_known && x.shape.size() != w.shape.size())
    return ctx.error("kernel rank {} does not match input rank {}", w.shape.size(), x.shape.size());
  if (!x.rank_known && !w.rank_known) return d;
  d.rank_known = true;
  d.rank = x.rank_known ? x.shape.size() : w.shape.size();
  if (x.rank_known && w.rank_known) {
    const int64_t c = x.shape[1];
    if (!transpose && dim_is_known(c) && dim_is_known(w.shape[1]) && c != w.shape[1] * d.group)
      return ctx.error("input has {} channels but weight expects {} x group {} = {}", c, w.shape[1], d.group,
                       w.shape[1] * d.group);
    if (transpose && dim_is_known(c) && dim_is_known(w.shape[0]) && c != w.shape[0])
      return ctx.error("input has {} channels but weight dim 0 is {}", c, w.shape[0]);
  }
  if (w.rank_known) {
    if (transpose && dim_is_known(w.shape[0]) && w.shape[0] % d.group != 0)
      return ctx.error("weight input channels {} are not divisible by group {}", w.shape[0], d.group);
    if (!transpose && dim_is_known(w.shape[0]) && w.shape[0] % d.group != 0)
      return ctx.error("output channels {} are not divisible by group {}", w.shape[0], d.group);
  }
  if (ctx.has_input(2) && ctx.in(2).rank_known) {
    const Shape& b = ctx.in(2).shape;
    if (b.size() != 1) return ctx.error("bias must be 1-D; got rank {}", b.size());
    if (w.rank_known) {
      const int64_t m = transpose ? w.shape[1] : w.shape[0];
      const int64_t mm = transpose && dim_is_known(m) ? m * d.group : m;
      if (dim_is_known(mm) && dim_is_known(b[0]) && b[0] != mm)
        return ctx.error("bias has {} values for {} output channels", b[0], mm);
    }
  }
  return d;
}

Shape spatial_of(const ValueInfo& v, size_t rank) {
  if (v.rank_known) return Shape(v.shape.begin() + 2, v.shape.end());
  return Shape(rank - 2, kUnknownDim);
}

// ConvTranspose geometry: explicit pads, or pads derived from output_shape / SAME_* auto_pad as
// the spec says (SAME_UPPER puts the smaller half first). A negative end pad (output_shape larger
// than the natural size) extends the output with bias-only positions, like the ONNX reference.
template <class Ctx>
Result<Window> resolve_transpose(const Ctx& ctx, const Shape& in, const std::vector<int64_t>& kernel) {
  const Node& n = ctx.node;
  const size_t nd = in.size();
  Window w;
  w.nd = nd;
  w.in = in;
  w.kernel = kernel;
  w.strides = n.attr_ints("strides", std::vector<int64_t>(nd, 1));
  w.dilations = n.attr_ints("dilations", std::vector<int64_t>(nd, 1));
  if (w.strides.empty()) w.strides.assign(nd, 1);
  if (w.dilations.empty()) w.dilations.assign(nd, 1);
  std::vector<int64_t> out_pad = n.attr_ints("output_padding", std::vector<int64_t>(nd, 0));
  if (out_pad.empty()) out_pad.assign(nd, 0);
  std::vector<int64_t> pads = n.attr_ints("pads", std::vector<int64_t>(2 * nd, 0));
  if (pads.empty()) pads.assign(2 * nd, 0);
  std::vector<int64_t> out_shape = n.attr_ints("output_shape");
  if (out_shape.size() == nd + 2) out_shape.erase(out_shape.begin(), out_shape.begin() + 2);
  const std::string auto_pad = n.attr_s("auto_pad", "NOTSET");
  if (w.kernel.size() != nd)
    return ctx.error("kernel rank {} does not match input spatial rank {}", w.kernel.size(), nd);
  if (w.strides.size() != nd || w.dilations.size() != nd || out_pad.size() != nd || pads.size() != 2 * nd)
    return ctx.error("strides/dilations/output_padding/pads lengths ({}/{}/{}/{}) do not match {} spatial dims",
                     w.strides.size(), w.dilations.size(), out_pad.size(), pads.size(), nd);
  if (!out_shape.empty() && out_shape.size() != nd)
    return ctx.error("output_shape {} does not have {} spatial dims", nn::ints_str(out_shape), nd);
  if (auto_pad != "NOTSET" && auto_pad != "VALID" && auto_pad != "SAME_UPPER" && auto_pad != "SAME_LOWER")
    return ctx.error("auto_pad '{}' is not NOTSET, VALID, SAME_UPPER or SAME_LOWER", auto_pad);
  w.pad_begin.assign(nd, 0);
  w.pad_end.assign(nd, 0);
  w.out.assign(nd, kUnknownDim);
  for (const std::vector<int64_t>* v : {&w.kernel, &w.strides, &w.dilations, &pads})
    for (int64_t x : *v)
      if (x > (int64_t{1} << 31) || x < -(int64_t{1} << 31))
        return ctx.error("kernel_shape/strides/dilations/pads value {} is beyond 2^31 in magnitude", x);
  for (size_t i = 0; i < nd; ++i) {
    if (w.strides[i] < 1 || w.dilations[i] < 1 || out_pad[i] < 0 || w.kernel[i] < 1)
      return ctx.error("strides {}, dilations {}, kernel {} must be positive and output_padding {} non-negative",
                       nn::ints_str(w.strides), nn::ints_str(w.dilations), nn::ints_str(w.kernel),
                       nn::ints_str(out_pad));
    const int64_t eff = (w.kernel[i] - 1) * w.dilations[i] + 1;
    // Extents and output_padding under 2^31 (the window attributes are bounded the same way)
    // keep every product and sum below in range.
    constexpr int64_t kMaxExtent = int64_t{1} << 31;
    if (in[i] > kMaxExtent || out_pad[i] > kMaxExtent || (!out_shape.empty() && out_shape[i] > kMaxExtent))
      return ctx.error("spatial dim {}: input extent {}, output_padding {} or output_shape too large for ConvTranspose", i,
                       in[i], out_pad[i]);
    const bool same = auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER";
    if (!same && out_shape.empty()) {
      if (auto_pad == "NOTSET") {
        w.pad_begin[i] = pads[i];
        w.pad_end[i] = pads[nd + i];
      }
      if (dim_is_known(in[i])) {
        w.out[i] = w.strides[i] * (in[i] - 1) + out_pad[i] + eff - w.pad_begin[i] - w.pad_end[i];
        if (w.out[i] < 1) return ctx.error("computed output extent {} in spatial dim {} is not positive", w.out[i], i);
      }
      continue;
    }
    if (!dim_is_known(in[i])) {
      if (!out_shape.empty()) w.out[i] = out_shape[i];
      continue;
    }
    const int64_t target = out_shape.empty() ? in[i] * w.strides[i] : out_shape[i];
    const int64_t total = w.strides[i] * (in[i] - 1) + out_pad[i] + eff - target;
    const int64_t half = nn::floor_div(total, 2);
    w.pad_begin[i] = auto_pad == "SAME_UPPER" ? half : total - half;
    w.pad_end[i] = total - w.pad_begin[i];
    w.out[i] = target;
    if (target < 1) return ctx.error("output_shape {} has a non-positive extent", nn::ints_str(out_shape));
  }
  return w;
}

}  // namespace

// ---- Conv -----------------------------------------------------------------------------------

Status infer_Conv(InferContext& ctx) {
  GPUOPT_ASSIGN_OR_RETURN(ConvDims d, check_conv_inputs(ctx, false));
  ValueInfo& y = ctx.outputs[0];
  y.dtype = ctx.in(0).dtype;
  if (!d.rank_known) return Status::Ok();
  const ValueInfo& x = ctx.in(0);
  const ValueInfo& w = ctx.in(1);
  const Shape xs = spatial_of(x, d.rank);
  const Shape ws = spatial_of(w, d.rank);
  GPUOPT_ASSIGN_OR_RETURN(std::vector<int64_t> kernel, nn::kernel_shape_attr(ctx, ws, d.rank - 2));
  y.rank_known = true;
  y.shape.assign(d.rank, kUnknownDim);
  y.shape[0] = x.rank_known ? x.shape[0] : kUnknownDim;
  y.shape[1] = w.rank_known ? w.shape[0] : kUnknownDim;
  if (kernel.empty()) return Status::Ok();
  GPUOPT_ASSIGN_OR_RETURN(Window win, nn::resolve_window(ctx, xs, kernel, false));
  for (size_t i = 0; i < win.nd; ++i) y.shape[2 + i] = win.out[i];
  return Status::Ok();
}

Status cpu_Conv(KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  const Tensor& wt = ctx.in(1);
  Tensor& y = ctx.out(0);
  GPUOPT_ASSIGN_OR_RETURN(Window win, nn::conv_window(ctx, x.shape(), wt.shape()));
  const int64_t N = x.dim(0), C = x.dim(1), M = wt.dim(0), G = ctx.node.attr_i("group", 1);
  const int64_t Cg = C / G, Mg = M / G;
  const int64_t K = win.kernel_size(), O = win.out_size(), I = win.in_size();
  GPUOPT_ASSERT(y.numel() == N * M * O, "Conv output size");
  const std::vector<double> xv = nn::to_doubles(x), wv = nn::to_doubles(wt);
  std::vector<double> bv = ctx.has_input(2) ? nn::to_doubles(ctx.in(2)) : std::vector<double>(M, 0.0);
  const std::vector<int64_t> table = nn::window_gather_table(win);
  // Per input channel, gather its K x O window matrix once (zeros in the padding), then every
  // output channel of the group does branch-free multiply-adds over it. The work is cut into
  // (image, group, block of output channels) units across the CPU pool (core/thread_pool.h),
  // each with its own window matrix; every output still sums over (c, t) in order.
  std::vector<double> yv(static_cast<size_t>(N * M * O));
  const int64_t blocks = std::max<int64_t>(1, std::min<int64_t>(Mg, cpu_threads()));
  parallel_for(N * G * blocks, 1, [&](int64_t u_begin, int64_t u_end) {
    std::vector<double> col(static_cast<size_t>(K * O));
    for (int64_t u = u_begin; u < u_end; ++u) {
      const int64_t n = u / (G * blocks), g = u / blocks % G, blk = u % blocks;
      const int64_t mm0 = Mg * blk / blocks, mm1 = Mg * (blk + 1) / blocks;
      for (int64_t mm = mm0; mm < mm1; ++mm) {
        double* acc = yv.data() + (n * M + g * Mg + mm) * O;
        std::fill(acc, acc + O, bv[g * Mg + mm]);
      }
      for (int64_t c = 0; c < Cg; ++c) {
        const double* xin = xv.data() + (n * C + g * Cg + c) * I;
        for (int64_t j = 0; j < K * O; ++j) col[j] = table[j] >= 0 ? xin[table[j]] : 0.0;
        for (int64_t mm = mm0; mm < mm1; ++mm) {
          const int64_t m = g * Mg + mm;
          double* acc = yv.data() + (n * M + m) * O;
          const double* wk = wv.data() + (m * Cg + c) * K;
          for (int64_t t = 0; t < K; ++t) {
            const double wval = wk[t];
            const double* cr = col.data() + t * O;
            for (int64_t o = 0; o < O; ++o) acc[o] += wval * cr[o];
          }
        }
      }
    }
  });
  nn::from_doubles(y, yv);
  return Status::Ok();
}

// 2 FLOPs per multiply-add: out elements x (C/group x kernel taps), plus the bias add.
double flops_Conv(const FlopsContext& ctx) {
  const double out = nn::est_numel(nn::flops_out(ctx, 0)), per = nn::conv_taps(nn::flops_in(ctx, 1));
  if (out < 0 || per < 0) return 0;
  return out * (2 * per + (ctx.inputs.size() > 2 && ctx.inputs[2] ? 1 : 0));
}

// ---- ConvTranspose --------------------------------------------------------------------------

Status infer_ConvTranspose(InferContext& ctx) {
  GPUOPT_ASSIGN_OR_RETURN(ConvDims d, check_conv_inputs(ctx, true));
  ValueInfo& y = ctx.outputs[0];
  y.dtype = ctx.in(0).dtype;
  if (!d.rank_known) return Status::Ok();
  const ValueInfo& x = ctx.in(0);
  const ValueInfo& w = ctx.in(1);
  GPUOPT_ASSIGN_OR_RETURN(std::vector<int64_t> kernel, nn::kernel_shape_attr(ctx, spatial_of(w, d.rank), d.rank - 2));
  y.rank_known = true;
  y.shape.assign(d.rank, kUnknownDim);
  y.shape[0] = x.rank_known ? x.shape[0] : kUnknownDim;
  y.shape[1] = w.rank_known && dim_is_known(w.shape[1]) ? w.shape[1] * d.group : kUnknownDim;
  if (kernel.empty()) return Status::Ok();
  GPUOPT_ASSIGN_OR_RETURN(Window win, resolve_transpose(ctx, spatial_of(x, d.rank), kernel));
  for (size_t i = 0; i < win.nd; ++i) y.shape[2 + i] = win.out[i];
  return Status::Ok();
}

Status cpu_ConvTranspose(KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  const Tensor& wt = ctx.in(1);
  Tensor& y = ctx.out(0);
  const size_t rank = static_cast<size_t>(x.rank());
  GPUOPT_ASSIGN_OR_RETURN(std::vector<int64_t> kernel,
                          nn::kernel_shape_attr(ctx, Shape(wt.shape().begin() + 2, wt.shape().end()), rank - 2));
  GPUOPT_ASSIGN_OR_RETURN(Window win, resolve_transpose(ctx, Shape(x.shape().begin() + 2, x.shape().end()), kernel));
  const int64_t G = ctx.node.attr_i("group", 1);
  const int64_t N = x.dim(0), C = x.dim(1), Cg = C / G, Mg = wt.dim(1), M = Mg * G;
  const int64_t K = win.kernel_size(), I = win.in_size(), O = win.out_size();
  // Scatter form: the gather table of the swapped window maps (tap, input pos) -> output pos.
  Window swapped = win;
  swapped.in = win.out;
  swapped.out = win.in;
  const std::vector<int64_t> table = nn::window_gather_table(swapped);
  const std::vector<double> xv = nn::to_doubles(x), wv = nn::to_doubles(wt);
  std::vector<double> bv = ctx.has_input(2) ? nn::to_doubles(ctx.in(2)) : std::vector<double>(M, 0.0);
  std::vector<double> yv(static_cast<size_t>(N * M * O));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t m = 0; m < M; ++m) std::fill(yv.begin() + (n * M + m) * O, yv.begin() + (n * M + m + 1) * O, bv[m]);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t ci = 0; ci < C; ++ci) {
      const int64_t g = ci / Cg;
      const double* xin = xv.data() + (n * C + ci) * I;
      for (int64_t mm = 0; mm < Mg; ++mm) {
        double* out = yv.data() + (n * M + g * Mg + mm) * O;
        const double* wk = wv.data() + (ci * Mg + mm) * K;
        for (int64_t t = 0; t < K; ++t) {
          const double wval = wk[t];
          const int64_t* tab = table.data() + t * I;
          for (int64_t i = 0; i < I; ++i)
            if (tab[i] >= 0) out[tab[i]] += wval * xin[i];
        }
      }
    }
  nn::from_doubles(y, yv);
  return Status::Ok();
}

// Every input element meets every tap of its group's M/group output channels.
double flops_ConvTranspose(const FlopsContext& ctx) {
  return nn::conv_flops(nn::est_numel(nn::flops_in(ctx, 0)), nn::flops_in(ctx, 1));
}

}  // namespace gpuopt
