// Image-geometry ops: Col2Im (N-d), AffineGrid (2-D and 3-D) and GridSample (N-d; nearest,
// linear, cubic; zeros, border, reflection padding); RoiAlign is in ops/detect, DeformConv in
// ops/conv. Semantics are
// those of onnx/reference/ops (PyTorch's), computed in double.
#include "ops/common/nn_util.h"
#include "ops/common/tensor_util.h"

#include <cmath>

namespace gpuopt {

namespace {

std::vector<int64_t> unravel(int64_t i, const std::vector<int64_t>& dims) {
  std::vector<int64_t> c(dims.size());
  for (size_t d = dims.size(); d-- > 0;) {
    c[d] = i % dims[d];
    i /= dims[d];
  }
  return c;
}

}  // namespace

// ---- Col2Im -------------------------------------------------------------------------------------

namespace {
struct Col2ImGeom {
  std::vector<int64_t> image, block, strides, dilations, pads, blocks;  // blocks: sliding positions per dim
};

Result<Col2ImGeom> col2im_geom(const Node& node, std::vector<int64_t> image, std::vector<int64_t> block) {
  Col2ImGeom g;
  const size_t nd = image.size();
  if (nd == 0 || block.size() != nd)
    return Status::InvalidArgument("{}: image_shape {} and block_shape {} must be non-empty and of equal length",
                                   node_label(node), nn::ints_str(image), nn::ints_str(block));
  g.image = std::move(image);
  g.block = std::move(block);
  g.strides = node.attr_ints("strides", std::vector<int64_t>(nd, 1));
  g.dilations = node.attr_ints("dilations", std::vector<int64_t>(nd, 1));
  g.pads = node.attr_ints("pads", std::vector<int64_t>(2 * nd, 0));
  if (g.strides.size() != nd || g.dilations.size() != nd || g.pads.size() != 2 * nd)
    return Status::InvalidArgument("{}: strides/dilations need {} values and pads {}", node_label(node), nd, 2 * nd);
  for (size_t d = 0; d < nd; ++d) {
    if (g.block[d] < 1 || g.strides[d] < 1 || g.dilations[d] < 1 || g.image[d] < 1)
      return Status::InvalidArgument("{}: block_shape, image_shape, strides and dilations must be positive",
                                     node_label(node));
    const int64_t n = (g.image[d] + g.pads[d] + g.pads[nd + d] - g.dilations[d] * (g.block[d] - 1) - 1) / g.strides[d] + 1;
    if (n < 1) return Status::InvalidArgument("{}: no sliding block fits spatial dim {}", node_label(node), d);
    g.blocks.push_back(n);
  }
  return g;
}
}  // namespace

Status infer_Col2Im(InferContext& ctx) {
  GPUOPT_RETURN_IF_ERROR(tensor_util::check_inputs(ctx, 3, 3));
  GPUOPT_RETURN_IF_ERROR(nn::require_float(ctx, 0, "input"));
  GPUOPT_RETURN_IF_ERROR(tensor_util::require_int_tensor(ctx, 1, "image_shape"));
  GPUOPT_RETURN_IF_ERROR(tensor_util::require_int_tensor(ctx, 2, "block_shape"));
  const ValueInfo& x = ctx.in(0);
  if (x.rank_known && x.shape.size() != 3) return ctx.error("input must be [N, C * prod(block_shape), L], got rank {}", x.shape.size());
  auto image = tensor_util::const_ints(ctx, 1);
  auto block = tensor_util::const_ints(ctx, 2);
  if (!image || !block) {
    const int64_t nd = image ? static_cast<int64_t>(image->size()) : ctx.in(1).rank_known && ctx.in(1).shape.size() == 1 ? ctx.in(1).shape[0] : -1;
    tensor_util::set_output_rank(ctx, 0, x.dtype, nd >= 0 ? nd + 2 : -1);
    return Status::Ok();
  }
  GPUOPT_ASSIGN_OR_RETURN(Col2ImGeom g, col2im_geom(ctx.node, *image, *block));
  const int64_t bl = shape_numel(g.block), L = shape_numel(g.blocks);
  int64_t C = kUnknownDim;
  if (x.rank_known) {
    if (x.shape[1] >= 0) {
      if (x.shape[1] % bl != 0) return ctx.error("input dim 1 ({}) is not divisible by prod(block_shape) {}", x.shape[1], bl);
      C = x.shape[1] / bl;
    }
    if (x.shape[2] >= 0 && x.shape[2] != L)
      return ctx.error("input dim 2 ({}) must equal the number of sliding blocks {}", x.shape[2], L);
  }
  Shape out = {x.rank_known ? x.shape[0] : kUnknownDim, C};
  out.insert(out.end(), g.image.begin(), g.image.end());
  tensor_util::set_output(ctx, 0, x.dtype, out);
  return Status::Ok();
}

// Every column entry (channel c, kernel tap k, block position b) is added to the image pixel
// b * stride - pad_begin + k * dilation when that pixel is inside the image.
Status cpu_Col2Im(KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  GPUOPT_ASSIGN_OR_RETURN(Col2ImGeom g, col2im_geom(ctx.node, ctx.in(1).to_i64_vector(), ctx.in(2).to_i64_vector()));
  const size_t nd = g.image.size();
  const int64_t N = x.dim(0), bl = shape_numel(g.block), C = x.dim(1) / bl, L = x.dim(2), P = shape_numel(g.image);
  if (x.dim(1) % bl != 0 || L != shape_numel(g.blocks))
    return ctx.error("input {} does not match block_shape {} and {} sliding blocks", x.describe(),
                     nn::ints_str(g.block), shape_numel(g.blocks));
  // Image offset for (tap, block position), or -1 when it falls in the padding.
  std::vector<int64_t> target(static_cast<size_t>(bl * L));
  for (int64_t k = 0; k < bl; ++k) {
    const std::vector<int64_t> kc = unravel(k, g.block);
    for (int64_t b = 0; b < L; ++b) {
      const std::vector<int64_t> bc = unravel(b, g.blocks);
      int64_t off = 0;
      for (size_t d = 0; d < nd && off >= 0; ++d) {
        const int64_t p = bc[d] * g.strides[d] - g.pads[d] + kc[d] * g.dilations[d];
        off = (p < 0 || p >= g.image[d]) ? -1 : off * g.image[d] + p;
      }
      target[k * L + b] = off;
    }
  }
  const std::vector<double> xv = nn::to_doubles(x);
  std::vector<double> y(static_cast<size_t>(N * C * P), 0.0);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t k = 0; k < bl; ++k)
        for (int64_t b = 0; b < L; ++b) {
          const int64_t t = target[k * L + b];
          if (t >= 0) y[(n * C + c) * P + t] += xv[((n * C + c) * bl + k) * L + b];
        }
  nn::from_doubles(ctx.out(0), y);
  return Status::Ok();
}
double flops_Col2Im(const FlopsContext& ctx) {
  const double n = nn::est_numel(nn::flops_in(ctx, 0));
  return n < 0 ? 0 : n;
}

