// The per-element arithmetic of the CUDA Resize kernel, shared by the kernel (device) and the
// host unit test that checks it against the CPU reference without a GPU. Products that the
// reference computes as separate multiply and add are kept unfused on the device.
#pragma once

#include "backends/cuda/resize.h"

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

// Input coordinate of output index y along axis a (the CPU reference's formulas).
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
      if (x < 0 || x > in_w - 1) *extrapolate = true;
      return x;
    }
    default: return (yd + 0.5) / scale - 0.5;
  }
}

// Up to two taps (index clamped into the input, weight) for output index y along axis a.
GPUOPT_RESIZE_HD inline int resize_axis_taps(const ResizeDesc& d, int a, int64_t y, int64_t* idx, double* w,
                                             bool* extrapolate) {
  const int64_t in_len = d.in_dims[a];
  const double x = resize_source_coord(d, a, y, extrapolate);
  const double p = floor(x);
  const bool on_pixel = x == p;
  const int64_t ip = static_cast<int64_t>(p);
  // As the reference: ratio 1 on a pixel; the two taps start at p-1 on a pixel, else at p; the
  // second tap is taken for ratio 1 or when rounding goes up.
  const double ratio = on_pixel ? 1.0 : x - p;
  const int64_t start = ip - 1 + (on_pixel ? 0 : 1);
  auto clamp = [in_len](int64_t i) { return i < 0 ? int64_t{0} : (i >= in_len ? in_len - 1 : i); };
  if (!d.linear) {
    bool up = true;
    if (ratio != 1.0) {
      switch (d.nearest) {
        case ResizeNearest::kRoundPreferFloor: up = ratio > 0.5; break;
        case ResizeNearest::kRoundPreferCeil: up = ratio >= 0.5; break;
        case ResizeNearest::kFloor: up = false; break;
        case ResizeNearest::kCeil: up = true; break;
      }
    }
    idx[0] = clamp(start + (up ? 1 : 0));
    w[0] = 1.0;
    return 1;
  }
  double c0 = 1.0 - ratio, c1 = ratio;
  if (d.exclude_outside) {
    if (start < 0 || start >= in_len) c0 = 0;
    if (start + 1 < 0 || start + 1 >= in_len) c1 = 0;
    const double sum = c0 + c1;
    if (sum != 0) {
      c0 /= sum;
      c1 /= sum;
    }
  }
  idx[0] = clamp(start);
  idx[1] = clamp(start + 1);
  w[0] = c0;
  w[1] = c1;
  return 2;
}

// Output element i in double (before the conversion to the element type); *extrapolate is set
// when it takes extrapolation_value instead. load(offset) returns an input element as double.
template <typename Load>
GPUOPT_RESIZE_HD double resize_point(const ResizeDesc& d, int64_t i, Load load, bool* extrapolate) {
  int64_t idx[kMaxRank][2];
  double w[kMaxRank][2];
  int n[kMaxRank];
  int64_t in_stride[kMaxRank];
  *extrapolate = false;
  int64_t rem = i, st = 1;
  for (int a = d.rank - 1; a >= 0; --a) {
    const int64_t c = rem % d.out_dims[a];
    rem /= d.out_dims[a];
    in_stride[a] = st;
    st *= d.in_dims[a];
    if (d.resized[a]) {
      n[a] = resize_axis_taps(d, a, c, idx[a], w[a], extrapolate);
    } else {
      n[a] = 1;
      idx[a][0] = c;
      w[a][0] = 1.0;
    }
  }
  if (*extrapolate) return d.extrapolation;
  // The CPU reference resizes one axis at a time, in `axes` order, each pass summing
  // w * value in double into a fresh zero; for results that land on .5 (u8 outputs) the order of
  // the roundings decides the answer, so the same nested sums are formed here: the first
  // processed axis is the innermost sum. part[t] is the running sum at level t; zero weights are
  // skipped as the reference does (an Inf in a tap that does not count stays out).
  int64_t base = 0;
  for (int a = 0; a < d.rank; ++a)
    if (!d.resized[a]) base += idx[a][0] * in_stride[a];
  const int m = d.num_order;
  if (m == 0) return load(base);
  double part[kMaxRank] = {};
  int sel[kMaxRank] = {};
  for (;;) {
    int64_t off = base;
    for (int t = 0; t < m; ++t) off += idx[d.order[t]][sel[t]] * in_stride[d.order[t]];
    const double w0 = w[d.order[0]][sel[0]];
    if (w0 != 0.0) part[0] = resize_add(part[0], resize_mul(w0, load(off)));  // no FMA: two roundings
    for (int t = 0;; ++t) {
      if (++sel[t] < n[d.order[t]]) break;
      sel[t] = 0;  // level t is complete: it is one term of level t + 1
      if (t + 1 == m) return part[t];
      const double wn = w[d.order[t + 1]][sel[t + 1]];
      if (wn != 0.0) part[t + 1] = resize_add(part[t + 1], resize_mul(wn, part[t]));
      part[t] = 0.0;
    }
  }
}

}  // namespace gpuopt::cuda
