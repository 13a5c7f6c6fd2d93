// Signal-processing ops: HannWindow, HammingWindow, BlackmanWindow, MelWeightMatrix, DFT and
// STFT. The transforms are direct O(n^2) sums in double (a reference, not a fast FFT); complex
// values are the trailing [real, imag] dimension of size 2, a real signal has trailing size 1.
#include "ops/common/nn_util.h"
#include "ops/common/tensor_util.h"

#include <cmath>
#include <complex>
#include <numbers>

namespace gpuopt {

namespace {

using cd = std::complex<double>;
constexpr double kPi = std::numbers::pi;

Result<DType> output_datatype(const Node& node, const char* attr = "output_datatype") {
  const int64_t id = node.attr_i(attr, 1);
  std::optional<DType> d = dtype_from_onnx(static_cast<int>(id));
  if (!d || *d == DType::String || *d == DType::Bool)
    return Status::Unimplemented("{}: {} {} is not supported", node_label(node), attr, id);
  return *d;
}

// Scalar integer input (window size, frame step, dft_length, ...).
Result<int64_t> scalar_int(const Tensor& t, const Node& node, const char* what) {
  if (t.numel() != 1) return Status::InvalidArgument("{}: {} must be a scalar, got {}", node_label(node), what, t.describe());
  return t.get_i64(0);
}

// ---- window functions ---------------------------------------------------------------------

enum class Window { kHann, kHamming, kBlackman };

Status infer_window(InferContext& ctx) {
  GPUOPT_RETURN_IF_ERROR(tensor_util::check_inputs(ctx, 1, 1));
  GPUOPT_RETURN_IF_ERROR(tensor_util::require_int_tensor(ctx, 0, "size"));
  GPUOPT_ASSIGN_OR_RETURN(DType dt, output_datatype(ctx.node));
  int64_t n = kUnknownDim;
  if (const Tensor* s = tensor_util::const_input(ctx, 0)) {
    GPUOPT_ASSIGN_OR_RETURN(n, scalar_int(*s, ctx.node, "size"));
    if (n < 0) return ctx.error("size {} is negative", n);
  }
  tensor_util::set_output(ctx, 0, dt, {n});
  return Status::Ok();
}

// w[i] with N = size (periodic, the default) or size - 1 (symmetric), as the ONNX reference.
Status window_kernel(KernelContext& ctx, Window kind) {
  Tensor& y = ctx.out(0);
  const int64_t size = y.numel();
  const double N = ctx.node.attr_i("periodic", 1) != 0 ? static_cast<double>(size) : static_cast<double>(size - 1);
  std::vector<double> w(static_cast<size_t>(size));
  for (int64_t i = 0; i < size; ++i) {
    const double t = static_cast<double>(i) / N;
    switch (kind) {
      case Window::kHann: {
        const double s = std::sin(kPi * t);
        w[i] = s * s;
        break;
      }
      case Window::kHamming: {
        const double alpha = 25.0 / 46.0;
        w[i] = alpha - (1.0 - alpha) * std::cos(2 * kPi * t);
        break;
      }
      case Window::kBlackman:
        w[i] = 0.42 - 0.5 * std::cos(2 * kPi * t) + 0.08 * std::cos(4 * kPi * t);
        break;
    }
  }
  nn::from_doubles(y, w);
  return Status::Ok();
}

double window_flops(const FlopsContext& ctx) {
  const double n = nn::est_numel(nn::flops_out(ctx, 0));
  return n < 0 ? 0 : n * 4;
}

}  // namespace

Status infer_HannWindow(InferContext& ctx) { return infer_window(ctx); }
Status infer_HammingWindow(InferContext& ctx) { return infer_window(ctx); }
Status infer_BlackmanWindow(InferContext& ctx) { return infer_window(ctx); }
Status cpu_HannWindow(KernelContext& ctx) { return window_kernel(ctx, Window::kHann); }
Status cpu_HammingWindow(KernelContext& ctx) { return window_kernel(ctx, Window::kHamming); }
Status cpu_BlackmanWindow(KernelContext& ctx) { return window_kernel(ctx, Window::kBlackman); }
double flops_HannWindow(const FlopsContext& ctx) { return window_flops(ctx); }
double flops_HammingWindow(const FlopsContext& ctx) { return window_flops(ctx); }
double flops_BlackmanWindow(const FlopsContext& ctx) { return window_flops(ctx); }

// ---- MelWeightMatrix ------------------------------------------------------------------------

Status infer_MelWeightMatrix(InferContext& ctx) {
  GPUOPT_RETURN_IF_ERROR(tensor_util::check_inputs(ctx, 5, 5));
  for (size_t i = 0; i < 3; ++i)
    GPUOPT_RETURN_IF_ERROR(tensor_util::require_int_tensor(ctx, i, i == 0 ? "num_mel_bins" : i == 1 ? "dft_length" : "sample_rate"));
  GPUOPT_ASSIGN_OR_RETURN(DType dt, output_datatype(ctx.node));
  int64_t bins = kUnknownDim, spec = kUnknownDim;
  if (const Tensor* t = tensor_util::const_input(ctx, 0)) {
    GPUOPT_ASSIGN_OR_RETURN(bins, scalar_int(*t, ctx.node, "num_mel_bins"));
  }
  if (const Tensor* t = tensor_util::const_input(ctx, 1)) {
    GPUOPT_ASSIGN_OR_RETURN(int64_t n, scalar_int(*t, ctx.node, "dft_length"));
    if (n < 1) return ctx.error("dft_length {} must be positive", n);
    spec = n / 2 + 1;
  }
  if (bins != kUnknownDim && bins < 1) return ctx.error("num_mel_bins {} must be positive", bins);
  tensor_util::set_output(ctx, 0, dt, {spec, bins});
  return Status::Ok();
}

// Triangular filters between mel-spaced edges, as the ONNX reference computes them: the edge
// frequencies (in float32 for the mel conversion of the two limits, like its numpy scalars) are
// mapped to spectrogram bins with floor((dft_length + 1) * f / sample_rate).
Status cpu_MelWeightMatrix(KernelContext& ctx) {
  const int64_t bins = ctx.in(0).get_i64(0), n = ctx.in(1).get_i64(0), rate = ctx.in(2).get_i64(0);
  const float lo = static_cast<float>(ctx.in(3).get_f64(0)), hi = static_cast<float>(ctx.in(4).get_f64(0));
  if (rate <= 0) return ctx.error("sample_rate {} must be positive", rate);
  const float lo_mel = 2595.0f * std::log10(1.0f + lo / 700.0f);
  const float hi_mel = 2595.0f * std::log10(1.0f + hi / 700.0f);
  const float step = (hi_mel - lo_mel) / static_cast<float>(bins + 2);
  const int64_t spec = n / 2 + 1;
  std::vector<int64_t> edge(static_cast<size_t>(bins + 2));
  for (int64_t i = 0; i < bins + 2; ++i) {
    double f = static_cast<double>(i) * static_cast<double>(step) + static_cast<double>(lo_mel);
    f = 700.0 * (std::pow(10.0, f / 2595.0) - 1.0);
    edge[i] = static_cast<int64_t>(std::floor(static_cast<double>(n + 1) * f / static_cast<double>(rate)));
  }
  std::vector<double> w(static_cast<size_t>(spec * bins), 0.0);
  auto at = [&](int64_t j, int64_t i) -> Result<double*> {
    if (j < 0 || j >= spec)
      return ctx.error("filter {} reaches spectrogram bin {} outside [0, {}) (check the edge frequencies)", i, j, spec);
    return &w[j * bins + i];
  };
  for (int64_t i = 0; i < bins; ++i) {
    const int64_t l = edge[i], c = edge[i + 1], h = edge[i + 2];
    if (c == l) {
      GPUOPT_ASSIGN_OR_RETURN(double* p, at(c, i));
      *p = 1;
    } else {
      for (int64_t j = l; j <= c; ++j) {
        GPUOPT_ASSIGN_OR_RETURN(double* p, at(j, i));
        *p = static_cast<double>(j - l) / static_cast<double>(c - l);
      }
    }
    if (h > c)
      for (int64_t j = c; j < h; ++j) {
        GPUOPT_ASSIGN_OR_RETURN(double* p, at(j, i));
        *p = static_cast<double>(h - j) / static_cast<double>(h - c);
      }
  }
  nn::from_doubles(ctx.out(0), w);
  return Status::Ok();
}
double flops_MelWeightMatrix(const FlopsContext&) { return 0.0; }

// ---- DFT --------------------------------------------------------------------------------------

namespace {

struct DftParams {
  int64_t axis = 1;
  int64_t length = kUnknownDim;  // dft_length
  bool inverse = false, onesided = false;
};

// Reads axis (the attribute before opset 20, DFT_v1; input 2 from 20: axis_input) and dft_length
// (input 1) when known.
template <class Ctx>
Result<DftParams> dft_params(const Ctx& ctx, bool axis_input, int64_t rank, int64_t axis_extent_fn(const Ctx&, int64_t),
                             const Tensor* len_t, const Tensor* axis_t, bool axis_input_present) {
  DftParams p;
  p.inverse = ctx.node.attr_i("inverse", 0) != 0;
  p.onesided = ctx.node.attr_i("onesided", 0) != 0;
  if (axis_input) {
    p.axis = -2;
    if (axis_t) {
      GPUOPT_ASSIGN_OR_RETURN(p.axis, scalar_int(*axis_t, ctx.node, "axis"));
    } else if (axis_input_present) {
      return Status::Unavailable("axis not known yet");
    }
  } else {
    p.axis = ctx.node.attr_i("axis", 1);
  }
  const int64_t orig = p.axis;
  if (!normalize_axis(&p.axis, rank) || p.axis == rank - 1)
    return Status::InvalidArgument("{}: axis {} is out of range (rank {}, the last dim holds [real, imag])",
                                   node_label(ctx.node), orig, rank);
  if (len_t) {
    GPUOPT_ASSIGN_OR_RETURN(p.length, scalar_int(*len_t, ctx.node, "dft_length"));
    if (p.length < 1) return Status::InvalidArgument("{}: dft_length {} must be positive", node_label(ctx.node), p.length);
  } else {
    const int64_t e = axis_extent_fn(ctx, p.axis);
    if (e >= 0) p.length = p.inverse && p.onesided ? 2 * (e - 1) : e;
    if (e >= 0 && p.length < 1)
      return Status::InvalidArgument("{}: the transform length along axis {} would be {}; give dft_length",
                                     node_label(ctx.node), p.axis, p.length);
  }
  return p;
}

int64_t infer_extent(const InferContext& ctx, int64_t axis) { return ctx.in(0).shape[axis]; }
int64_t kernel_extent(const KernelContext& ctx, int64_t axis) { return ctx.in(0).dim(axis); }

// One transform of `in` (count m along the axis, complex) into `out` (length n_out).
//  forward: X[k] = sum_t x[t] e^{-2 pi i k t / L}, t < min(m, L)
//  inverse: x[t] = 1/L sum_k X[k] e^{+2 pi i k t / L}
//  inverse onesided (irfft): X is the half spectrum; the rest is its conjugate mirror and the
//  imaginary parts of X[0] and X[L/2] are ignored, as numpy.fft.irfft does.
void dft_line(const std::vector<cd>& in, int64_t L, bool inverse, bool onesided, int64_t n_out, std::vector<cd>& out) {
  const int64_t m = static_cast<int64_t>(in.size());
  out.assign(static_cast<size_t>(n_out), cd(0, 0));
  if (inverse && onesided) {
    const int64_t half = L / 2;
    auto X = [&](int64_t k) { return k < m ? in[k] : cd(0, 0); };
    for (int64_t t = 0; t < n_out; ++t) {
      double s = X(0).real();
      for (int64_t k = 1; k < (L + 1) / 2; ++k) {
        const double a = 2 * kPi * static_cast<double>((k * t) % L) / static_cast<double>(L);
        s += 2 * (X(k) * cd(std::cos(a), std::sin(a))).real();
      }
      if (L % 2 == 0 && half > 0) s += X(half).real() * ((t % 2) ? -1.0 : 1.0);
      out[t] = cd(s / static_cast<double>(L), 0);
    }
    return;
  }
  const double sign = inverse ? 1.0 : -1.0;
  for (int64_t k = 0; k < n_out; ++k) {
    cd s(0, 0);
    for (int64_t t = 0; t < std::min(m, L); ++t) {
      const double a = sign * 2 * kPi * static_cast<double>((k * t) % L) / static_cast<double>(L);
      s += in[t] * cd(std::cos(a), std::sin(a));
    }
    out[k] = inverse ? s / static_cast<double>(L) : s;
  }
}

// Applies dft_line along `axis` of x (trailing dim 1 or 2) into y (trailing dim 1 or 2).
void dft_along(const std::vector<double>& xv, const Shape& xs, int64_t axis, const DftParams& p, const Shape& ys,
               std::vector<double>& yv) {
  const int64_t rank = static_cast<int64_t>(xs.size());
  const int64_t cin = xs[rank - 1], cout = ys[rank - 1];
  const int64_t outer = nn::product(xs, 0, static_cast<size_t>(axis));
  const int64_t mid_in = xs[axis], mid_out = ys[axis];
  const int64_t inner = nn::product(xs, static_cast<size_t>(axis) + 1, static_cast<size_t>(rank - 1));
  yv.assign(static_cast<size_t>(outer * mid_out * inner * cout), 0.0);
  std::vector<cd> line(static_cast<size_t>(mid_in)), res;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t r = 0; r < inner; ++r) {
      for (int64_t t = 0; t < mid_in; ++t) {
        const int64_t b = ((o * mid_in + t) * inner + r) * cin;
        line[t] = cd(xv[b], cin == 2 ? xv[b + 1] : 0.0);
      }
      dft_line(line, p.length, p.inverse, p.onesided, mid_out, res);
      for (int64_t k = 0; k < mid_out; ++k) {
        const int64_t b = ((o * mid_out + k) * inner + r) * cout;
        yv[b] = res[k].real();
        if (cout == 2) yv[b + 1] = res[k].imag();
      }
    }
}

// Output extent along the axis and trailing size.
std::pair<int64_t, int64_t> dft_out_dims(const DftParams& p) {
  if (p.length < 0) return {kUnknownDim, p.inverse && p.onesided ? 1 : 2};
  if (p.inverse) return {p.length, p.onesided ? 1 : 2};
  return {p.onesided ? p.length / 2 + 1 : p.length, 2};
}


Status infer_dft(InferContext& ctx, bool axis_input) {
  GPUOPT_RETURN_IF_ERROR(tensor_util::check_inputs(ctx, 1, 3));
  GPUOPT_RETURN_IF_ERROR(nn::require_float(ctx, 0, "input"));
  GPUOPT_RETURN_IF_ERROR(tensor_util::require_int_tensor(ctx, 1, "dft_length"));
  const ValueInfo& x = ctx.in(0);
  if (!x.rank_known) {
    tensor_util::set_output_rank(ctx, 0, x.dtype, -1);
    return Status::Ok();
  }
  const int64_t rank = static_cast<int64_t>(x.shape.size());
  if (rank < 2) return ctx.error("input rank {} is below 2", rank);
  if (x.shape[rank - 1] >= 0 && x.shape[rank - 1] != 1 && x.shape[rank - 1] != 2)
    return ctx.error("last dim {} must be 1 (real) or 2 (complex)", x.shape[rank - 1]);
  Result<DftParams> p = dft_params<InferContext>(ctx, axis_input, rank, infer_extent, tensor_util::const_input(ctx, 1),
                                                 tensor_util::const_input(ctx, 2), ctx.has_input(2));
  if (!p.ok()) {
    if (p.status().code() == StatusCode::kUnavailable) {
      tensor_util::set_output_rank(ctx, 0, x.dtype, rank);
      return Status::Ok();
    }
    return p.status();
  }
  if (p->onesided && !p->inverse && x.shape[rank - 1] == 2)
    return ctx.error("onesided output needs a real input (last dim 1), got a complex one");
  Shape out = x.shape;
  std::tie(out[p->axis], out[rank - 1]) = dft_out_dims(*p);
  tensor_util::set_output(ctx, 0, x.dtype, out);
  return Status::Ok();
}

Status cpu_dft(KernelContext& ctx, bool axis_input) {
  const Tensor& x = ctx.in(0);
  GPUOPT_ASSIGN_OR_RETURN(DftParams p, dft_params<KernelContext>(ctx, axis_input, x.rank(), kernel_extent,
                                                                  ctx.has_input(1) ? &ctx.in(1) : nullptr,
                                                                  ctx.has_input(2) ? &ctx.in(2) : nullptr, false));
  std::vector<double> y;
  dft_along(nn::to_doubles(x), x.shape(), p.axis, p, ctx.out(0).shape(), y);
  nn::from_doubles(ctx.out(0), y);
  return Status::Ok();
}

}  // namespace

