// Unary math and activations. Float types compute in double and round once to the output type;
// integer types compute in their own type (wrapping like the hardware does).
#include "ops/common/broadcast.h"
#include "ir/graph.h"

#include <cmath>
#include <limits>

namespace gpuopt {
namespace {

Status infer_unary(InferContext& ctx, unsigned classes, DType out_dtype = DType::Undefined) {
  if (!ctx.has_input(0)) return ctx.error("input 0 is missing");
  GPUOPT_RETURN_IF_ERROR(check_input_dtype(ctx, 0, classes));
  ValueInfo& o = ctx.outputs[0];
  o.dtype = out_dtype == DType::Undefined ? ctx.in(0).dtype : out_dtype;
  o.rank_known = ctx.in(0).rank_known;
  o.shape = ctx.in(0).shape;
  return Status::Ok();
}

// y[i] = f(x[i]) for the element types in kClasses (others are rejected by inference).
// Float types call f(double); integer and bool types call f(T).
template <unsigned kClasses, typename F>
void map_unary(const Tensor& x, Tensor& y, F&& f) {
  dispatch_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* px = x.data<T>();
    T* py = y.data<T>();
    const int64_t n = x.numel();
    if constexpr (kIsFloatLike<T>) {
      if constexpr ((kClasses & kFloatTypes) != 0)
        for (int64_t i = 0; i < n; ++i) py[i] = store_f64<T>(f(to_f64(px[i])));
    } else if constexpr (std::is_same_v<T, bool>) {
      GPUOPT_ASSERT(false, "unary kernel called with bool");
    } else {
      if constexpr ((kClasses & kIntTypes) != 0)
        for (int64_t i = 0; i < n; ++i) py[i] = static_cast<T>(f(px[i]));
    }
  });
}

// Two's-complement negation without signed-overflow UB (-INT_MIN wraps to INT_MIN).
template <typename T>
T wrap_neg(T x) {
  if constexpr (std::is_integral_v<T>)
    return static_cast<T>(0 - static_cast<std::make_unsigned_t<T>>(x));
  else
    return -x;
}

double sigmoid(double x) {
  if (x >= 0) return 1.0 / (1.0 + std::exp(-x));
  const double e = std::exp(x);
  return e / (1.0 + e);
}

double softplus(double x) {
  return x > 0 ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x));
}

constexpr double kSqrt1_2 = 0.70710678118654752440;
constexpr double kSqrt2OverPi = 0.79788456080286535588;

double attr_d(const KernelContext& ctx, std::string_view name, float def) {
  return static_cast<double>(ctx.node.attr_f(name, def));
}

}  // namespace

// One op = its accepted element types, a FLOP cost per element and the element function.
#define GPUOPT_UNARY(Name, classes, cost, ...)              \
  Status infer_##Name(InferContext& ctx) {                  \
    return infer_unary(ctx, classes);                       \
  }                                                         \
  Status cpu_##Name(KernelContext& ctx) {                   \
    map_unary<classes>(ctx.in(0), ctx.out(0), __VA_ARGS__); \
    return Status::Ok();                                    \
  }                                                         \
  double flops_##Name(const FlopsContext& ctx) {            \
    return (cost)*known_numel(ctx.outputs[0]);              \
  }

GPUOPT_UNARY(Relu, kFloatTypes | kSignedInts, 1, [](auto x) { return x > 0 ? x : decltype(x){0}; })
GPUOPT_UNARY(LeakyRelu, kFloatTypes, 2, [a = attr_d(ctx, "alpha", 0.01f)](double x) { return x >= 0 ? x : a * x; })
GPUOPT_UNARY(Elu, kFloatTypes, 4, [a = attr_d(ctx, "alpha", 1.0f)](double x) { return x >= 0 ? x : a * std::expm1(x); })
GPUOPT_UNARY(Selu, kFloatTypes, 5,
             [a = attr_d(ctx, "alpha", 1.67326319217681884765625f),
              g = attr_d(ctx, "gamma", 1.05070102214813232421875f)](double x) {
               return g * (x > 0 ? x : a * std::expm1(x));
             })