// ---- AffineGrid ---------------------------------------------------------------------------------

Status infer_AffineGrid(InferContext& ctx) {
  GPUOPT_RETURN_IF_ERROR(tensor_util::check_inputs(ctx, 2, 2));
  GPUOPT_RETURN_IF_ERROR(nn::require_float(ctx, 0, "theta"));
  GPUOPT_RETURN_IF_ERROR(tensor_util::require_int_tensor(ctx, 1, "size"));
  const ValueInfo& th = ctx.in(0);
  auto size = tensor_util::const_ints(ctx, 1);
  if (!size) {
    const ValueInfo& s = ctx.in(1);
    const int64_t n = s.rank_known && s.shape.size() == 1 ? s.shape[0] : -1;
    tensor_util::set_output_rank(ctx, 0, th.dtype, n >= 0 ? n : -1);
    return Status::Ok();
  }
  if (size->size() != 4 && size->size() != 5)
    return ctx.error("size {} must be [N, C, H, W] or [N, C, D, H, W]", dims_string(*size));
  const int64_t nd = static_cast<int64_t>(size->size()) - 2;
  for (int64_t v : *size)
    if (v < 0) return ctx.error("size {} has a negative extent", dims_string(*size));
  if (th.rank_known) {
    if (th.shape.size() != 3 || (th.shape[1] >= 0 && th.shape[1] != nd) || (th.shape[2] >= 0 && th.shape[2] != nd + 1))
      return ctx.error("theta shape {} must be [N, {}, {}] for size {}", dims_string(th.shape), nd, nd + 1,
                       dims_string(*size));
    if (th.shape[0] >= 0 && th.shape[0] != (*size)[0])
      return ctx.error("theta has batch {} but size says {}", th.shape[0], (*size)[0]);
  }
  Shape out = {(*size)[0]};
  for (int64_t d = 0; d < nd; ++d) out.push_back((*size)[2 + d]);
  out.push_back(nd);
  tensor_util::set_output(ctx, 0, th.dtype, out);
  return Status::Ok();
}

