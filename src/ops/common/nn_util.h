// Helpers shared by the neural-network CPU reference kernels (conv, pool, norm, matmul, quant):
// bulk element conversion through double, dtype checks, and the sliding-window geometry (kernel,
// strides, dilations, pads, auto_pad, ceil_mode) that Conv, ConvTranspose and the pools share.
//
//   GPUOPT_ASSIGN_OR_RETURN(Window w, resolve_window(ctx, x.shape, kernel_shape, /*ceil_mode=*/false));
//   std::vector<int64_t> idx = window_gather_table(w);   // input offset or -1 per (kernel tap, output)
#pragma once

#include "core/dispatch.h"
#include "core/tensor.h"
#include "ir/graph.h"
#include "ir/op_table.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

namespace gpuopt::nn {

// ---- elements -------------------------------------------------------------------------------

inline std::vector<double> to_doubles(const Tensor& t) {
  std::vector<double> v(static_cast<size_t>(t.numel()));
  dispatch_dtype(t.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* p = t.data<T>();
    for (size_t i = 0; i < v.size(); ++i) v[i] = to_f64(p[i]);
  });
  return v;
}

// double -> float rounded to odd: a later float -> f16/bf16 round-to-nearest-even then equals
// one correct rounding of the double (float keeps more than 2 extra bits), so half outputs are
// rounded exactly once as the reference kernels promise.
inline float to_float_round_odd(double d) {
  float f = static_cast<float>(d);
  if (!std::isfinite(d) || static_cast<double>(f) == d) return f;
  if (std::abs(static_cast<double>(f)) > std::abs(d)) f = std::nextafter(f, 0.0f);
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  bits |= 1u;
  std::memcpy(&f, &bits, 4);
  return f;
}

// Writes doubles into t, rounding once to t's dtype (integers round half to even and saturate).
inline void from_doubles(Tensor& t, const double* v) {
  dispatch_dtype(t.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* p = t.data<T>();
    for (int64_t i = 0; i < t.numel(); ++i) {
      if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
        double r = std::nearbyint(v[i]);
        r = std::min<double>(std::max<double>(r, static_cast<double>(std::numeric_limits<T>::lowest())),
                             static_cast<double>(std::numeric_limits<T>::max()));
        p[i] = static_cast<T>(r);
      } else if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
        p[i] = T(to_float_round_odd(v[i]));
      } else {
        p[i] = from_f64<T>(v[i]);
      }
    }
  });
}
inline void from_doubles(Tensor& t, const std::vector<double>& v) {
  from_doubles(t, v.data());
}

inline bool is_float_dtype(DType t) {
  return dtype_is_float(t);
}

// "f32, f16, bf16 or f64" check that names the input.
inline Status require_float(const InferContext& ctx, size_t i, const char* what) {
  const DType t = ctx.in(i).dtype;
  if (t != DType::Undefined && !is_float_dtype(t))
    return ctx.error("input {} ({}) has dtype {}; expected f32, f16, bf16 or f64", i, what, dtype_name(t));
  return Status::Ok();
}

inline Status require_same_dtype(const InferContext& ctx, size_t i, size_t j) {
  const DType a = ctx.in(i).dtype, b = ctx.in(j).dtype;
  if (a != DType::Undefined && b != DType::Undefined && a != b)
    return ctx.error("input {} has dtype {} but input {} has dtype {}", j, dtype_name(b), i, dtype_name(a));
  return Status::Ok();
}

inline Status require_inputs(const InferContext& ctx, size_t min_required) {
  for (size_t i = 0; i < min_required; ++i)
    if (!ctx.has_input(i)) return ctx.error("required input {} is missing", i);
  return Status::Ok();
}

// Product of known dims; -1 when any is unknown.
inline int64_t known_product(const Shape& s, size_t begin, size_t end) {
  int64_t p = 1;
  for (size_t i = begin; i < end; ++i) {
    if (!dim_is_known(s[i])) return -1;
    p *= s[i];
  }
  return p;
}

inline int64_t product(const Shape& s, size_t begin, size_t end) {
  int64_t p = 1;
  for (size_t i = begin; i < end; ++i) p *= s[i];
  return p;
}

inline std::string ints_str(const std::vector<int64_t>& v) {
  return shape_to_string(v);
}

// Python-style floor division (pads from negative totals round like the ONNX reference).
inline int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

// ---- sliding windows --------------------------------------------------------------------------