GPUOPT_UNARY(Sigmoid, kFloatTypes, 4, [](double x) { return sigmoid(x); })
GPUOPT_UNARY(HardSigmoid, kFloatTypes, 4, [a = attr_d(ctx, "alpha", 0.2f), b = attr_d(ctx, "beta", 0.5f)](double x) {
  return std::max(0.0, std::min(1.0, a * x + b));
})
GPUOPT_UNARY(HardSwish, kFloatTypes, 5, [](double x) { return x * std::max(0.0, std::min(1.0, x / 6.0 + 0.5)); })
GPUOPT_UNARY(Tanh, kFloatTypes, 4, [](double x) { return std::tanh(x); })
GPUOPT_UNARY(Softplus, kFloatTypes, 4, [](double x) { return softplus(x); })
GPUOPT_UNARY(Erf, kNumericTypes, 4, [](double x) { return std::erf(x); })
GPUOPT_UNARY(Sqrt, kFloatTypes, 1, [](double x) { return std::sqrt(x); })
GPUOPT_UNARY(Exp, kFloatTypes, 1, [](double x) { return std::exp(x); })
GPUOPT_UNARY(Log, kFloatTypes, 1, [](double x) { return std::log(x); })
GPUOPT_UNARY(Neg, kFloatTypes | kSignedInts, 1, [](auto x) { return wrap_neg(x); })
GPUOPT_UNARY(Abs, kNumericTypes, 1, [](auto x) {
  if constexpr (std::is_unsigned_v<decltype(x)>)
    return x;
  else
    return x < 0 ? wrap_neg(x) : x;
})
GPUOPT_UNARY(Reciprocal, kFloatTypes, 1, [](double x) { return 1.0 / x; })
GPUOPT_UNARY(Floor, kFloatTypes, 1, [](double x) { return std::floor(x); })
GPUOPT_UNARY(Ceil, kFloatTypes, 1, [](double x) { return std::ceil(x); })
// nearbyint in the default rounding mode rounds halves to even, as ONNX Round requires.
GPUOPT_UNARY(Round, kFloatTypes, 1, [](double x) { return std::nearbyint(x); })
GPUOPT_UNARY(Sign, kNumericTypes, 1, [](auto x) {
  using T = decltype(x);
  if constexpr (std::is_floating_point_v<T>)
    return std::isnan(x) ? x : static_cast<T>((x > 0) - (x < 0));
  else if constexpr (std::is_unsigned_v<T>)
    return static_cast<T>(x > 0);
  else
    return static_cast<T>((x > 0) - (x < 0));
})
GPUOPT_UNARY(Sin, kFloatTypes, 1, [](double x) { return std::sin(x); })
GPUOPT_UNARY(Cos, kFloatTypes, 1, [](double x) { return std::cos(x); })
// Same family, beyond the core list: cheap to carry and used by the conformance suite.
GPUOPT_UNARY(Tan, kFloatTypes, 1, [](double x) { return std::tan(x); })
GPUOPT_UNARY(Asin, kFloatTypes, 1, [](double x) { return std::asin(x); })
GPUOPT_UNARY(Acos, kFloatTypes, 1, [](double x) { return std::acos(x); })
GPUOPT_UNARY(Atan, kFloatTypes, 1, [](double x) { return std::atan(x); })
GPUOPT_UNARY(Sinh, kFloatTypes, 1, [](double x) { return std::sinh(x); })
GPUOPT_UNARY(Cosh, kFloatTypes, 1, [](double x) { return std::cosh(x); })
GPUOPT_UNARY(Asinh, kFloatTypes, 1, [](double x) { return std::asinh(x); })
GPUOPT_UNARY(Acosh, kFloatTypes, 1, [](double x) { return std::acosh(x); })
GPUOPT_UNARY(Atanh, kFloatTypes, 1, [](double x) { return std::atanh(x); })
GPUOPT_UNARY(Softsign, kFloatTypes, 3, [](double x) { return x / (1.0 + std::fabs(x)); })
GPUOPT_UNARY(Mish, kFloatTypes, 6, [](double x) { return x * std::tanh(softplus(x)); })
GPUOPT_UNARY(ThresholdedRelu, kFloatTypes, 1, [a = attr_d(ctx, "alpha", 1.0f)](double x) { return x > a ? x : 0.0; })
GPUOPT_UNARY(Celu, kFloatTypes, 4, [a = attr_d(ctx, "alpha", 1.0f)](double x) {
  return std::max(0.0, x) + std::min(0.0, a * std::expm1(x / a));
})
GPUOPT_UNARY(Shrink, kNumericTypes, 2, [l = attr_d(ctx, "lambd", 0.5f), b = attr_d(ctx, "bias", 0.0f)](auto x) {
  using T = decltype(x);
  const double v = static_cast<double>(x);
  return static_cast<T>(v < -l ? v + b : (v > l ? v - b : 0.0));
})
GPUOPT_UNARY(Swish, kFloatTypes, 5, [a = attr_d(ctx, "alpha", 1.0f)](double x) { return x * sigmoid(a * x); })
GPUOPT_UNARY(BitwiseNot, kIntTypes, 1, [](auto x) { return static_cast<decltype(x)>(~x); })
#undef GPUOPT_UNARY