// grid[n, (d,) h, w] = theta[n] @ (x_w, y_h, (z_d,) 1), with base coordinates spanning [-1, 1]
// at pixel corners (align_corners) or pixel centres.
Status cpu_AffineGrid(KernelContext& ctx) {
  const Tensor& th = ctx.in(0);
  const std::vector<int64_t> size = ctx.in(1).to_i64_vector();
  const int64_t nd = static_cast<int64_t>(size.size()) - 2, N = size[0];
  if (th.rank() != 3 || th.dim(0) != N || th.dim(1) != nd || th.dim(2) != nd + 1)
    return ctx.error("theta {} does not match size {}", th.describe(), dims_string(size));
  const bool align = ctx.node.attr_i("align_corners", 0) != 0;
  auto base = [&](int64_t i, int64_t n) {
    if (align) return n == 1 ? -1.0 : -1.0 + 2.0 * static_cast<double>(i) / static_cast<double>(n - 1);
    return -1.0 + (2.0 * static_cast<double>(i) + 1.0) / static_cast<double>(n);
  };
  const std::vector<int64_t> spatial(size.begin() + 2, size.end());
  const int64_t P = shape_numel(spatial);
  const std::vector<double> tv = nn::to_doubles(th);
  std::vector<double> y(static_cast<size_t>(N * P * nd));
  std::vector<double> h(static_cast<size_t>(nd + 1), 1.0);
  for (int64_t p = 0; p < P; ++p) {
    const std::vector<int64_t> c = unravel(p, spatial);
    // homogeneous coordinate: x from the last spatial dim, then y, then z
    for (int64_t k = 0; k < nd; ++k) h[k] = base(c[nd - 1 - k], spatial[nd - 1 - k]);
    for (int64_t n = 0; n < N; ++n)
      for (int64_t r = 0; r < nd; ++r) {
        double s = 0;
        for (int64_t k = 0; k <= nd; ++k) s += tv[(n * nd + r) * (nd + 1) + k] * h[k];
        y[(n * P + p) * nd + r] = s;
      }
  }
  nn::from_doubles(ctx.out(0), y);
  return Status::Ok();
}
double flops_AffineGrid(const FlopsContext& ctx) {
  const double n = nn::est_numel(nn::flops_out(ctx, 0));
  return n < 0 ? 0 : n * 8;
}

// ---- GridSample ---------------------------------------------------------------------------------

