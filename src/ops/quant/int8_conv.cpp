// Int8Conv (domain ai.gpuopt), written by the fold_qdq pass (src/passes/fold_qdq.cpp) from
//
//   DequantizeLinear(x_q, x_scale) -> Conv(., DequantizeLinear(W_q, w_scale) [, B]) [-> Relu]
//        [-> QuantizeLinear(y_scale)]
//
//   inputs  X int8, W int8 (constant), x_scale (scalar), w_scale (scalar or [M]), B ([M], optional),
//           y_scale (scalar, optional); the scales and B share one float dtype.
//   attrs   Conv's (kernel_shape, strides, pads, dilations, group; no auto_pad), activation ("" or
//           "Relu"), channels_last (0: X [N, C, H, W], W [M, C/group, kH, kW], Y [N, M, OH, OW];
//           1: X [N, H, W, C], W [M, kH, kW, C/group], Y [N, OH, OW, M] — what layout_nhwc writes).
//   v[n, m, p] = act(sum X * W (exact, integer) * x_scale * w_scale[m] + B[m])
//   Y = saturate(round_half_even(v / y_scale)) as int8 when y_scale is given, else v in the
//   scales' float dtype.
//
// The residual form (fuse_int8_residual: an Int8Conv with an int8 output and the Int8Add that was
// its only reader, as ResNet's bottlenecks end) adds inputs Z (int8, Y's shape), z_scale
// (scalar) and out_scale (scalar, optional) and the attribute residual_activation ("" or
// "Relu"):
//   c = saturate(round_half_even(v / y_scale))       (the conv's own int8 output, as before)
//   r = act2(c * y_scale + Z * z_scale)
//   Y = saturate(round_half_even(r / out_scale)) as int8 when out_scale is given, else r
// which is the pair's arithmetic term for term (Int8Add's), so the fused reference equals the
// unfused one exactly. Input positions: int8_conv_schema.h.
//
// Zero points are 0 (symmetric int8, what gpuopt quantize writes and TensorRT requires). The
// reference accumulates exactly in int64 and applies the scales in double. Against the unfolded
// QDQ graph it differs only where that graph's float convolution rounds: a float output by the
// f32 rounding of the sum, an int8 output by at most one step where v / y_scale lies within
// that rounding of a half (tests/passes/fold_qdq_conv_test.cpp).
#include "ops/quant/int8_conv_schema.h"
#include "ops/common/nn_util.h"
#include "ops/common/nhwc_perm.h"
#include "ops/common/tensor_util.h"

#include <algorithm>
#include <cmath>

