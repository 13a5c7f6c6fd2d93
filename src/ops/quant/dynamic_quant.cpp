// Integer-convolution and dynamic-quantisation ops beyond the engine-core list: ConvInteger
// (exact int64 accumulation, int32 output) and DynamicQuantizeLinear (float32 arithmetic step
// for step as the ONNX reference, so scales and zero points match bit for bit).
#include "ops/common/nn_util.h"

#include <cmath>

namespace gpuopt {

using nn::Window;

namespace {

bool is_8bit(DType t) { return t == DType::U8 || t == DType::I8; }

std::vector<int64_t> ints_of(const Tensor& t) {
  std::vector<int64_t> v(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) v[i] = t.get_i64(i);
  return v;
}

}  // namespace

// ---- ConvInteger ------------------------------------------------------------------------------
// Inputs: x (u8/i8), w (u8/i8), x_zero_point (scalar), w_zero_point (scalar or per output channel).

Status infer_ConvInteger(InferContext& ctx) {
  GPUOPT_RETURN_IF_ERROR(nn::require_inputs(ctx, 2));
  for (size_t i : {0, 1, 2, 3})
    if (ctx.has_input(i) && ctx.in(i).dtype != DType::Undefined && !is_8bit(ctx.in(i).dtype))
      return ctx.error("input {} has dtype {}; expected u8 or i8", i, dtype_name(ctx.in(i).dtype));
  const ValueInfo& x = ctx.in(0);
  const ValueInfo& w = ctx.in(1);
  ValueInfo& y = ctx.outputs[0];
  y.dtype = DType::I32;
  return nn::infer_integer_conv_shape(ctx, x, w, &y);
}

// y = sum (x - x_zero_point) * (w - w_zero_point); padded taps hold the zero point, so they add 0
// (the reference pads x - x_zero_point with zeros).
Status cpu_ConvInteger(KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  const Tensor& wt = ctx.in(1);
  GPUOPT_ASSIGN_OR_RETURN(Window win, nn::conv_window(ctx, x.shape(), wt.shape()));
  const int64_t N = x.dim(0), C = x.dim(1), M = wt.dim(0), G = ctx.node.attr_i("group", 1), Cg = C / G, Mg = M / G;
  const int64_t K = win.kernel_size(), O = win.out_size(), I = win.in_size();
  if (ctx.has_input(2) && ctx.in(2).numel() != 1)
    return ctx.error("x_zero_point must be a single value, got {}", ctx.in(2).describe());
  const int64_t xz = ctx.has_input(2) ? ctx.in(2).get_i64(0) : 0;
  const std::vector<int64_t> wz = ctx.has_input(3) ? ints_of(ctx.in(3)) : std::vector<int64_t>{0};
  if (wz.size() != 1 && static_cast<int64_t>(wz.size()) != M)
    return ctx.error("w_zero_point has {} values; expected 1 or {} (output channels)", wz.size(), M);
  const std::vector<int64_t> xv = ints_of(x), wv = ints_of(wt);
  const std::vector<int64_t> table = nn::window_gather_table(win);
  int32_t* y = ctx.out(0).data<int32_t>();
  std::vector<int64_t> acc(static_cast<size_t>(O));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t m = 0; m < M; ++m) {
      const int64_t g = m / Mg, wzero = wz.size() == 1 ? wz[0] : wz[m];
      std::fill(acc.begin(), acc.end(), 0);
      for (int64_t c = 0; c < Cg; ++c) {
        const int64_t* xin = xv.data() + (n * C + g * Cg + c) * I;
        const int64_t* wk = wv.data() + (m * Cg + c) * K;
        for (int64_t t = 0; t < K; ++t) {
          const int64_t wq = wk[t] - wzero;
          const int64_t* tab = table.data() + t * O;
          for (int64_t o = 0; o < O; ++o)
            if (tab[o] >= 0) acc[o] += (xin[tab[o]] - xz) * wq;
        }
      }
      for (int64_t o = 0; o < O; ++o) y[(n * M + m) * O + o] = static_cast<int32_t>(acc[o]);
    }
  return Status::Ok();
}

double flops_ConvInteger(const FlopsContext& ctx) {
  return nn::conv_flops(nn::est_numel(nn::flops_out(ctx, 0)), nn::flops_in(ctx, 1));
}

// ---- DynamicQuantizeLinear --------------------------------------------------------------------

Status infer_DynamicQuantizeLinear(InferContext& ctx) {
  GPUOPT_RETURN_IF_ERROR(nn::require_inputs(ctx, 1));
  const ValueInfo& x = ctx.in(0);
  if (x.dtype != DType::Undefined && x.dtype != DType::F32)
    return ctx.error("input has dtype {}; expected f32", dtype_name(x.dtype));
  ctx.outputs[0].dtype = DType::U8;
  ctx.outputs[0].rank_known = x.rank_known;
  ctx.outputs[0].shape = x.shape;
  for (size_t i = 1; i < 3 && i < ctx.outputs.size(); ++i) {
    ctx.outputs[i].dtype = i == 1 ? DType::F32 : DType::U8;
    ctx.outputs[i].rank_known = true;
    ctx.outputs[i].shape = {};
  }
  return Status::Ok();
}

// scale = (max(0, max x) - min(0, min x)) / 255 (1/255 when both are 0); zero point =
// round(clamp(-min / scale, 0, 255)); y = clamp(round(x / scale) + zero point, 0, 255), all in
// float32 with round half to even, as the reference and ONNX Runtime compute it.
Status cpu_DynamicQuantizeLinear(KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  const float* xv = x.data<float>();
  float mx = 0.0f, mn = 0.0f;
  for (int64_t i = 0; i < x.numel(); ++i) {
    if (std::isnan(xv[i])) return ctx.error("input element {} is NaN; no quantisation range exists", i);
    mx = std::max(mx, xv[i]);
    mn = std::min(mn, xv[i]);
  }
  const float scale = (mx == mn ? 1.0f : (mx - mn)) / 255.0f;
  const float zp0 = 0.0f - mn / scale;
  const float zp = std::nearbyint(std::max(0.0f, std::min(255.0f, zp0)));
  uint8_t* y = ctx.out(0).data<uint8_t>();
  for (int64_t i = 0; i < x.numel(); ++i)
    y[i] = static_cast<uint8_t>(std::max(0.0f, std::min(255.0f, std::nearbyint(xv[i] / scale) + zp)));
  if (ctx.outputs.size() > 1 && ctx.outputs[1]) ctx.out(1).data<float>()[0] = scale;
  if (ctx.outputs.size() > 2 && ctx.outputs[2]) ctx.out(2).data<uint8_t>()[0] = static_cast<uint8_t>(zp);
  return Status::Ok();
}

double flops_DynamicQuantizeLinear(const FlopsContext& ctx) {
  const double n = nn::est_numel(nn::flops_in(ctx, 0));
  return n < 0 ? 0 : n * 4;
}

}  // namespace gpuopt