Status infer_DFT_v1(InferContext& ctx) { return infer_dft(ctx, false); }
Status cpu_DFT_v1(KernelContext& ctx) { return cpu_dft(ctx, false); }
Status infer_DFT(InferContext& ctx) { return infer_dft(ctx, true); }
Status cpu_DFT(KernelContext& ctx) { return cpu_dft(ctx, true); }

// 8 flops (a complex multiply-add) per output element and input sample along the axis. The axis
// is the axis input when constant, else the attribute, else -2 (opset 20's default, and the same
// dim as opset 17's default 1 for the usual [batch, n, 1|2] signal).
double flops_DFT(const FlopsContext& ctx) {
  const double out = nn::est_numel(nn::flops_out(ctx, 0));
  const ValueInfo* x = nn::flops_in(ctx, 0);
  if (out < 0 || !x || !x->rank_known || x->shape.size() < 2) return 0;
  int64_t axis = ctx.node.attr_i("axis", -2);
  const ValueInfo* a = nn::flops_in(ctx, 2);
  if (a && a->value && a->value->numel() == 1) axis = a->value->get_i64(0);
  if (!normalize_axis(&axis, static_cast<int64_t>(x->shape.size()))) return 0;
  return out * 8 * nn::est_dim(x, axis);
}

// ---- STFT -------------------------------------------------------------------------------------