// Gelu (opset 20): approximate = "none" (exact, erf) or "tanh".
Status infer_Gelu(InferContext& ctx) {
  const std::string approx = ctx.node.attr_s("approximate", "none");
  if (approx != "none" && approx != "tanh")
    return ctx.error("attribute approximate is '{}'; expected 'none' or 'tanh'", approx);
  return infer_unary(ctx, kFloatTypes);
}
Status cpu_Gelu(KernelContext& ctx) {
  if (ctx.node.attr_s("approximate", "none") == "tanh") {
    map_unary<kFloatTypes>(ctx.in(0), ctx.out(0), [](double x) {
      return 0.5 * x * (1.0 + std::tanh(kSqrt2OverPi * (x + 0.044715 * x * x * x)));
    });
  } else {
    map_unary<kFloatTypes>(ctx.in(0), ctx.out(0), [](double x) { return 0.5 * x * (1.0 + std::erf(x * kSqrt1_2)); });
  }
  return Status::Ok();
}
double flops_Gelu(const FlopsContext& ctx) {
  return 8 * known_numel(ctx.outputs[0]);
}

// IsNaN / IsInf: float input, bool output.
template <typename Pred>
void map_predicate(const Tensor& x, Tensor& y, Pred&& pred) {
  dispatch_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (kIsFloatLike<T>) {
      const T* px = x.data<T>();
      bool* py = y.data<bool>();
      for (int64_t i = 0; i < x.numel(); ++i) py[i] = pred(to_f64(px[i]));
    }
  });
}

Status infer_IsNaN(InferContext& ctx) {
  return infer_unary(ctx, kFloatTypes, DType::Bool);
}
Status cpu_IsNaN(KernelContext& ctx) {
  map_predicate(ctx.in(0), ctx.out(0), [](double x) { return std::isnan(x); });
  return Status::Ok();
}
double flops_IsNaN(const FlopsContext& ctx) {
  return known_numel(ctx.outputs[0]);
}

Status infer_IsInf(InferContext& ctx) {
  return infer_unary(ctx, kFloatTypes, DType::Bool);
}
Status cpu_IsInf(KernelContext& ctx) {
  const bool pos = ctx.node.attr_i("detect_positive", 1) != 0;
  const bool neg = ctx.node.attr_i("detect_negative", 1) != 0;
  map_predicate(ctx.in(0), ctx.out(0), [&](double x) { return std::isinf(x) && (x > 0 ? pos : neg); });
  return Status::Ok();
}
double flops_IsInf(const FlopsContext& ctx) {
  return known_numel(ctx.outputs[0]);
}

