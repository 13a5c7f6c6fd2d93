// RoiAlign, as onnx/reference/ops computes it (PyTorch's), in double.
#include "ops/common/nn_util.h"
#include "ops/common/tensor_util.h"

#include <cmath>

namespace gpuopt {

Status infer_RoiAlign(InferContext& ctx) {
  GPUOPT_RETURN_IF_ERROR(tensor_util::check_inputs(ctx, 3, 3));
  GPUOPT_RETURN_IF_ERROR(nn::require_float(ctx, 0, "X"));
  GPUOPT_RETURN_IF_ERROR(nn::require_float(ctx, 1, "rois"));
  GPUOPT_RETURN_IF_ERROR(tensor_util::require_int_tensor(ctx, 2, "batch_indices"));
  const std::string mode = ctx.node.attr_s("mode", "avg");
  if (mode != "avg" && mode != "max") return ctx.error("mode '{}' is not avg or max", mode);
  const std::string ctm = ctx.node.attr_s("coordinate_transformation_mode", "half_pixel");
  if (ctm != "half_pixel" && ctm != "output_half_pixel")
    return ctx.error("coordinate_transformation_mode '{}' is not half_pixel or output_half_pixel", ctm);
  const int64_t oh = ctx.node.attr_i("output_height", 1), ow = ctx.node.attr_i("output_width", 1);
  if (oh < 1 || ow < 1) return ctx.error("output_height {} and output_width {} must be positive", oh, ow);
  const ValueInfo& x = ctx.in(0);
  const ValueInfo& rois = ctx.in(1);
  const ValueInfo& bi = ctx.in(2);
  if (x.rank_known && x.shape.size() != 4) return ctx.error("X must be [N, C, H, W], got rank {}", x.shape.size());
  if (rois.rank_known && (rois.shape.size() != 2 || (rois.shape[1] >= 0 && rois.shape[1] != 4)))
    return ctx.error("rois must be [num_rois, 4], got {}", dims_string(rois.shape));
  if (bi.rank_known && bi.shape.size() != 1) return ctx.error("batch_indices must be 1-D, got rank {}", bi.shape.size());
  int64_t R = rois.rank_known ? rois.shape[0] : kUnknownDim;
  if (bi.rank_known && !tensor_util::merge_dim(R, bi.shape[0], &R))
    return ctx.error("rois has {} rows but batch_indices {}", rois.shape[0], bi.shape[0]);
  tensor_util::set_output(ctx, 0, x.dtype, {R, x.rank_known ? x.shape[1] : kUnknownDim, oh, ow});
  return Status::Ok();
}

// Each output bin averages (or maxes) bilinear samples on a sampling_ratio^2 grid (adaptive:
// ceil(roi extent / bins) when 0); as the reference, the max mode takes the largest weighted
// corner term of each sample, and samples outside [-1, extent] count as 0.
Status cpu_RoiAlign(KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  const int64_t C = x.dim(1), H = x.dim(2), W = x.dim(3), B = x.dim(0);
  const int64_t R = ctx.in(1).dim(0), PH = ctx.out(0).dim(2), PW = ctx.out(0).dim(3);
  const bool half_pixel = ctx.node.attr_s("coordinate_transformation_mode", "half_pixel") == "half_pixel";
  const bool avg = ctx.node.attr_s("mode", "avg") == "avg";
  const double scale = ctx.node.attr_f("spatial_scale", 1.0f);
  const int64_t ratio = ctx.node.attr_i("sampling_ratio", 0);
  const std::vector<double> xv = nn::to_doubles(x), rv = nn::to_doubles(ctx.in(1));
  std::vector<double> y(static_cast<size_t>(R * C * PH * PW));
  struct Tap {
    int64_t pos[4];
    double w[4];
  };
  for (int64_t r = 0; r < R; ++r) {
    const int64_t b = ctx.in(2).get_i64(r);
    if (b < 0 || b >= B) return ctx.error("batch_indices[{}] = {} is outside [0, {})", r, b, B);
    const double off = half_pixel ? 0.5 : 0.0;
    const double x0 = rv[r * 4] * scale - off, y0 = rv[r * 4 + 1] * scale - off;
    double rw = rv[r * 4 + 2] * scale - off - x0, rh = rv[r * 4 + 3] * scale - off - y0;
    if (!half_pixel) rw = std::max(rw, 1.0), rh = std::max(rh, 1.0);
    const double bh = rh / static_cast<double>(PH), bw = rw / static_cast<double>(PW);
    auto grid = [&](double extent, int64_t bins) {
      const double g = std::ceil(extent / static_cast<double>(bins));
      return std::isfinite(g) ? static_cast<int64_t>(std::min(std::max(g, 0.0), 1e9)) : int64_t{0};
    };
    const int64_t gh = ratio > 0 ? ratio : grid(rh, PH);
    const int64_t gw = ratio > 0 ? ratio : grid(rw, PW);
    if (!std::isfinite(x0) || !std::isfinite(y0) || !std::isfinite(rw) || !std::isfinite(rh))
      return ctx.error("roi {} has a non-finite coordinate", r);
    if (gh * gw > (int64_t{1} << 20))
      return ctx.error("roi {} needs a {}x{} sampling grid per bin; set sampling_ratio", r, gh, gw);
    const double count = static_cast<double>(std::max<int64_t>(gh * gw, 1));
    std::vector<Tap> taps;
    taps.reserve(static_cast<size_t>(PH * PW * std::max<int64_t>(gh * gw, 0)));
    for (int64_t ph = 0; ph < PH; ++ph)
      for (int64_t pw = 0; pw < PW; ++pw)
        for (int64_t iy = 0; iy < gh; ++iy) {
          const double yy = y0 + static_cast<double>(ph) * bh + (static_cast<double>(iy) + 0.5) * bh / static_cast<double>(gh);
          for (int64_t ix = 0; ix < gw; ++ix) {
            const double xx = x0 + static_cast<double>(pw) * bw + (static_cast<double>(ix) + 0.5) * bw / static_cast<double>(gw);
            Tap t{{0, 0, 0, 0}, {0, 0, 0, 0}};
            if (!(yy < -1.0 || yy > static_cast<double>(H) || xx < -1.0 || xx > static_cast<double>(W))) {
              double sy = std::max(yy, 0.0), sx = std::max(xx, 0.0);
              int64_t yl = static_cast<int64_t>(sy), xl = static_cast<int64_t>(sx), yh, xh;
              if (yl >= H - 1) yh = yl = H - 1, sy = static_cast<double>(yl);
              else yh = yl + 1;
              if (xl >= W - 1) xh = xl = W - 1, sx = static_cast<double>(xl);
              else xh = xl + 1;
              const double ly = sy - static_cast<double>(yl), lx = sx - static_cast<double>(xl);
              const double hy = 1 - ly, hx = 1 - lx;
              t = Tap{{yl * W + xl, yl * W + xh, yh * W + xl, yh * W + xh}, {hy * hx, hy * lx, ly * hx, ly * lx}};
            }
            taps.push_back(t);
          }
        }
    for (int64_t c = 0; c < C; ++c) {
      const double* img = xv.data() + (b * C + c) * H * W;
      size_t k = 0;
      for (int64_t p = 0; p < PH * PW; ++p) {
        double acc = 0;
        for (int64_t s = 0; s < gh * gw; ++s, ++k) {
          const Tap& t = taps[k];
          if (avg) {
            acc += t.w[0] * img[t.pos[0]] + t.w[1] * img[t.pos[1]] + t.w[2] * img[t.pos[2]] + t.w[3] * img[t.pos[3]];
          } else {
            const double v = std::max(std::max(t.w[0] * img[t.pos[0]], t.w[1] * img[t.pos[1]]),
                                      std::max(t.w[2] * img[t.pos[2]], t.w[3] * img[t.pos[3]]));
            acc = s == 0 ? v : std::max(acc, v);
          }
        }
        y[(r * C + c) * PH * PW + p] = avg ? acc / count : acc;
      }
    }
  }
  nn::from_doubles(ctx.out(0), y);
  return Status::Ok();
}
double flops_RoiAlign(const FlopsContext& ctx) {
  const double n = nn::est_numel(nn::flops_out(ctx, 0));
  return n < 0 ? 0 : n * 4 * 8;
}

}  // namespace gpuopt