namespace {
struct StftParams {
  int64_t step = kUnknownDim, frame = kUnknownDim, frames = kUnknownDim, bins = kUnknownDim;
};

// frame_length is input 3, else the window's length; frames = 1 + (len - frame) / step.
Result<StftParams> stft_params(const Node& node, int64_t len, const Tensor* step_t, const ValueInfo* window,
                               const Tensor* frame_t) {
  StftParams p;
  if (step_t) {
    GPUOPT_ASSIGN_OR_RETURN(p.step, scalar_int(*step_t, node, "frame_step"));
    if (p.step < 1) return Status::InvalidArgument("{}: frame_step {} must be positive", node_label(node), p.step);
  }
  if (frame_t) {
    GPUOPT_ASSIGN_OR_RETURN(p.frame, scalar_int(*frame_t, node, "frame_length"));
  } else if (window && window->rank_known && window->shape.size() == 1) p.frame = window->shape[0];
  if (window && window->rank_known && (window->shape.size() != 1 || (p.frame >= 0 && window->shape[0] >= 0 && window->shape[0] != p.frame)))
    return Status::InvalidArgument("{}: window shape {} does not match frame_length {}", node_label(node),
                                   dims_string(window->shape), p.frame);
  if (p.frame == kUnknownDim && !frame_t && !window && len >= 0) p.frame = len;
  if (p.frame != kUnknownDim && p.frame < 1)
    return Status::InvalidArgument("{}: frame_length {} must be positive", node_label(node), p.frame);
  if (len >= 0 && p.frame >= 0 && p.frame > len)
    return Status::InvalidArgument("{}: frame_length {} exceeds the signal length {}", node_label(node), p.frame, len);
  if (len >= 0 && p.frame >= 0 && p.step >= 0) p.frames = 1 + (len - p.frame) / p.step;
  if (p.frame >= 0) p.bins = node.attr_i("onesided", 1) != 0 ? p.frame / 2 + 1 : p.frame;
  return p;
}
}  // namespace

