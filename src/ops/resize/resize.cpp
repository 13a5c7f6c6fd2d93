// Resize (opsets 10-19) and the older Upsample (7-9): nearest (four rounding modes), linear and
// cubic interpolation with every coordinate_transformation_mode, scales or sizes, axes,
// keep_aspect_ratio_policy, exclude_outside, extrapolation and antialias. Separable: one pass
// per resized axis in double, each output index a short list of (input index, weight) taps,
// following the ONNX reference implementation's tap windows and tie rules.
#include "ops/common/broadcast.h"
#include "ops/common/tensor_util.h"
#include "ops/resize/resize_form.h"

#include <cmath>
#include <limits>

namespace gpuopt {
using namespace tensor_util;

namespace {

struct ResizeAttrs {
  std::string mode = "nearest";
  std::string ctm = "half_pixel";  // coordinate_transformation_mode
  std::string nearest_mode = "round_prefer_floor";
  std::string policy = "stretch";  // keep_aspect_ratio_policy
  double cubic_a = -0.75;
  bool exclude_outside = false;
  bool antialias = false;
  double extrapolation = 0.0;
  std::vector<int64_t> axes;
};

// Upsample and Resize-10 have no coordinate modes: asymmetric, nearest rounds down.
ResizeAttrs resize_attrs(const Node& node, ResizeForm form) {
  ResizeAttrs a;
  a.mode = node.attr_s("mode", "nearest");
  if (a.mode == "bilinear") a.mode = "linear";  // Upsample-7 spelling
  if (form != ResizeForm::kFull) {
    a.ctm = "asymmetric";
    a.nearest_mode = "floor";
    return a;
  }
  a.ctm = node.attr_s("coordinate_transformation_mode", "half_pixel");
  a.nearest_mode = node.attr_s("nearest_mode", "round_prefer_floor");
  a.policy = node.attr_s("keep_aspect_ratio_policy", "stretch");
  a.cubic_a = node.attr_f("cubic_coeff_a", -0.75f);
  a.exclude_outside = node.attr_i("exclude_outside", 0) != 0;
  a.antialias = node.attr_i("antialias", 0) != 0;
  a.extrapolation = node.attr_f("extrapolation_value", 0.0f);
  a.axes = node.attr_ints("axes");
  return a;
}

Status validate_attrs(const ResizeAttrs& a) {
  auto one_of = [](const std::string& v, std::initializer_list<const char*> ok) {
    for (const char* o : ok)
      if (v == o) return true;
    return false;
  };
  if (!one_of(a.mode, {"nearest", "linear", "cubic"}))
    return Status::InvalidArgument("mode '{}' must be nearest, linear or cubic", a.mode);
  if (!one_of(a.ctm, {"half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners", "asymmetric",
                      "tf_crop_and_resize", "tf_half_pixel_for_nn"}))
    return Status::InvalidArgument("coordinate_transformation_mode '{}' is not supported", a.ctm);
  if (!one_of(a.nearest_mode, {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"}))
    return Status::InvalidArgument("nearest_mode '{}' is not supported", a.nearest_mode);
  if (!one_of(a.policy, {"stretch", "not_larger", "not_smaller"}))
    return Status::InvalidArgument("keep_aspect_ratio_policy '{}' is not supported", a.policy);
  if (a.antialias && a.mode == "nearest") return Status::InvalidArgument("antialias is not defined for mode nearest");
  return Status::Ok();
}

// Per-dimension scale, output extent and roi for a concrete input shape.
struct Plan {
  Shape out;
  std::vector<double> scale, roi_start, roi_end;
  std::vector<int64_t> axes;  // resized axes, in the order given
};

Result<Plan> make_plan(const ResizeAttrs& a, const Shape& in, const std::vector<double>* scales,
                       const std::vector<int64_t>* sizes, const std::vector<double>& roi) {
  const int64_t r = static_cast<int64_t>(in.size());
  Plan p;
  p.out = in;
  p.scale.assign(in.size(), 1.0);
  p.roi_start.assign(in.size(), 0.0);
  p.roi_end.assign(in.size(), 1.0);
  if (a.axes.empty()) {
    for (int64_t d = 0; d < r; ++d) p.axes.push_back(d);
  } else {
    for (int64_t ax : a.axes) {
      if (!normalize_axis(&ax, r)) return Status::InvalidArgument("axes entry {} is out of range for rank {}", ax, r);
      if (std::find(p.axes.begin(), p.axes.end(), ax) != p.axes.end())
        return Status::InvalidArgument("axis {} is repeated", ax);
      p.axes.push_back(ax);
    }
  }
  const size_t n = p.axes.size();
  if (!roi.empty()) {
    if (roi.size() != 2 * n) return Status::InvalidArgument("roi has {} values; expected {}", roi.size(), 2 * n);
    for (size_t i = 0; i < n; ++i) p.roi_start[p.axes[i]] = roi[i], p.roi_end[p.axes[i]] = roi[n + i];
  }
  if (scales) {
    if (scales->size() != n) return Status::InvalidArgument("scales has {} values for {} axes", scales->size(), n);
    for (size_t i = 0; i < n; ++i) {
      const double s = (*scales)[i];
      if (!(s > 0.0)) return Status::InvalidArgument("scales must be positive, got {}", s);
      const int64_t d = p.axes[i];
      p.scale[d] = s;
      const double extent =
          a.ctm == "tf_crop_and_resize" ? in[d] * (p.roi_end[d] - p.roi_start[d]) : static_cast<double>(in[d]);
      const std::optional<int64_t> o = extent_from_double(std::floor(extent * s));
      if (!o) return Status::InvalidArgument("scale {} makes axis {} of extent {} too large", s, d, in[d]);
      p.out[d] = *o;
    }
    return p;
  }
  if (!sizes) return Status::InvalidArgument("Resize needs scales or sizes (both are empty or absent)");
  if (sizes->size() != n) return Status::InvalidArgument("sizes has {} values for {} axes", sizes->size(), n);
  for (size_t i = 0; i < n; ++i) {
    if ((*sizes)[i] < 0) return Status::InvalidArgument("sizes must not be negative, got {}", (*sizes)[i]);
    if (in[p.axes[i]] == 0) return Status::InvalidArgument("cannot resize axis {} of extent 0", p.axes[i]);
    p.scale[p.axes[i]] = static_cast<double>((*sizes)[i]) / static_cast<double>(in[p.axes[i]]);
    p.out[p.axes[i]] = (*sizes)[i];
  }
  if (a.policy != "stretch") {
    double s = a.policy == "not_larger" ? std::numeric_limits<double>::infinity() : 0.0;
    for (int64_t d : p.axes) s = a.policy == "not_larger" ? std::min(s, p.scale[d]) : std::max(s, p.scale[d]);
    for (int64_t d : p.axes) {
      p.scale[d] = s;
      const std::optional<int64_t> o = extent_from_double(s * static_cast<double>(in[d]) + 0.5);  // round half up
      if (!o) return Status::InvalidArgument("scale {} makes axis {} of extent {} too large", s, d, in[d]);
      p.out[d] = *o;
    }
  }
  return p;
}

// Interpolation weights for fractional position `ratio` in (0, 1] (1 = exactly on a pixel).
std::vector<double> coeffs(const ResizeAttrs& a, double ratio, double scale) {
  if (a.mode == "nearest") {
    if (ratio == 1.0) return {0.0, 1.0};
    bool up;
    if (a.nearest_mode == "round_prefer_floor")
      up = ratio > 0.5;
    else if (a.nearest_mode == "round_prefer_ceil")
      up = ratio >= 0.5;
    else
      up = a.nearest_mode == "ceil";
    return {up ? 0.0 : 1.0, up ? 1.0 : 0.0};
  }
  const double A = a.cubic_a;
  if (!a.antialias) {
    if (a.mode == "linear") return {1.0 - ratio, ratio};
    const double r = ratio, s = 1.0 - ratio;
    return {((A * (r + 1) - 5 * A) * (r + 1) + 8 * A) * (r + 1) - 4 * A, ((A + 2) * r - (A + 3)) * r * r + 1,
            ((A + 2) * s - (A + 3)) * s * s + 1, ((A * (s + 1) - 5 * A) * (s + 1) + 8 * A) * (s + 1) - 4 * A};
  }
  // Antialias: the filter is stretched by 1/scale when downsampling, then normalized.
  const double sc = std::min(scale, 1.0);
  std::vector<double> c;
  if (a.mode == "linear") {
    const int64_t start = static_cast<int64_t>(std::floor(-1.0 / sc)) + 1;
    for (int64_t i = start; i < start + 2 - 2 * start; ++i)
      c.push_back(std::clamp(1.0 - std::fabs((i - ratio) * sc), 0.0, 1.0));
  } else {
    auto cubic = [&](double x) {
      x = std::fabs(x);
      if (x <= 1) return (A + 2) * x * x * x - (A + 3) * x * x + 1;
      if (x < 2) return A * x * x * x - 5 * A * x * x + 8 * A * x - 4 * A;
      return 0.0;
    };
    const int64_t start = static_cast<int64_t>(std::floor(-2.0 / sc)) + 1;
    for (int64_t i = start; i < 2 - start; ++i) c.push_back(cubic(sc * (i - ratio)));
  }
  double sum = 0;
  for (double v : c) sum += v;
  for (double& v : c) v /= sum;
  return c;
}

struct AxisTaps {
  int64_t n = 0;                  // taps per output index
  std::vector<int64_t> idx;       // [out][n], clamped into the input
  std::vector<double> w;          // [out][n]
  std::vector<char> extrapolate;  // tf_crop_and_resize: outside the input
};

AxisTaps axis_taps(const ResizeAttrs& a, int64_t in_len, int64_t out_len, double scale, double roi_s, double roi_e) {
  AxisTaps t;
  const double out_w = scale * static_cast<double>(in_len);
  const double in_w = static_cast<double>(in_len);
  t.extrapolate.assign(static_cast<size_t>(out_len), 0);
  for (int64_t y = 0; y < out_len; ++y) {
    const double yd = static_cast<double>(y);
    double x;
    if (a.ctm == "align_corners")
      x = out_w == 1 ? 0.0 : yd * (in_w - 1) / (out_w - 1);
    else if (a.ctm == "asymmetric")
      x = yd / scale;
    else if (a.ctm == "tf_half_pixel_for_nn")
      x = (yd + 0.5) / scale;
    else if (a.ctm == "pytorch_half_pixel")
      x = out_w == 1 ? -0.5 : (yd + 0.5) / scale - 0.5;
    else if (a.ctm == "half_pixel_symmetric") {
      const double adjustment = static_cast<double>(out_len) / out_w;
      x = in_w / 2 * (1 - adjustment) + (yd + 0.5) / scale - 0.5;
    } else if (a.ctm == "tf_crop_and_resize") {
      x = out_w == 1 ? (roi_e - roi_s) * (in_w - 1) / 2 : yd * (roi_e - roi_s) * (in_w - 1) / (out_w - 1);
      x += roi_s * (in_w - 1);
      t.extrapolate[y] = x < 0 || x > in_w - 1;
    } else
      x = (yd + 0.5) / scale - 0.5;  // half_pixel
    const double p = std::floor(x);
    const bool on_pixel = x == p;
    std::vector<double> c = coeffs(a, on_pixel ? 1.0 : x - p, scale);
    const int64_t n = static_cast<int64_t>(c.size());
    if (t.n == 0) {
      t.n = n;
      t.idx.resize(static_cast<size_t>(out_len * n));
      t.w.resize(static_cast<size_t>(out_len * n));
    }
    // The n taps nearest to x, ties to the smaller index (even n: window [p-n/2+1, p+n/2]).
    const int64_t start = static_cast<int64_t>(p) - n / 2 + (on_pixel ? 0 : 1);
    if (a.exclude_outside) {
      double sum = 0;
      for (int64_t j = 0; j < n; ++j) {
        if (start + j < 0 || start + j >= in_len) c[j] = 0;
        sum += c[j];
      }
      if (sum != 0)
        for (double& v : c) v /= sum;
    }
    for (int64_t j = 0; j < n; ++j) {
      t.idx[y * n + j] = std::clamp<int64_t>(start + j, 0, in_len - 1);
      t.w[y * n + j] = c[j];
    }
  }
  return t;
}

Status run_resize(const Tensor& x, Tensor& out, const ResizeAttrs& a, const Plan& p) {
  std::vector<double> cur(static_cast<size_t>(x.numel()));
  for (int64_t i = 0; i < x.numel(); ++i) cur[i] = x.get_f64(i);
  Shape shape = x.shape();
  const int64_t r = x.rank();
  for (int64_t d : p.axes) {
    const bool crop = a.ctm == "tf_crop_and_resize";
    const bool identity = std::fabs(p.scale[d] - 1.0) <= 1e-9 && p.out[d] == shape[d] &&
                          (!crop || (std::fabs(p.roi_start[d]) <= 1e-9 && std::fabs(p.roi_end[d] - 1.0) <= 1e-9));
    if (identity) continue;
    const int64_t in_len = shape[d], out_len = p.out[d];
    if (in_len == 0 && out_len > 0)
      return Status::InvalidArgument("cannot resize axis {} of extent 0 to {}", d, out_len);
    int64_t outer = 1, inner = 1;
    for (int64_t i = 0; i < d; ++i) outer *= shape[i];
    for (int64_t i = d + 1; i < r; ++i) inner *= shape[i];
    std::vector<double> next(static_cast<size_t>(outer * out_len * inner));
    if (out_len > 0 && outer * inner > 0) {
      const AxisTaps t = axis_taps(a, in_len, out_len, p.scale[d], p.roi_start[d], p.roi_end[d]);
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t y = 0; y < out_len; ++y) {
          double* dst = &next[(o * out_len + y) * inner];
          if (t.extrapolate[y]) {
            std::fill(dst, dst + inner, a.extrapolation);
            continue;
          }
          std::fill(dst, dst + inner, 0.0);
          for (int64_t j = 0; j < t.n; ++j) {
            const double w = t.w[y * t.n + j];
            if (w == 0.0) continue;  // also keeps Inf out of taps that do not count
            const double* src = &cur[(o * in_len + t.idx[y * t.n + j]) * inner];
            for (int64_t i = 0; i < inner; ++i) dst[i] += w * src[i];
          }
        }
    }
    cur.swap(next);
    shape[d] = out_len;
  }
  dispatch_dtype(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* o = out.data<T>();
    for (int64_t i = 0; i < out.numel(); ++i) {
      if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
        // Round half to even and saturate, as the reference's saturate_cast does.
        const double v = std::nearbyint(cur[i]);
        o[i] = std::isnan(v) ? T{0}
                             : static_cast<T>(std::clamp(v, static_cast<double>(std::numeric_limits<T>::lowest()),
                                                         static_cast<double>(std::numeric_limits<T>::max())));
      } else {
        o[i] = store_f64<T>(cur[i]);
      }
    }
  });
  return Status::Ok();
}

std::vector<double> to_f64_vector(const Tensor& t) {
  std::vector<double> v(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) v[i] = t.get_f64(i);
  return v;
}

// Input layout by form: Resize-10 (X, scales), Resize-11+ (X, roi, scales, sizes),
// Upsample-9 (X, scales), Upsample-7 (X; scales attribute).
struct ResizeInputs {
  bool scales_known = false, sizes_known = false, values_known = true;
  std::vector<double> scales, roi;
  std::vector<int64_t> sizes;
};

template <typename GetT>
Status gather_inputs(const Node& node, ResizeForm form, size_t num_inputs, GetT get, ResizeInputs* ri) {
  auto take_scales = [&](const Tensor* t) {
    if (t && t->numel() > 0) {
      ri->scales = to_f64_vector(*t);
      ri->scales_known = true;
    }
  };
  if (form == ResizeForm::kScalesAttr) {
    for (float f : node.attr_floats("scales")) ri->scales.push_back(f);
    ri->scales_known = true;
    return Status::Ok();
  }
  if (form == ResizeForm::kScalesInput) {
    bool present = false;
    const Tensor* s = get(1, &present);
    if (!present) return Status::InvalidArgument("input 'scales' is required");
    if (!s) ri->values_known = false;
    take_scales(s);
    return Status::Ok();
  }
  bool present[4] = {false, false, false, false};
  const Tensor* t[4] = {nullptr, nullptr, nullptr, nullptr};
  for (size_t i = 1; i < 4 && i < num_inputs; ++i) {
    t[i] = get(i, &present[i]);
    if (present[i] && !t[i]) ri->values_known = false;
  }
  if (t[1]) ri->roi = to_f64_vector(*t[1]);
  take_scales(t[2]);
  if (t[3] && t[3]->numel() > 0) {
    ri->sizes = t[3]->to_i64_vector();
    ri->sizes_known = true;
  }
  if (!ri->values_known) return Status::Ok();
  if (ri->scales_known == ri->sizes_known)
    return Status::InvalidArgument("exactly one of 'scales' and 'sizes' must be given (non-empty)");
  return Status::Ok();
}

Status infer_resize_like(InferContext& ctx, ResizeForm form) {
  GPUOPT_RETURN_IF_ERROR(check_inputs(ctx, 1, form != ResizeForm::kFull ? 2 : 4));
  ResizeAttrs a = resize_attrs(ctx.node, form);
  Status st = validate_attrs(a);
  if (!st.ok()) return ctx.error("{}", st.message());
  const ValueInfo& x = ctx.in(0);
  ResizeInputs ri;
  st = gather_inputs(
      ctx.node, form, ctx.num_inputs(),
      [&](size_t i, bool* present) {
        *present = ctx.has_input(i);
        return const_input(ctx, i);
      },
      &ri);
  if (!st.ok()) return ctx.error("{}", st.message());
  if (!x.rank_known) {
    set_output_rank(ctx, 0, x.dtype, -1);
    return Status::Ok();
  }
  if (!ri.values_known || !shape_is_concrete(x.shape)) {
    Shape out = x.shape;
    for (int64_t& d : out) d = kUnknownDim;
    set_output(ctx, 0, x.dtype, std::move(out));
    return Status::Ok();
  }
  Result<Plan> p =
      make_plan(a, x.shape, ri.scales_known ? &ri.scales : nullptr, ri.sizes_known ? &ri.sizes : nullptr, ri.roi);
  if (!p.ok()) return ctx.error("{}", p.status().message());
  set_output(ctx, 0, x.dtype, p->out);
  return Status::Ok();
}

Status cpu_resize_like(KernelContext& ctx, ResizeForm form) {
  ResizeAttrs a = resize_attrs(ctx.node, form);
  ResizeInputs ri;
  GPUOPT_RETURN_IF_ERROR(gather_inputs(
      ctx.node, form, ctx.num_inputs(),
      [&](size_t i, bool* present) -> const Tensor* {
        *present = ctx.has_input(i);
        return *present ? &ctx.in(i) : nullptr;
      },
      &ri));
  GPUOPT_ASSIGN_OR_RETURN(Plan p, make_plan(a, ctx.in(0).shape(), ri.scales_known ? &ri.scales : nullptr,
                                            ri.sizes_known ? &ri.sizes : nullptr, ri.roi));
  Status st = run_resize(ctx.in(0), ctx.out(0), a, p);
  return st.ok() ? st : ctx.error("{}", st.message());
}

double resize_flops(const FlopsContext& ctx) {
  // Taps per output element: 1 (nearest), 2 per axis (linear), 4 per axis (cubic); 2 FLOPs each.
  const std::string mode = ctx.node.attr_s("mode", "nearest");
  const double out = numel_or_zero(ctx.outputs.empty() ? nullptr : ctx.outputs[0]);
  if (mode == "nearest") return 0.0;
  const double taps = mode == "cubic" ? 4.0 : 2.0;
  return out * taps * 2.0 * 2.0;  // two resized (spatial) axes in the common case
}

}  // namespace

Status infer_Resize_v1(InferContext& ctx) { return infer_resize_like(ctx, ResizeForm::kScalesInput); }
Status cpu_Resize_v1(KernelContext& ctx) { return cpu_resize_like(ctx, ResizeForm::kScalesInput); }
Status infer_Resize(InferContext& ctx) { return infer_resize_like(ctx, ResizeForm::kFull); }
Status cpu_Resize(KernelContext& ctx) { return cpu_resize_like(ctx, ResizeForm::kFull); }
double flops_Resize(const FlopsContext& ctx) { return resize_flops(ctx); }

Status infer_Upsample_v1(InferContext& ctx) { return infer_resize_like(ctx, ResizeForm::kScalesAttr); }
Status cpu_Upsample_v1(KernelContext& ctx) { return cpu_resize_like(ctx, ResizeForm::kScalesAttr); }
Status infer_Upsample(InferContext& ctx) { return infer_resize_like(ctx, ResizeForm::kScalesInput); }
Status cpu_Upsample(KernelContext& ctx) { return cpu_resize_like(ctx, ResizeForm::kScalesInput); }
double flops_Upsample(const FlopsContext& ctx) { return resize_flops(ctx); }

}  // namespace gpuopt