namespace {

enum class Padding { kZeros, kBorder, kReflection };

// Reflects x into [lo, hi] by the nearer border, repeatedly (PyTorch's reflect_coordinates).
double reflect(double x, double lo, double hi) {
  const double rng = hi - lo;
  if (rng <= 0) return lo;
  if (x < lo) {
    const double dx = lo - x;
    const double n = std::trunc(dx / rng);
    const double r = dx - n * rng;
    return std::fmod(n, 2.0) == 0 ? lo + r : hi - r;
  }
  if (x > hi) {
    const double dx = x - hi;
    const double n = std::trunc(dx / rng);
    const double r = dx - n * rng;
    return std::fmod(n, 2.0) == 0 ? hi - r : lo + r;
  }
  return x;
}

void cubic_coeffs(double t, double c[4]) {
  constexpr double A = -0.75;
  const double x1 = t + 1, x2 = 1 - t, x3 = 2 - t;
  c[0] = ((A * x1 - 5 * A) * x1 + 8 * A) * x1 - 4 * A;
  c[1] = ((A + 2) * t - (A + 3)) * t * t + 1;
  c[2] = ((A + 2) * x2 - (A + 3)) * x2 * x2 + 1;
  c[3] = ((A * x3 - 5 * A) * x3 + 8 * A) * x3 - 4 * A;
}

struct SampleGeom {
  std::vector<int64_t> dims;  // input spatial extents
  std::vector<double> lo, hi;  // reflection borders per dim
  Padding pad;
};

// Index along dim d after the padding rule, or -1 for "zero".
int64_t tap_index(int64_t i, size_t d, const SampleGeom& g) {
  const int64_t n = g.dims[d];
  switch (g.pad) {
    case Padding::kZeros:
      return i >= 0 && i < n ? i : -1;
    case Padding::kBorder:
      return std::min(std::max<int64_t>(i, 0), n - 1);
    case Padding::kReflection:
      return static_cast<int64_t>(reflect(static_cast<double>(i), g.lo[d], g.hi[d]));
  }
  return -1;
}


// nd_form: the form from opset 20 (N-D input, modes linear/cubic); before it, 4-D input with
// modes bilinear/bicubic (GridSample_v1).
Status infer_gridsample(InferContext& ctx, bool nd_form) {
  GPUOPT_RETURN_IF_ERROR(tensor_util::check_inputs(ctx, 2, 2));
  GPUOPT_RETURN_IF_ERROR(nn::require_float(ctx, 0, "X"));
  GPUOPT_RETURN_IF_ERROR(nn::require_float(ctx, 1, "grid"));
  std::string mode = ctx.node.attr_s("mode", nd_form ? "linear" : "bilinear");
  if (mode != "nearest" && mode != "linear" && mode != "bilinear" && mode != "cubic" && mode != "bicubic")
    return ctx.error("mode '{}' is not nearest, linear or cubic", mode);
  const std::string pad = ctx.node.attr_s("padding_mode", "zeros");
  if (pad != "zeros" && pad != "border" && pad != "reflection")
    return ctx.error("padding_mode '{}' is not zeros, border or reflection", pad);
  const ValueInfo& x = ctx.in(0);
  const ValueInfo& grid = ctx.in(1);
  if (!x.rank_known || !grid.rank_known) {
    tensor_util::set_output_rank(ctx, 0, x.dtype, x.rank_known ? static_cast<int64_t>(x.shape.size()) : -1);
    return Status::Ok();
  }
  const size_t nd = x.shape.size() - 2;
  if (x.shape.size() < 3) return ctx.error("X rank {} is below 3", x.shape.size());
  if (grid.shape.size() != x.shape.size() || (grid.shape.back() >= 0 && grid.shape.back() != static_cast<int64_t>(nd)))
    return ctx.error("grid shape {} must be [N, spatial..., {}] for X {}", dims_string(grid.shape), nd,
                     dims_string(x.shape));
  if (x.shape[0] >= 0 && grid.shape[0] >= 0 && x.shape[0] != grid.shape[0])
    return ctx.error("grid batch {} differs from X batch {}", grid.shape[0], x.shape[0]);
  if ((mode == "cubic" || mode == "bicubic") && nd != 2 && !nd_form)
    return ctx.error("cubic mode needs 4-D input before opset 20");
  Shape out = {x.shape[0], x.shape[1]};
  out.insert(out.end(), grid.shape.begin() + 1, grid.shape.end() - 1);
  tensor_util::set_output(ctx, 0, x.dtype, out);
  return Status::Ok();
}

}  // namespace

Status infer_GridSample_v1(InferContext& ctx) { return infer_gridsample(ctx, false); }
Status infer_GridSample(InferContext& ctx) { return infer_gridsample(ctx, true); }
Status cpu_GridSample_v1(KernelContext& ctx) { return cpu_GridSample(ctx); }