Status infer_STFT(InferContext& ctx) {
  GPUOPT_RETURN_IF_ERROR(tensor_util::check_inputs(ctx, 2, 4));
  GPUOPT_RETURN_IF_ERROR(nn::require_float(ctx, 0, "signal"));
  GPUOPT_RETURN_IF_ERROR(tensor_util::require_int_tensor(ctx, 1, "frame_step"));
  GPUOPT_RETURN_IF_ERROR(tensor_util::require_int_tensor(ctx, 3, "frame_length"));
  const ValueInfo& x = ctx.in(0);
  if (x.rank_known && x.shape.size() != 3) return ctx.error("signal must be [batch, length, 1 or 2], got rank {}", x.shape.size());
  if (x.rank_known && x.shape[2] >= 0 && x.shape[2] != 1 && x.shape[2] != 2)
    return ctx.error("signal's last dim {} must be 1 (real) or 2 (complex)", x.shape[2]);
  if (x.rank_known && x.shape[2] == 2 && ctx.node.attr_i("onesided", 1) != 0)
    return ctx.error("onesided output needs a real signal (last dim 1)");
  GPUOPT_ASSIGN_OR_RETURN(StftParams p, stft_params(ctx.node, x.rank_known ? x.shape[1] : kUnknownDim,
                                                    tensor_util::const_input(ctx, 1),
                                                    ctx.has_input(2) ? &ctx.in(2) : nullptr,
                                                    tensor_util::const_input(ctx, 3)));
  if (ctx.has_input(3) && !ctx.in(3).value) p.frames = p.bins = kUnknownDim;
  tensor_util::set_output(ctx, 0, x.dtype, {x.rank_known ? x.shape[0] : kUnknownDim, p.frames, p.bins, 2});
  return Status::Ok();
}