namespace gpuopt {

namespace {

using nhwc::kToNchw;
using nhwc::kToNhwc;
using nhwc::permute;

using namespace int8conv;

template <class Ctx>
Status check_attrs(const Ctx& ctx) {
  for (const char* name : {kActivation, kResidualActivation}) {
    const std::string a = ctx.node.attr_s(name, "");
    if (!a.empty() && a != "Relu") return ctx.error("{} '{}' is not one of '', 'Relu'", name, a);
  }
  const int64_t cl = ctx.node.attr_i("channels_last", 0);
  if (cl != 0 && cl != 1) return ctx.error("channels_last {} is not 0 or 1", cl);
  const std::string pad = ctx.node.attr_s("auto_pad", "NOTSET");
  if (pad != "NOTSET") return ctx.error("auto_pad '{}': Int8Conv takes explicit pads", pad);
  return Status::Ok();
}

bool has(const KernelContext& ctx, size_t i) {
  return ctx.has_input(i);
}

}  // namespace

Status infer_Int8Conv(InferContext& ctx) {
  GPUOPT_RETURN_IF_ERROR(nn::require_inputs(ctx, 4));
  GPUOPT_RETURN_IF_ERROR(check_attrs(ctx));
  for (size_t i : {0, 1})
    if (ctx.in(i).dtype != DType::Undefined && ctx.in(i).dtype != DType::I8)
      return ctx.error("input {} has dtype {}; expected i8", i, dtype_name(ctx.in(i).dtype));
  GPUOPT_RETURN_IF_ERROR(nn::require_float(ctx, 2, "x_scale"));
  GPUOPT_RETURN_IF_ERROR(nn::require_same_dtype(ctx, 2, 3));
  if (ctx.num_inputs() > kNumInputs) return ctx.error("{} inputs; expected at most {}", ctx.num_inputs(), size_t{kNumInputs});
  for (size_t i : {kBias, kYScale, kZScale, kOutScale})
    if (ctx.has_input(i)) GPUOPT_RETURN_IF_ERROR(nn::require_same_dtype(ctx, kXScale, i));
  const bool residual = ctx.has_input(kZ);
  if (residual) {
    if (ctx.in(kZ).dtype != DType::Undefined && ctx.in(kZ).dtype != DType::I8)
      return ctx.error("Z has dtype {}; expected i8", dtype_name(ctx.in(kZ).dtype));
    if (!ctx.has_input(kYScale) || !ctx.has_input(kZScale))
      return ctx.error("the residual form needs y_scale (input {}) and z_scale (input {})", size_t{kYScale}, size_t{kZScale});
  } else if (ctx.has_input(kZScale) || ctx.has_input(kOutScale)) {
    return ctx.error("z_scale and out_scale are only read with Z (input {})", size_t{kZ});
  }
  ValueInfo& y = ctx.outputs[0];
  y.dtype = (residual ? ctx.has_input(kOutScale) : ctx.has_input(kYScale)) ? DType::I8 : ctx.in(kXScale).dtype;
  const bool cl = ctx.node.attr_i("channels_last", 0) == 1;
  ValueInfo x = ctx.in(0), w = ctx.in(1);
  x.value = w.value = nullptr;
  for (ValueInfo* v : {&x, &w}) {
    if (!v->rank_known) continue;
    if (v->shape.size() != 4) return ctx.error("X and W must be 4-D; got rank {}", v->shape.size());
    if (cl) v->shape = permute(v->shape, kToNchw);
  }
  GPUOPT_RETURN_IF_ERROR(nn::infer_integer_conv_shape(ctx, x, w, &y));
  if (cl && y.rank_known) y.shape = permute(y.shape, kToNhwc);
  if (residual && y.rank_known && ctx.in(kZ).rank_known) {
    const Shape& z = ctx.in(kZ).shape;
    bool differ = z.size() != y.shape.size();
    for (size_t d = 0; !differ && d < z.size(); ++d)
      differ = dim_is_known(z[d]) && dim_is_known(y.shape[d]) && z[d] != y.shape[d];
    if (differ) return ctx.error("Z {} does not have Y's shape {}", shape_to_string(z), shape_to_string(y.shape));
  }
  return Status::Ok();
}

Status cpu_Int8Conv(KernelContext& ctx) {
  GPUOPT_RETURN_IF_ERROR(check_attrs(ctx));
  const bool cl = ctx.node.attr_i("channels_last", 0) == 1;
  const Tensor& x_in = ctx.in(0);
  const Tensor& w_in = ctx.in(1);
  if (x_in.dtype() != DType::I8 || w_in.dtype() != DType::I8 || x_in.rank() != 4 || w_in.rank() != 4)
    return ctx.error("X {} and W {} must be 4-D i8", x_in.describe(), w_in.describe());
  // Channels-last: the same computation on NCHW copies (the two layouts share every line below).
  Tensor xt, wt;
  if (cl) {
    xt = Tensor::empty(DType::I8, permute(x_in.shape(), kToNchw));
    tensor_util::transpose_view(x_in, x_in.shape(), kToNchw, xt);
    wt = Tensor::empty(DType::I8, permute(w_in.shape(), kToNchw));
    tensor_util::transpose_view(w_in, w_in.shape(), kToNchw, wt);
  }
  const Tensor& x = cl ? xt : x_in;
  const Tensor& w = cl ? wt : w_in;
  GPUOPT_ASSIGN_OR_RETURN(nn::Window win, nn::conv_window(ctx, x.shape(), w.shape()));
  const int64_t N = x.dim(0), C = x.dim(1), M = w.dim(0), G = ctx.node.attr_i("group", 1);
  if (G < 1 || C % G != 0 || M % G != 0 || w.dim(1) != C / G)
    return ctx.error("X {} and W {} do not match group {}", x.describe(), w.describe(), G);
  const int64_t Cg = C / G, Mg = M / G, K = win.kernel_size(), O = win.out_size(), I = win.in_size();
  const Tensor& ws = ctx.in(3);
  if (ctx.in(2).numel() != 1) return ctx.error("x_scale has {} values; expected 1", ctx.in(2).numel());
  if (ws.numel() != 1 && ws.numel() != M) return ctx.error("w_scale has {} values; expected 1 or {}", ws.numel(), M);
  if (has(ctx, 4) && ctx.in(4).numel() != M) return ctx.error("B has {} values; expected {}", ctx.in(4).numel(), M);
  for (size_t i : {kYScale, kZScale, kOutScale})
    if (has(ctx, i) && ctx.in(i).numel() != 1) return ctx.error("input {} has {} values; expected 1", i, ctx.in(i).numel());
  const bool relu = ctx.node.attr_s(kActivation, "") == "Relu";
  const double xs = ctx.in(2).get_f64(0), ys = has(ctx, 5) ? ctx.in(5).get_f64(0) : 0.0;
  const bool residual = has(ctx, kZ);
  if (residual && (!has(ctx, kYScale) || !has(ctx, kZScale) || ctx.in(kZ).dtype() != DType::I8 ||
                   ctx.in(kZ).shape() != ctx.out(0).shape()))
    return ctx.error("Z {} must be i8 of Y's shape {}, with y_scale and z_scale", ctx.in(kZ).describe(),
                     shape_to_string(ctx.out(0).shape()));
  // Z in the computation's NCHW order.
  Tensor zt;
  if (residual && cl) {
    zt = Tensor::empty(DType::I8, permute(ctx.in(kZ).shape(), kToNchw));
    tensor_util::transpose_view(ctx.in(kZ), ctx.in(kZ).shape(), kToNchw, zt);
  }
  const int8_t* Z = !residual ? nullptr : cl ? zt.data<int8_t>() : ctx.in(kZ).data<int8_t>();
  const bool relu2 = ctx.node.attr_s(kResidualActivation, "") == "Relu", requant2 = has(ctx, kOutScale);
  const double zs = residual ? ctx.in(kZScale).get_f64(0) : 0.0, os = requant2 ? ctx.in(kOutScale).get_f64(0) : 1.0;
  const std::vector<int64_t> table = nn::window_gather_table(win);
  const int8_t* X = x.data<int8_t>();
  const int8_t* W = w.data<int8_t>();
  std::vector<double> y(static_cast<size_t>(N * M * O));
  std::vector<int64_t> acc(static_cast<size_t>(O));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t m = 0; m < M; ++m) {
      const int64_t g = m / Mg;
      std::fill(acc.begin(), acc.end(), 0);
      for (int64_t c = 0; c < Cg; ++c) {
        const int8_t* xin = X + (n * C + g * Cg + c) * I;
        const int8_t* wk = W + (m * Cg + c) * K;
        for (int64_t t = 0; t < K; ++t) {
          const int64_t wq = wk[t];
          const int64_t* tab = table.data() + t * O;
          for (int64_t o = 0; o < O; ++o)
            if (tab[o] >= 0) acc[static_cast<size_t>(o)] += xin[tab[o]] * wq;
        }
      }
      const double scale = xs * ws.get_f64(ws.numel() == 1 ? 0 : m);
      const double bias = has(ctx, 4) ? ctx.in(4).get_f64(m) : 0.0;
      for (int64_t o = 0; o < O; ++o) {
        double v = static_cast<double>(acc[static_cast<size_t>(o)]) * scale + bias;
        if (relu) v = std::max(v, 0.0);
        if (has(ctx, 5)) v = std::clamp(std::nearbyint(v / ys), -128.0, 127.0);
        const size_t at = static_cast<size_t>((n * M + m) * O + o);
        if (residual) {  // Int8Add's arithmetic on (c, y_scale) and (Z, z_scale)
          v = v * ys + Z[at] * zs;
          if (relu2) v = std::max(v, 0.0);
          if (requant2) v = std::clamp(std::nearbyint(v / os), -128.0, 127.0);
        }
        y[at] = v;
      }
    }
  Tensor& out = ctx.out(0);
  if (!cl) {
    nn::from_doubles(out, y);
    return Status::Ok();
  }
  Tensor y_nchw = Tensor::empty(out.dtype(), permute(out.shape(), kToNchw));
  nn::from_doubles(y_nchw, y);
  tensor_util::transpose_view(y_nchw, y_nchw.shape(), kToNhwc, out);
  return Status::Ok();
}

// Two operations per multiply-accumulate, as Conv: output elements x (C/group x kernel taps), the
// trailing three dims of W in either layout.
double flops_Int8Conv(const FlopsContext& ctx) {
  return nn::conv_flops(nn::est_numel(nn::flops_out(ctx, 0)), nn::flops_in(ctx, 1));
}

}  // namespace gpuopt