// PRelu: slope broadcasts to X (unidirectionally); y = x < 0 ? slope * x : x.
Status infer_PRelu(InferContext& ctx) {
  if (!ctx.has_input(1)) return ctx.error("input 1 (slope) is missing");
  GPUOPT_RETURN_IF_ERROR(check_input_dtype(ctx, 0, kFloatTypes | kIntTypes));
  GPUOPT_RETURN_IF_ERROR(common_input_dtype(ctx, {0, 1}));
  if (ctx.in(0).rank_known && ctx.in(1).rank_known && !broadcastable_to(ctx.in(1).shape, ctx.in(0).shape))
    return ctx.error("slope shape {} does not broadcast to input shape {}", shape_to_string(ctx.in(1).shape),
                     shape_to_string(ctx.in(0).shape));
  return infer_unary(ctx, kFloatTypes | kIntTypes);
}
Status cpu_PRelu(KernelContext& ctx) {
  dispatch_dtype(ctx.in(0).dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (kIsFloatLike<T>) {
      binary_broadcast<T, T, T>(ctx.in(0), ctx.in(1), ctx.out(0), [](T x, T s) {
        const double v = to_f64(x);
        return store_f64<T>(v < 0 ? to_f64(s) * v : v);
      });
    } else if constexpr (!std::is_same_v<T, bool>) {
      binary_broadcast<T, T, T>(ctx.in(0), ctx.in(1), ctx.out(0),
                                [](T x, T s) { return x < 0 ? static_cast<T>(s * x) : x; });
    }
  });
  return Status::Ok();
}
double flops_PRelu(const FlopsContext& ctx) {
  return 2 * known_numel(ctx.outputs[0]);
}

// Clip: bounds are attributes min/max before opset 11 (Clip_v1, floats only) and optional scalar
// inputs 1 and 2 after.
namespace {
Status infer_clip(InferContext& ctx, bool attr_bounds) {
  GPUOPT_RETURN_IF_ERROR(infer_unary(ctx, attr_bounds ? kFloatTypes : kNumericTypes));
  GPUOPT_RETURN_IF_ERROR(common_input_dtype(ctx, {0, 1, 2}));
  for (size_t i = 1; i < 3; ++i) {
    if (!ctx.has_input(i) || !ctx.in(i).rank_known) continue;
    const int64_t n = shape_numel(ctx.in(i).shape);
    if (n >= 0 && n != 1)
      return ctx.error("input {} ({}) must be a scalar; got shape {}", i, i == 1 ? "min" : "max",
                       shape_to_string(ctx.in(i).shape));
  }
  return Status::Ok();
}
Status cpu_clip(KernelContext& ctx, bool attr_bounds) {
  dispatch_dtype(ctx.in(0).dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (kIsFloatLike<T>) {
      double lo = -std::numeric_limits<double>::infinity(), hi = std::numeric_limits<double>::infinity();
      if (attr_bounds) {
        lo = attr_d(ctx, "min", std::numeric_limits<float>::lowest());
        hi = attr_d(ctx, "max", std::numeric_limits<float>::max());
      } else {
        if (ctx.has_input(1)) lo = to_f64(ctx.in(1).data<T>()[0]);
        if (ctx.has_input(2)) hi = to_f64(ctx.in(2).data<T>()[0]);
      }
      // max then min, so min > max gives max everywhere (the spec's rule) and NaN passes through
      map_unary<kFloatTypes>(ctx.in(0), ctx.out(0), [=](double x) {
        const double v = x < lo ? lo : x;
        return v > hi ? hi : v;
      });
    } else if constexpr (!std::is_same_v<T, bool>) {
      const T lo = ctx.has_input(1) ? ctx.in(1).data<T>()[0] : std::numeric_limits<T>::lowest();
      const T hi = ctx.has_input(2) ? ctx.in(2).data<T>()[0] : std::numeric_limits<T>::max();
      map_unary<kIntTypes>(ctx.in(0), ctx.out(0), [=](T x) {
        const T v = x < lo ? lo : x;
        return v > hi ? hi : v;
      });
    }
  });
  return Status::Ok();
}
}  // namespace
Status infer_Clip_v1(InferContext& ctx) { return infer_clip(ctx, true); }
Status cpu_Clip_v1(KernelContext& ctx) { return cpu_clip(ctx, true); }
Status infer_Clip(InferContext& ctx) { return infer_clip(ctx, false); }
Status cpu_Clip(KernelContext& ctx) { return cpu_clip(ctx, false); }
double flops_Clip(const FlopsContext& ctx) {
  return 2 * known_numel(ctx.outputs[0]);
}

}  // namespace gpuopt