// Frame f is signal[f * step, f * step + frame) times the window (ones by default), then a
// forward DFT of length frame (half spectrum when onesided).
Status cpu_STFT(KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  ValueInfo win;
  if (ctx.has_input(2)) {
    win.rank_known = true;
    win.shape = ctx.in(2).shape();
  }
  GPUOPT_ASSIGN_OR_RETURN(StftParams p, stft_params(ctx.node, x.dim(1), &ctx.in(1), ctx.has_input(2) ? &win : nullptr,
                                                    ctx.has_input(3) ? &ctx.in(3) : nullptr));
  const std::vector<double> xv = nn::to_doubles(x);
  const std::vector<double> wv = ctx.has_input(2) ? nn::to_doubles(ctx.in(2)) : std::vector<double>(p.frame, 1.0);
  const int64_t B = x.dim(0), len = x.dim(1), c = x.dim(2);
  std::vector<double> y(static_cast<size_t>(B * p.frames * p.bins * 2));
  std::vector<cd> line(static_cast<size_t>(p.frame)), res;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t f = 0; f < p.frames; ++f) {
      for (int64_t t = 0; t < p.frame; ++t) {
        const int64_t i = (b * len + f * p.step + t) * c;
        line[t] = cd(xv[i], c == 2 ? xv[i + 1] : 0.0) * wv[t];
      }
      dft_line(line, p.frame, false, false, p.bins, res);
      for (int64_t k = 0; k < p.bins; ++k) {
        const int64_t o = ((b * p.frames + f) * p.bins + k) * 2;
        y[o] = res[k].real();
        y[o + 1] = res[k].imag();
      }
    }
  nn::from_doubles(ctx.out(0), y);
  return Status::Ok();
}

double flops_STFT(const FlopsContext& ctx) {
  const double out = nn::est_numel(nn::flops_out(ctx, 0));
  const ValueInfo* y = nn::flops_out(ctx, 0);
  if (out < 0 || !y || !y->rank_known || y->shape.size() != 4 || y->shape[2] < 0) return 0;
  return out * 8 * static_cast<double>(y->shape[2]);
}

}  // namespace gpuopt
