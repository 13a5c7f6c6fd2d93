// Resize (opsets 10+) and Upsample (7, 9) on the GPU (kernels/resize.cu): nearest, linear and
// cubic, antialias (linear, cubic), exclude_outside, every coordinate mode and aspect policy.
#include "backends/cuda/cuda_ops.h"
#include "ops/resize/cuda/resize_plan.h"

#include <cmath>
#include <limits>

namespace gpuopt::cuda {
namespace {

std::optional<ResizeCtm> ctm_of(const std::string& s) {
  if (s == "half_pixel") return ResizeCtm::kHalfPixel;
  if (s == "half_pixel_symmetric") return ResizeCtm::kHalfPixelSymmetric;
  if (s == "pytorch_half_pixel") return ResizeCtm::kPytorchHalfPixel;
  if (s == "align_corners") return ResizeCtm::kAlignCorners;
  if (s == "asymmetric") return ResizeCtm::kAsymmetric;
  if (s == "tf_crop_and_resize") return ResizeCtm::kTfCropAndResize;
  if (s == "tf_half_pixel_for_nn") return ResizeCtm::kTfHalfPixelForNn;
  return std::nullopt;
}
std::optional<ResizeNearest> nearest_of(const std::string& s) {
  if (s == "round_prefer_floor") return ResizeNearest::kRoundPreferFloor;
  if (s == "round_prefer_ceil") return ResizeNearest::kRoundPreferCeil;
  if (s == "floor") return ResizeNearest::kFloor;
  if (s == "ceil") return ResizeNearest::kCeil;
  return std::nullopt;
}
std::string mode_of(const Node& n) {
  const std::string m = n.attr_s("mode", "nearest");
  return m == "bilinear" ? "linear" : m;  // Upsample-7 spelling
}

bool resize_supported(const Node& n, const std::vector<DType>& in) {
  if (in.empty()) return false;
  const DType t = in[0];
  if (t != DType::F32 && t != DType::F16 && t != DType::BF16 && t != DType::U8 && t != DType::I8) return false;
  const std::string mode = mode_of(n);
  if (mode != "nearest" && mode != "linear" && mode != "cubic") return false;
  if (n.op == Op::Upsample) return true;  // no other attributes
  if (mode == "nearest" && n.attr_i("antialias", 0) != 0) return false;  // undefined: the CPU reports it
  const std::string policy = n.attr_s("keep_aspect_ratio_policy", "stretch");
  if (policy != "stretch" && policy != "not_larger" && policy != "not_smaller") return false;
  return ctm_of(n.attr_s("coordinate_transformation_mode", "half_pixel")) &&
         nearest_of(n.attr_s("nearest_mode", "round_prefer_floor"));
}

std::vector<double> f64s(const Tensor& t) {
  std::vector<double> v(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) v[static_cast<size_t>(i)] = t.get_f64(i);
  return v;
}

template <typename... Args>
Status plan_error(const Node& node, fmt::format_string<Args...> f, Args&&... args) {
  return Status::InvalidArgument("{}: {}", node_label(node), fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace

// Scales and roi per axis as the CPU reference's plan; the output shape is already inferred.
Result<ResizeDesc> make_resize_desc(const Node& node, ResizeForm form, const Shape& in, const Shape& out,
                                    const std::vector<const Tensor*>& host) {
  const int64_t r = static_cast<int64_t>(in.size());
  if (r > kMaxRank) return plan_error(node, "rank {} exceeds the CUDA limit {}", r, kMaxRank);
  if (static_cast<int64_t>(out.size()) != r) return plan_error(node, "output rank {} != input rank {}", out.size(), r);
  const bool legacy = form != ResizeForm::kFull;
  ResizeDesc d;
  d.rank = static_cast<int>(r);
  d.numel = shape_numel(out);
  const std::string mode = mode_of(node);
  d.mode = mode == "linear" ? ResizeMode::kLinear : mode == "cubic" ? ResizeMode::kCubic : ResizeMode::kNearest;
  const auto ctm = ctm_of(node.attr_s("coordinate_transformation_mode", "half_pixel"));
  const auto nearest = nearest_of(node.attr_s("nearest_mode", "round_prefer_floor"));
  if (!legacy && (!ctm || !nearest)) return plan_error(node, "unsupported coordinate_transformation_mode or nearest_mode");
  d.ctm = legacy ? ResizeCtm::kAsymmetric : *ctm;
  d.nearest = legacy ? ResizeNearest::kFloor : *nearest;
  d.exclude_outside = !legacy && node.attr_i("exclude_outside", 0) != 0;
  d.cubic_a = legacy ? -0.75 : node.attr_f("cubic_coeff_a", -0.75f);
  d.antialias = !legacy && d.mode != ResizeMode::kNearest && node.attr_i("antialias", 0) != 0;
  d.extrapolation = legacy ? 0.0 : node.attr_f("extrapolation_value", 0.0f);
  std::vector<int64_t> axes;
  if (!legacy) axes = node.attr_ints("axes");
  if (axes.empty())
    for (int64_t a = 0; a < r; ++a) axes.push_back(a);
  for (int64_t& a : axes)
    if (!normalize_axis(&a, r)) return plan_error(node, "axes entry {} is out of range for rank {}", a, r);
  for (int64_t a = 0; a < r; ++a) {
    d.in_dims[a] = in[a];
    d.out_dims[a] = out[a];
    d.scale[a] = 1.0;
    d.roi_start[a] = 0.0;
    d.roi_end[a] = 1.0;
  }
  const size_t n = axes.size();
  std::vector<double> scales, roi;
  std::vector<int64_t> sizes;
  auto given = [&](size_t i) -> const Tensor* {
    return i < host.size() && host[i] && host[i]->numel() > 0 ? host[i] : nullptr;
  };
  if (form == ResizeForm::kScalesAttr) {
    for (float f : node.attr_floats("scales")) scales.push_back(f);
  } else if (legacy) {
    if (!given(1)) return plan_error(node, "input 'scales' is required");
    scales = f64s(*given(1));
  } else {
    if (given(1)) roi = f64s(*given(1));
    if (given(2)) scales = f64s(*given(2));
    else if (given(3)) sizes = given(3)->to_i64_vector();
    else return plan_error(node, "one of 'scales' and 'sizes' must be given");
  }
  if (!roi.empty()) {
    if (roi.size() != 2 * n) return plan_error(node, "roi has {} values; expected {}", roi.size(), 2 * n);
    for (size_t i = 0; i < n; ++i) d.roi_start[axes[i]] = roi[i], d.roi_end[axes[i]] = roi[n + i];
  }
  if (!scales.empty()) {
    if (scales.size() != n) return plan_error(node, "scales has {} values for {} axes", scales.size(), n);
    for (size_t i = 0; i < n; ++i) d.scale[axes[i]] = scales[i];
  } else {
    if (sizes.size() != n) return plan_error(node, "sizes has {} values for {} axes", sizes.size(), n);
    for (size_t i = 0; i < n; ++i) {
      if (in[axes[i]] == 0) return plan_error(node, "cannot resize axis {} of extent 0", axes[i]);
      d.scale[axes[i]] = static_cast<double>(sizes[i]) / static_cast<double>(in[axes[i]]);
    }
    const std::string policy = node.attr_s("keep_aspect_ratio_policy", "stretch");
    if (policy != "stretch") {
      double s = policy == "not_larger" ? std::numeric_limits<double>::infinity() : 0.0;
      for (int64_t a : axes) s = policy == "not_larger" ? std::min(s, d.scale[a]) : std::max(s, d.scale[a]);
      for (int64_t a : axes) d.scale[a] = s;
    }
  }
  for (int64_t a : axes) {
    if (!(d.scale[a] > 0.0)) return plan_error(node, "scales must be positive, got {}", d.scale[a]);
    const bool crop = d.ctm == ResizeCtm::kTfCropAndResize;
    const bool identity = std::fabs(d.scale[a] - 1.0) <= 1e-9 && out[a] == in[a] &&
                          (!crop || (std::fabs(d.roi_start[a]) <= 1e-9 && std::fabs(d.roi_end[a] - 1.0) <= 1e-9));
    d.resized[a] = !identity;
    if (d.resized[a]) d.order[d.num_order++] = static_cast<int>(a);
    if (d.resized[a] && in[a] == 0 && out[a] > 0) return plan_error(node, "cannot resize axis {} of extent 0 to {}", a, out[a]);
  }
  return d;
}

namespace {

template <ResizeForm kForm>
Status run_resize(CudaKernelContext& k) {
  GPUOPT_ASSIGN_OR_RETURN(ResizeDesc d, make_resize_desc(k.node, kForm, k.in(0).shape(), k.out(0).shape(), k.host));
  return launch_resize(k.in(0).dtype(), k.in(0).raw(), k.out(0).raw(), d, k.ctx.stream);
}

}  // namespace

// The forms and their opsets as on the CPU (ir/ops_versions.inc, ops/resize/resize_form.h).
GPUOPT_CUDA_OP_RANGE(Resize, 1, 10, &run_resize<ResizeForm::kScalesInput>, &resize_supported, host_inputs_mask({1, 2, 3}));
GPUOPT_CUDA_OP_RANGE(Resize, 11, kOpsetMax, &run_resize<ResizeForm::kFull>, &resize_supported, host_inputs_mask({1, 2, 3}));
GPUOPT_CUDA_OP_RANGE(Upsample, 1, 8, &run_resize<ResizeForm::kScalesAttr>, &resize_supported, host_inputs_mask({1}));
GPUOPT_CUDA_OP_RANGE(Upsample, 9, 9, &run_resize<ResizeForm::kScalesInput>, &resize_supported, host_inputs_mask({1}));

}  // namespace gpuopt::cuda