struct Window {
  size_t nd = 0;                // spatial rank
  std::vector<int64_t> in;      // input spatial extents (may be unknown at load time)
  std::vector<int64_t> kernel;  // kernel extents
  std::vector<int64_t> strides;
  std::vector<int64_t> dilations;
  std::vector<int64_t> pad_begin;  // resolved (unknown only when an input extent is unknown)
  std::vector<int64_t> pad_end;
  std::vector<int64_t> out;  // output spatial extents (kUnknownDim when not computable)

  int64_t kernel_size() const { return product(kernel, 0, nd); }
  int64_t out_size() const { return product(out, 0, nd); }
  int64_t in_size() const { return product(in, 0, nd); }
};

// Reads strides/dilations/pads/auto_pad from the node, checks their lengths and values, and
// computes the output extents (floor, or ceil with the PyTorch rule that the last window must
// start inside the input or its begin padding). `in` dims may be unknown or symbolic.
template <class Ctx>
inline Result<Window> resolve_window(const Ctx& ctx, const Shape& in_spatial, std::vector<int64_t> kernel,
                                     bool ceil_mode) {
  const Node& n = ctx.node;
  Window w;
  w.nd = in_spatial.size();
  w.in = in_spatial;
  w.kernel = std::move(kernel);
  if (w.kernel.size() != w.nd)
    return ctx.error("kernel rank {} does not match input spatial rank {}", w.kernel.size(), w.nd);
  for (int64_t k : w.kernel)
    if (k < 1) return ctx.error("kernel_shape {} has a non-positive extent", ints_str(w.kernel));
  w.strides = n.attr_ints("strides", std::vector<int64_t>(w.nd, 1));
  w.dilations = n.attr_ints("dilations", std::vector<int64_t>(w.nd, 1));
  if (w.strides.empty()) w.strides.assign(w.nd, 1);
  if (w.dilations.empty()) w.dilations.assign(w.nd, 1);
  if (w.strides.size() != w.nd) return ctx.error("strides has {} values for {} spatial dims", w.strides.size(), w.nd);
  if (w.dilations.size() != w.nd)
    return ctx.error("dilations has {} values for {} spatial dims", w.dilations.size(), w.nd);
  for (size_t i = 0; i < w.nd; ++i)
    if (w.strides[i] < 1 || w.dilations[i] < 1)
      return ctx.error("strides {} and dilations {} must be positive", ints_str(w.strides), ints_str(w.dilations));
  const std::string auto_pad = n.attr_s("auto_pad", "NOTSET");
  std::vector<int64_t> pads = n.attr_ints("pads", std::vector<int64_t>(2 * w.nd, 0));
  if (pads.empty()) pads.assign(2 * w.nd, 0);
  if (auto_pad == "NOTSET" && pads.size() != 2 * w.nd)
    return ctx.error("pads has {} values; expected {} (begin and end for {} spatial dims)", pads.size(), 2 * w.nd,
                     w.nd);
  if (auto_pad != "NOTSET" && auto_pad != "VALID" && auto_pad != "SAME_UPPER" && auto_pad != "SAME_LOWER")
    return ctx.error("auto_pad '{}' is not NOTSET, VALID, SAME_UPPER or SAME_LOWER", auto_pad);
  // Bounded so the window arithmetic below cannot overflow an int64 (dims are bounded by the
  // tensor size checks; a hostile attribute could still be near 2^63).
  constexpr int64_t kMaxWindowAttr = int64_t{1} << 31;
  for (const std::vector<int64_t>* v : {&w.kernel, &w.strides, &w.dilations, &pads})
    for (int64_t x : *v)
      if (x > kMaxWindowAttr || x < -kMaxWindowAttr)
        return ctx.error("kernel_shape/strides/dilations/pads value {} is beyond 2^31 in magnitude", x);
  w.pad_begin.assign(w.nd, 0);
  w.pad_end.assign(w.nd, 0);
  w.out.assign(w.nd, kUnknownDim);
  for (size_t i = 0; i < w.nd; ++i) {
    const int64_t eff = (w.kernel[i] - 1) * w.dilations[i] + 1;
    const int64_t s = w.strides[i];
    const int64_t x = w.in[i];
    if (auto_pad == "NOTSET") {
      w.pad_begin[i] = pads[i];
      w.pad_end[i] = pads[w.nd + i];
      if (w.pad_begin[i] < 0 || w.pad_end[i] < 0) return ctx.error("pads {} has a negative value", ints_str(pads));
    }
    if (!dim_is_known(x)) continue;
    // With attributes under 2^31, an input extent under 2^62 keeps the sums below in range (a
    // declared dim near 2^63 overflowed `x + s - 1`; found by the model_loader fuzzer).
    if (x > (int64_t{1} << 62)) return ctx.error("spatial dim {} has extent {}, too large for a window op", i, x);
    if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      const int64_t out = (x + s - 1) / s;
      const int64_t total = std::max<int64_t>(0, (out - 1) * s + eff - x);
      const int64_t small = total / 2;
      w.pad_begin[i] = auto_pad == "SAME_UPPER" ? small : total - small;
      w.pad_end[i] = total - w.pad_begin[i];
      w.out[i] = out;
      continue;
    }
    const int64_t span = x + w.pad_begin[i] + w.pad_end[i] - eff;
    if (span < 0)
      return ctx.error("window {} (dilated {}) is larger than the padded input extent {} in spatial dim {}",
                       w.kernel[i], eff, x + w.pad_begin[i] + w.pad_end[i], i);
    int64_t out = span / s + 1;
    if (ceil_mode) {
      out = (span + s - 1) / s + 1;
      if ((out - 1) * s >= x + w.pad_begin[i]) --out;
    }
    w.out[i] = out;
  }
  return w;
}