// For each output position the grid gives normalised coordinates (x, y, z: last spatial dim
// first) that are mapped to pixel space, then sampled by nearest (round half to even), a
// separable linear, or a separable cubic (Keys, a = -0.75) kernel; taps outside the input follow
// padding_mode. As the reference, out-of-range coordinates are first clamped (border) or
// reflected (reflection) and the taps then follow the same rule.
Status cpu_GridSample(KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  const Tensor& grid = ctx.in(1);
  const std::string mode_s = ctx.node.attr_s("mode", "linear");  // the default of both forms is (bi)linear
  const int mode = mode_s == "nearest" ? 0 : (mode_s == "linear" || mode_s == "bilinear") ? 1 : 2;
  const std::string pad_s = ctx.node.attr_s("padding_mode", "zeros");
  const bool align = ctx.node.attr_i("align_corners", 0) != 0;
  SampleGeom g;
  g.pad = pad_s == "border" ? Padding::kBorder : pad_s == "reflection" ? Padding::kReflection : Padding::kZeros;
  const size_t nd = static_cast<size_t>(x.rank()) - 2;
  g.dims.assign(x.shape().begin() + 2, x.shape().end());
  for (size_t d = 0; d < nd; ++d) {
    g.lo.push_back(align ? 0.0 : -0.5);
    g.hi.push_back(align ? static_cast<double>(g.dims[d]) - 1.0 : static_cast<double>(g.dims[d]) - 0.5);
  }
  const int64_t N = x.dim(0), C = x.dim(1), P = shape_numel(g.dims);
  const int64_t Q = shape_numel(Shape(grid.shape().begin() + 1, grid.shape().end() - 1));
  const std::vector<double> xv = nn::to_doubles(x), gv = nn::to_doubles(grid);
  std::vector<double> y(static_cast<size_t>(N * C * Q));
  const int taps = mode == 0 ? 1 : mode == 1 ? 2 : 4;
  // Per output position: for each dim, `taps` (index or -1, weight) pairs.
  std::vector<int64_t> idx(nd * taps);
  std::vector<double> wts(nd * taps);
  std::vector<int64_t> st(nd, 1);
  for (size_t d = nd; d-- > 1;) st[d - 1] = st[d] * g.dims[d];
  for (int64_t n = 0; n < N; ++n)
    for (int64_t q = 0; q < Q; ++q) {
      for (size_t d = 0; d < nd; ++d) {
        const double norm = gv[(n * Q + q) * nd + (nd - 1 - d)];
        const double len = static_cast<double>(g.dims[d]);
        double v = align ? (norm + 1) / 2.0 * (len - 1) : ((norm + 1) * len - 1) / 2.0;
        if (mode == 0) v = std::nearbyint(v);
        if (!std::isfinite(v)) {  // NaN/Inf grid values sample nothing (0), whatever the padding
          for (int k = 0; k < taps; ++k) idx[d * taps + k] = -1;
          continue;
        }
        if (v < g.lo[d] || v > g.hi[d]) {
          if (g.pad == Padding::kBorder) v = std::min(std::max(v, 0.0), len - 1);
          else if (g.pad == Padding::kReflection) v = reflect(v, g.lo[d], g.hi[d]);
          else v = std::min(std::max(v, -4.0), len + 4);  // zeros: every tap is outside already
        }
        if (mode == 0) {
          idx[d] = tap_index(static_cast<int64_t>(v), d, g);
          wts[d] = 1;
          continue;
        }
        const double f = std::floor(v);
        const int64_t i0 = static_cast<int64_t>(f);
        const double t = v - f;
        if (mode == 1) {
          idx[d * 2] = tap_index(i0, d, g);
          idx[d * 2 + 1] = tap_index(i0 + 1, d, g);
          wts[d * 2] = 1 - t;
          wts[d * 2 + 1] = t;
        } else {
          double c[4];
          cubic_coeffs(t, c);
          for (int k = 0; k < 4; ++k) {
            idx[d * 4 + k] = tap_index(i0 - 1 + k, d, g);
            wts[d * 4 + k] = c[k];
          }
        }
      }
      // Sum over the taps^nd corners.
      int64_t corners = 1;
      for (size_t d = 0; d < nd; ++d) corners *= taps;
      for (int64_t c = 0; c < C; ++c) {
        const double* img = xv.data() + (n * C + c) * P;
        double s = 0;
        for (int64_t k = 0; k < corners; ++k) {
          int64_t r = k, off = 0;
          double w = 1;
          bool zero = false;
          for (size_t d = nd; d-- > 0;) {
            const int64_t j = r % taps;
            r /= taps;
            const int64_t i = idx[d * taps + j];
            if (i < 0) {
              zero = true;
              break;
            }
            off += i * st[d];
            w *= wts[d * taps + j];
          }
          if (!zero) s += w * img[off];
        }
        y[(n * C + c) * Q + q] = s;
      }
    }
  nn::from_doubles(ctx.out(0), y);
  return Status::Ok();
}

double flops_GridSample(const FlopsContext& ctx) {
  const double n = nn::est_numel(nn::flops_out(ctx, 0));
  return n < 0 ? 0 : n * 16;
}

}  // namespace gpuopt
