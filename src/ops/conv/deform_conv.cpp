// DeformConv (2-D), as onnx/reference/ops computes it, in double.
#include "ops/common/nn_util.h"
#include "ops/common/tensor_util.h"

#include <cmath>

namespace gpuopt {

// Inputs: X [N, C, H, W], W [M, C/group, kH, kW], offset [N, offset_group*kH*kW*2, oH, oW],
// B [M] (optional), mask [N, offset_group*kH*kW, oH, oW] (optional). 2-D only.

Status infer_DeformConv(InferContext& ctx) {
  GPUOPT_RETURN_IF_ERROR(tensor_util::check_inputs(ctx, 3, 5));
  for (size_t i = 0; i < 5; ++i)
    if (ctx.has_input(i)) GPUOPT_RETURN_IF_ERROR(nn::require_float(ctx, i, "input"));
  const ValueInfo& x = ctx.in(0);
  const ValueInfo& w = ctx.in(1);
  const ValueInfo& off = ctx.in(2);
  if (x.rank_known && x.shape.size() != 4) return ctx.error("only 2-D deformable convolution is supported (X rank {})", x.shape.size());
  if (w.rank_known && w.shape.size() != 4) return ctx.error("W must be rank 4, got {}", w.shape.size());
  if (off.rank_known && off.shape.size() != 4) return ctx.error("offset must be rank 4, got {}", off.shape.size());
  const int64_t G = ctx.node.attr_i("group", 1), OG = ctx.node.attr_i("offset_group", 1);
  if (G < 1 || OG < 1) return ctx.error("group {} and offset_group {} must be positive", G, OG);
  if (x.rank_known && w.rank_known && x.shape[1] >= 0 && w.shape[1] >= 0 && x.shape[1] != w.shape[1] * G)
    return ctx.error("X has {} channels but W expects {} x group {}", x.shape[1], w.shape[1], G);
  tensor_util::set_output(ctx, 0, x.dtype,
                          {x.rank_known ? x.shape[0] : kUnknownDim, w.rank_known ? w.shape[0] : kUnknownDim,
                           off.rank_known ? off.shape[2] : kUnknownDim, off.rank_known ? off.shape[3] : kUnknownDim});
  return Status::Ok();
}

// y[n, m, i, j] = B[m] + sum over c in m's group, taps (a, b) of
//   W[m, c, a, b] * mask * bilinear(X[n, c], i*sh - pad_t + a*dh + dy, j*sw - pad_l + b*dw + dx)
// where (dy, dx) and mask come from the tap's offset group; samples outside X read 0.
Status cpu_DeformConv(KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  const Tensor& wt = ctx.in(1);
  const Tensor& off = ctx.in(2);
  if (x.rank() != 4 || wt.rank() != 4 || off.rank() != 4) return ctx.error("only 2-D deformable convolution is supported");
  const int64_t N = x.dim(0), C = x.dim(1), H = x.dim(2), W = x.dim(3), M = wt.dim(0), Cg = wt.dim(1);
  const int64_t G = ctx.node.attr_i("group", 1), OG = ctx.node.attr_i("offset_group", 1);
  std::vector<int64_t> ks = ctx.node.attr_ints("kernel_shape", {wt.dim(2), wt.dim(3)});
  if (ks.size() != 2 || ks[0] != wt.dim(2) || ks[1] != wt.dim(3)) return ctx.error("kernel_shape does not match W {}", wt.describe());
  const int64_t KH = ks[0], KW = ks[1], OH = off.dim(2), OW = off.dim(3);
  const std::vector<int64_t> st = ctx.node.attr_ints("strides", {1, 1}), dl = ctx.node.attr_ints("dilations", {1, 1});
  const std::vector<int64_t> pd = ctx.node.attr_ints("pads", {0, 0, 0, 0});
  if (st.size() != 2 || dl.size() != 2 || pd.size() != 4) return ctx.error("strides/dilations need 2 values and pads 4");
  if (C != Cg * G || M % G != 0 || C % OG != 0) return ctx.error("channels {} / {} do not fit group {} and offset_group {}", C, M, G, OG);
  if (off.dim(0) != N || off.dim(1) != OG * KH * KW * 2)
    return ctx.error("offset {} must be [{}, {}, oH, oW]", off.describe(), N, OG * KH * KW * 2);
  const int64_t eh = (KH - 1) * dl[0] + 1, ew = (KW - 1) * dl[1] + 1;
  if (OH != (H - eh + pd[0] + pd[2]) / st[0] + 1 || OW != (W - ew + pd[1] + pd[3]) / st[1] + 1)
    return ctx.error("offset spatial dims {}x{} do not match the convolution output", OH, OW);
  const bool has_mask = ctx.has_input(4);
  if (has_mask && ctx.in(4).shape() != Shape{N, OG * KH * KW, OH, OW})
    return ctx.error("mask {} must be [{}, {}, {}, {}]", ctx.in(4).describe(), N, OG * KH * KW, OH, OW);
  if (ctx.has_input(3) && ctx.in(3).numel() != M) return ctx.error("B has {} values for {} output channels", ctx.in(3).numel(), M);
  const std::vector<double> xv = nn::to_doubles(x), wv = nn::to_doubles(wt), ov = nn::to_doubles(off);
  const std::vector<double> mv = has_mask ? nn::to_doubles(ctx.in(4)) : std::vector<double>{};
  const std::vector<double> bv = ctx.has_input(3) ? nn::to_doubles(ctx.in(3)) : std::vector<double>(M, 0.0);
  auto sample = [&](const double* img, double py, double px) {
    if (!std::isfinite(py) || !std::isfinite(px) || std::fabs(py) > 1e9 || std::fabs(px) > 1e9) return 0.0;
    const double fy = std::floor(py), fx = std::floor(px);
    const int64_t y0 = static_cast<int64_t>(fy), x0 = static_cast<int64_t>(fx);
    const double ty = py - fy, tx = px - fx;
    double s = 0;
    for (int a = 0; a < 2; ++a)
      for (int b = 0; b < 2; ++b) {
        const int64_t yy = y0 + a, xx = x0 + b;
        if (yy < 0 || yy >= H || xx < 0 || xx >= W) continue;
        s += (a ? ty : 1 - ty) * (b ? tx : 1 - tx) * img[yy * W + xx];
      }
    return s;
  };
  const int64_t Mg = M / G, Cog = C / OG, K = KH * KW;
  std::vector<double> y(static_cast<size_t>(N * M * OH * OW));
  std::vector<double> cols(static_cast<size_t>(C * K));  // sampled (and masked) input per output position
  for (int64_t n = 0; n < N; ++n)
    for (int64_t i = 0; i < OH; ++i)
      for (int64_t j = 0; j < OW; ++j) {
        for (int64_t c = 0; c < C; ++c) {
          const int64_t og = c / Cog;
          for (int64_t k = 0; k < K; ++k) {
            const int64_t a = k / KW, b = k % KW;
            const int64_t obase = ((n * OG + og) * K + k) * 2;
            const double dy = ov[(obase * OH + i) * OW + j], dx = ov[((obase + 1) * OH + i) * OW + j];
            const double py = static_cast<double>(i * st[0] - pd[0] + a * dl[0]) + dy;
            const double px = static_cast<double>(j * st[1] - pd[1] + b * dl[1]) + dx;
            double v = sample(xv.data() + (n * C + c) * H * W, py, px);
            if (has_mask) v *= mv[(((n * OG + og) * K + k) * OH + i) * OW + j];
            cols[c * K + k] = v;
          }
        }
        for (int64_t m = 0; m < M; ++m) {
          const int64_t g = m / Mg;
          double s = bv[m];
          for (int64_t cg = 0; cg < Cg; ++cg)
            for (int64_t k = 0; k < K; ++k) s += wv[(m * Cg + cg) * K + k] * cols[(g * Cg + cg) * K + k];
          y[((n * M + m) * OH + i) * OW + j] = s;
        }
      }
  nn::from_doubles(ctx.out(0), y);
  return Status::Ok();
}
double flops_DeformConv(const FlopsContext& ctx) {
  return nn::conv_flops(nn::est_numel(nn::flops_out(ctx, 0)), nn::flops_in(ctx, 1));
}

}  // namespace gpuopt