// For kernel tap t (row-major over kernel) and output position o (row-major over out), the
// row-major input offset it reads, or -1 when it falls in padding. Size kernel_size * out_size.
// Shared by Conv, QLinearConv and the pools so each kernel is a plain multiply-add over it.
inline std::vector<int64_t> window_gather_table(const Window& w) {
  const int64_t K = w.kernel_size(), O = w.out_size();
  std::vector<int64_t> table(static_cast<size_t>(K * O));
  std::vector<int64_t> kidx(w.nd, 0), oidx(w.nd, 0);
  for (int64_t t = 0; t < K; ++t) {
    int64_t rem = t;
    for (size_t d = w.nd; d-- > 0;) {
      kidx[d] = rem % w.kernel[d];
      rem /= w.kernel[d];
    }
    for (int64_t o = 0; o < O; ++o) {
      int64_t r = o;
      int64_t off = 0;
      bool inside = true;
      for (size_t d = w.nd; d-- > 0;) {
        oidx[d] = r % w.out[d];
        r /= w.out[d];
      }
      for (size_t d = 0; d < w.nd; ++d) {
        const int64_t p = oidx[d] * w.strides[d] - w.pad_begin[d] + kidx[d] * w.dilations[d];
        if (p < 0 || p >= w.in[d]) {
          inside = false;
          break;
        }
        off = off * w.in[d] + p;
      }
      table[static_cast<size_t>(t * O + o)] = inside ? off : -1;
    }
  }
  return table;
}

// Kernel extents: the kernel_shape attribute when present (checked against `from_weight` where
// that is known), else `from_weight`. Empty (no error) when neither is known yet (load time).
template <class Ctx>
inline Result<std::vector<int64_t>> kernel_shape_attr(const Ctx& ctx, const Shape& from_weight, size_t nd) {
  std::vector<int64_t> ks = ctx.node.attr_ints("kernel_shape");
  if (ks.empty()) {
    if (from_weight.size() != nd) return std::vector<int64_t>{};
    for (int64_t d : from_weight)
      if (!dim_is_known(d)) return std::vector<int64_t>{};
    return std::vector<int64_t>(from_weight);
  }
  if (ks.size() != nd)
    return ctx.error("kernel_shape {} has rank {}; input has {} spatial dims", ints_str(ks), ks.size(), nd);
  for (size_t i = 0; i < from_weight.size() && i < nd; ++i)
    if (dim_is_known(from_weight[i]) && from_weight[i] != ks[i])
      return ctx.error("kernel_shape {} does not match weight spatial dims {}", ints_str(ks), ints_str(from_weight));
  return ks;
}

// A convolution's window over x [N, C, spatial...] with weight w [M, C/group, kernel...]:
// kernel_shape (checked against w's spatial dims, else taken from them), strides, dilations,
// pads, auto_pad. The one geometry of Conv, ConvInteger and QLinearConv, CPU and CUDA alike.
template <class Ctx>
inline Result<Window> conv_window(const Ctx& ctx, const Shape& x, const Shape& w) {
  GPUOPT_ASSIGN_OR_RETURN(std::vector<int64_t> kernel,
                          kernel_shape_attr(ctx, Shape(w.begin() + 2, w.end()), x.size() - 2));
  return resolve_window(ctx, Shape(x.begin() + 2, x.end()), std::move(kernel), false);
}

