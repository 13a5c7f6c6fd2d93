// The per-element arithmetic of the CUDA Resize kernel, shared by the kernel (device) and the
// host unit test that checks it against the CPU reference without a GPU. Products that the
// reference computes as separate multiply and add are kept unfused on the device.
#pragma once

#include "ops/resize/cuda/resize.h"

#include <cmath>
#include <cstdint>

#ifdef __CUDACC__
#define GPUOPT_RESIZE_HD __host__ __device__
#else
#define GPUOPT_RESIZE_HD
#endif

namespace gpuopt::cuda {

GPUOPT_RESIZE_HD inline double resize_mul(double a, double b) {
#ifdef __CUDA_ARCH__
  return __dmul_rn(a, b);
#else
  return a * b;
#endif
}
GPUOPT_RESIZE_HD inline double resize_add(double a, double b) {
#ifdef __CUDA_ARCH__
  return __dadd_rn(a, b);
#else
  return a + b;
#endif
}
GPUOPT_RESIZE_HD inline double resize_sub(double a, double b) {
#ifdef __CUDA_ARCH__
  return __dsub_rn(a, b);
#else
  return a - b;
#endif
}

// Input coordinate of output index y along axis a (the CPU reference's formulas); sets
// *extrapolate when tf_crop_and_resize lands outside the input.
GPUOPT_RESIZE_HD inline double resize_source_coord(const ResizeDesc& d, int a, int64_t y, bool* extrapolate) {
  const double yd = static_cast<double>(y), scale = d.scale[a];
  const double in_w = static_cast<double>(d.in_dims[a]);
  const double out_w = resize_mul(scale, in_w);
  switch (d.ctm) {
    case ResizeCtm::kAlignCorners: return out_w == 1 ? 0.0 : resize_mul(yd, in_w - 1) / (out_w - 1);
    case ResizeCtm::kAsymmetric: return yd / scale;
    case ResizeCtm::kTfHalfPixelForNn: return (yd + 0.5) / scale;
    case ResizeCtm::kPytorchHalfPixel: return out_w == 1 ? -0.5 : (yd + 0.5) / scale - 0.5;
    case ResizeCtm::kHalfPixelSymmetric: {
      const double adjustment = static_cast<double>(d.out_dims[a]) / out_w;
      return resize_add(resize_mul(in_w / 2, 1 - adjustment), (yd + 0.5) / scale) - 0.5;
    }
    case ResizeCtm::kTfCropAndResize: {
      const double rs = d.roi_start[a], re = d.roi_end[a];
      double x = out_w == 1 ? resize_mul(re - rs, in_w - 1) / 2
                            : resize_mul(resize_mul(yd, re - rs), in_w - 1) / (out_w - 1);
      x = resize_add(x, resize_mul(rs, in_w - 1));
      *extrapolate = x < 0 || x > in_w - 1;
      return x;
    }
    default: return (yd + 0.5) / scale - 0.5;
  }
}

// The taps of one output index along one axis: n input indices start..start+n-1 (clamped into
// the input when read), with weights from resize_tap_weight. Wide filters (antialias when
// downsampling) have many taps, so weights are recomputed on use rather than stored.
struct ResizeAxisTaps {
  int64_t start = 0;    // first tap's input index, before clamping
  int n = 1;            // taps
  double ratio = 1.0;   // fractional source position in (0, 1] (1 = on a pixel)
  double sc = 1.0;      // antialias: min(scale, 1), the filter's stretch
  int64_t first = 0;    // antialias: the filter's first integer offset
  double sum = 1.0;     // antialias: the weights' sum they are divided by
  double kept = 0.0;    // exclude_outside: sum of the weights inside the input (0 = divide by nothing)
  bool fixed = false;   // nearest or an axis copied through: one tap of weight 1
  bool extrapolate = false;
};

// Cubic convolution kernel at |x| (antialias form), the reference's operation order.
GPUOPT_RESIZE_HD inline double resize_cubic(double A, double x) {
  x = fabs(x);
  if (x <= 1)
    return resize_add(resize_sub(resize_mul(resize_mul(resize_mul(A + 2, x), x), x), resize_mul(resize_mul(A + 3, x), x)), 1);
  if (x < 2)
    return resize_sub(resize_add(resize_sub(resize_mul(resize_mul(resize_mul(A, x), x), x),
                                            resize_mul(resize_mul(resize_mul(5, A), x), x)),
                                 resize_mul(resize_mul(8, A), x)),
                      resize_mul(4, A));
  return 0.0;
}

// Tap j's weight before the antialias and exclude_outside normalizations (the CPU reference's
// coeffs()).
GPUOPT_RESIZE_HD inline double resize_raw_weight(const ResizeDesc& d, const ResizeAxisTaps& t, int j) {
  const double A = d.cubic_a, r = t.ratio;
  if (d.antialias) {
    const double i = static_cast<double>(t.first + j);
    if (d.mode == ResizeMode::kLinear) {
      const double v = resize_sub(1.0, fabs(resize_mul(i - r, t.sc)));
      return v < 0.0 ? 0.0 : (1.0 < v ? 1.0 : v);  // std::clamp(v, 0, 1)
    }
    return resize_cubic(A, resize_mul(t.sc, i - r));
  }
  if (d.mode == ResizeMode::kLinear) return j == 0 ? 1.0 - r : r;
  // Cubic: ((A(u+1) - 5A)(u+1) + 8A)(u+1) - 4A for the outer taps, ((A+2)u - (A+3))u^2 + 1 for
  // the inner ones, u = r on the left and 1 - r on the right.
  const double u = j < 2 ? r : 1.0 - r;
  if (j == 0 || j == 3) {
    const double u1 = u + 1;
    return resize_sub(resize_mul(resize_add(resize_mul(resize_sub(resize_mul(A, u1), resize_mul(5, A)), u1), resize_mul(8, A)), u1),
                      resize_mul(4, A));
  }
  return resize_add(resize_mul(resize_mul(resize_sub(resize_mul(A + 2, u), A + 3), u), u), 1);
}

GPUOPT_RESIZE_HD inline bool resize_tap_outside(const ResizeDesc& d, int a, const ResizeAxisTaps& t, int j) {
  const int64_t i = t.start + j;
  return i < 0 || i >= d.in_dims[a];
}

GPUOPT_RESIZE_HD inline double resize_tap_weight(const ResizeDesc& d, int a, const ResizeAxisTaps& t, int j) {
  if (t.fixed) return d.exclude_outside && resize_tap_outside(d, a, t, j) ? 0.0 : 1.0;
  double w = resize_raw_weight(d, t, j);
  if (d.antialias) w = w / t.sum;
  if (d.exclude_outside) {
    if (resize_tap_outside(d, a, t, j)) w = 0.0;
    if (t.kept != 0) w = w / t.kept;
  }
  return w;
}

GPUOPT_RESIZE_HD inline int64_t resize_tap_index(const ResizeDesc& d, int a, const ResizeAxisTaps& t, int j) {
  const int64_t i = t.start + j, len = d.in_dims[a];
  return i < 0 ? int64_t{0} : (i >= len ? len - 1 : i);
}

// The taps of output index y along resized axis a (the CPU reference's axis_taps()).
GPUOPT_RESIZE_HD inline ResizeAxisTaps resize_axis_taps(const ResizeDesc& d, int a, int64_t y) {
  ResizeAxisTaps t;
  const double x = resize_source_coord(d, a, y, &t.extrapolate);
  const double p = floor(x);
  const bool on_pixel = x == p;
  const int64_t ip = static_cast<int64_t>(p);
  t.ratio = on_pixel ? 1.0 : x - p;
  if (d.mode == ResizeMode::kNearest) {
    // Two candidate taps p-1, p on a pixel, else p, p+1; the second is taken for ratio 1 or
    // when rounding goes up. Only the taken one counts (the other has weight 0).
    bool up = true;
    if (!on_pixel) {
      switch (d.nearest) {
        case ResizeNearest::kRoundPreferFloor: up = t.ratio > 0.5; break;
        case ResizeNearest::kRoundPreferCeil: up = t.ratio >= 0.5; break;
        case ResizeNearest::kFloor: up = false; break;
        case ResizeNearest::kCeil: up = true; break;
      }
    }
    t.start = ip - 1 + (on_pixel ? 0 : 1) + (up ? 1 : 0);
    t.n = 1;
    t.fixed = true;
    return t;
  }
  if (d.antialias) {
    t.sc = d.scale[a] < 1.0 ? d.scale[a] : 1.0;
    t.first = static_cast<int64_t>(floor((d.mode == ResizeMode::kLinear ? -1.0 : -2.0) / t.sc)) + 1;
    t.n = static_cast<int>(2 - 2 * t.first);
  } else {
    t.n = d.mode == ResizeMode::kLinear ? 2 : 4;
  }
  // The n taps nearest to x, ties to the smaller index: window [p-n/2+1, p+n/2] (on a pixel one lower).
  t.start = ip - t.n / 2 + (on_pixel ? 0 : 1);
  if (d.antialias) {
    double sum = 0;
    for (int j = 0; j < t.n; ++j) sum = resize_add(sum, resize_raw_weight(d, t, j));
    t.sum = sum;
  }
  if (d.exclude_outside) {
    double kept = 0;
    for (int j = 0; j < t.n; ++j) {
      double w = resize_raw_weight(d, t, j);
      if (d.antialias) w = w / t.sum;
      if (resize_tap_outside(d, a, t, j)) w = 0.0;
      kept = resize_add(kept, w);
    }
    t.kept = kept;
  }
  return t;
}

// Output element i in double (before the conversion to the element type). load(offset) returns
// an input element as double.
template <typename Load>
GPUOPT_RESIZE_HD double resize_point(const ResizeDesc& d, int64_t i, Load load) {
  ResizeAxisTaps taps[kMaxRank];
  int64_t in_stride[kMaxRank];
  int64_t rem = i, st = 1;
  for (int a = d.rank - 1; a >= 0; --a) {
    const int64_t c = rem % d.out_dims[a];
    rem /= d.out_dims[a];
    in_stride[a] = st;
    st *= d.in_dims[a];
    if (d.resized[a]) {
      taps[a] = resize_axis_taps(d, a, c);
    } else {
      taps[a].start = c;
      taps[a].fixed = true;
    }
  }
  // The CPU reference resizes one axis at a time, in `axes` order, each pass summing
  // w * value in double into a fresh zero; for results that land on .5 (u8 outputs) the order of
  // the roundings decides the answer, so the same nested sums are formed here: the first
  // processed axis is the innermost sum. part[t] is the running sum at level t; zero weights are
  // skipped as the reference does (an Inf in a tap that does not count stays out). A pass that
  // extrapolates (tf_crop_and_resize outside the input) writes extrapolation_value, which the
  // later passes then interpolate: the levels up to the last such one are replaced by it.
  int64_t base = 0;
  for (int a = 0; a < d.rank; ++a)
    if (!d.resized[a]) base += taps[a].start * in_stride[a];
  const int m = d.num_order;
  int lo = 0;
  for (int t = 0; t < m; ++t)
    if (taps[d.order[t]].extrapolate) lo = t + 1;
  if (m == 0) return load(base);
  if (lo == m) return d.extrapolation;
  double part[kMaxRank] = {};
  int sel[kMaxRank] = {};
  for (;;) {
    const int a0 = d.order[lo];
    const double w0 = resize_tap_weight(d, a0, taps[a0], sel[lo]);
    if (w0 != 0.0) {
      double v = d.extrapolation;
      if (lo == 0) {
        int64_t off = base;
        for (int t = 0; t < m; ++t) off += resize_tap_index(d, d.order[t], taps[d.order[t]], sel[t]) * in_stride[d.order[t]];
        v = load(off);
      }
      part[lo] = resize_add(part[lo], resize_mul(w0, v));  // no FMA: two roundings
    }
    for (int t = lo;; ++t) {
      if (++sel[t] < taps[d.order[t]].n) break;
      sel[t] = 0;  // level t is complete: it is one term of level t + 1
      if (t + 1 == m) return part[t];
      const int an = d.order[t + 1];
      const double wn = resize_tap_weight(d, an, taps[an], sel[t + 1]);
      if (wn != 0.0) part[t + 1] = resize_add(part[t + 1], resize_mul(wn, part[t]));
      part[t] = 0.0;
    }
  }
}

}  // namespace gpuopt::cuda