// Output shape of the integer convolutions (ConvInteger, QLinearConv): x [N, C, spatial...] and
// w [M, C/group, kernel...] checked for rank, channels and group; spatial dims from the window.
// Leaves y's shape unknown while x's or w's rank is.
template <class Ctx>
inline Status infer_integer_conv_shape(const Ctx& ctx, const ValueInfo& x, const ValueInfo& w, ValueInfo* y) {
  if (!x.rank_known || !w.rank_known) return Status::Ok();
  if (x.shape.size() < 3) return ctx.error("input rank {} is below 3", x.shape.size());
  if (w.shape.size() != x.shape.size())
    return ctx.error("kernel rank {} does not match input rank {}", w.shape.size(), x.shape.size());
  const int64_t G = ctx.node.attr_i("group", 1);
  if (G < 1) return ctx.error("group {} must be positive", G);
  if (dim_is_known(x.shape[1]) && dim_is_known(w.shape[1]) && x.shape[1] != w.shape[1] * G)
    return ctx.error("input has {} channels but weight expects {} x group {}", x.shape[1], w.shape[1], G);
  if (dim_is_known(w.shape[0]) && w.shape[0] % G != 0)
    return ctx.error("output channels {} are not divisible by group {}", w.shape[0], G);
  const size_t nd = x.shape.size() - 2;
  GPUOPT_ASSIGN_OR_RETURN(std::vector<int64_t> kernel,
                          kernel_shape_attr(ctx, Shape(w.shape.begin() + 2, w.shape.end()), nd));
  y->rank_known = true;
  y->shape.assign(x.shape.size(), kUnknownDim);
  y->shape[0] = x.shape[0];
  y->shape[1] = w.shape[0];
  if (kernel.empty()) return Status::Ok();
  GPUOPT_ASSIGN_OR_RETURN(Window win,
                          resolve_window(ctx, Shape(x.shape.begin() + 2, x.shape.end()), kernel, false));
  for (size_t i = 0; i < nd; ++i) y->shape[2 + i] = win.out[i];
  return Status::Ok();
}

// Element count for FLOP estimates: unknown or symbolic dims (a dynamic batch) count as 1, so
// `inspect` reports the per-sample figure; -1 when the rank itself is unknown.
inline double est_numel(const ValueInfo* v) {
  if (!v || !v->rank_known) return -1;
  double p = 1;
  for (int64_t d : v->shape) p *= dim_is_known(d) ? static_cast<double>(d) : 1.0;
  return p;
}
inline double est_dim(const ValueInfo* v, int64_t i) {
  if (!v || !v->rank_known) return 1;
  const int64_t r = static_cast<int64_t>(v->shape.size());
  if (i < 0) i += r;
  if (i < 0 || i >= r || !dim_is_known(v->shape[static_cast<size_t>(i)])) return 1;
  return static_cast<double>(v->shape[static_cast<size_t>(i)]);
}
inline const ValueInfo* flops_in(const FlopsContext& ctx, size_t i) {
  return i < ctx.inputs.size() ? ctx.inputs[i] : nullptr;
}
inline const ValueInfo* flops_out(const FlopsContext& ctx, size_t i) {
  return i < ctx.outputs.size() ? ctx.outputs[i] : nullptr;
}

// Multiply-adds per output element of a convolution with weight w: the product of w's dims
// after the first (C/group x kernel taps; ConvTranspose's M/group x taps per input element).
// -1 when w or its rank is unknown.
inline double conv_taps(const ValueInfo* w) {
  if (!w || !w->rank_known) return -1;
  double per = 1;
  for (size_t i = 1; i < w->shape.size(); ++i) per *= est_dim(w, static_cast<int64_t>(i));
  return per;
}
// 2 FLOPs per multiply-add over `elems` elements (-1: unknown, counted as 0) and weight w.
inline double conv_flops(double elems, const ValueInfo* w) {
  const double per = conv_taps(w);
  return elems < 0 || per < 0 ? 0 : 2 * elems * per;
}

// One float input X of rank >= min_rank ([N, C, ...] ops).
inline Status require_nc_input(const InferContext& ctx, size_t min_rank) {
  GPUOPT_RETURN_IF_ERROR(require_inputs(ctx, 1));
  GPUOPT_RETURN_IF_ERROR(require_float(ctx, 0, "X"));
  const ValueInfo& x = ctx.in(0);
  if (x.rank_known && x.shape.size() < min_rank) return ctx.error("input rank {} is below {}", x.shape.size(), min_rank);
  return Status::Ok();
}

}  // namespace gpuopt::nn
