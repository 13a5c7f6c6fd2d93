// Binary arithmetic, comparisons and logic with numpy broadcasting; variadic Min/Max/Sum/Mean;
// Where. Float types compute in double and round once; integers compute in their own type with
// two's-complement wrapping (no signed-overflow UB), and integer division by zero is an error.
#include "ops/common/broadcast.h"
#include "ops/common/tensor_util.h"
#include "ir/graph.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace gpuopt {
namespace {

template <typename T>
using Unsigned = std::make_unsigned_t<T>;

// Shape arithmetic on shape values (ValueInfo::dims_value; torch's expand writes its target as
// Where(Equal(s, -1), 1, s) over a computed shape s): Mul, Add, Sub and Equal where each element
// is known: a symbol times 1 or plus 0 stays itself; a dim (>= 0 or a symbol) never equals a
// negative constant; the same symbol equals itself. Anything else gives no shape value.
void propagate_dims(InferContext& ctx) {
  const Op op = ctx.node.op;
  if (ctx.num_inputs() != 2 || (op != Op::Mul && op != Op::Add && op != Op::Sub && op != Op::Equal)) return;
  const auto a = tensor_util::dims_value_of(ctx, 0), b = tensor_util::dims_value_of(ctx, 1);
  if (!a || !b) return;
  const auto sym = [](int64_t d) { return d < -1; };
  std::optional<std::vector<int64_t>> r;
  if (op == Op::Mul) {
    r = tensor_util::dims_zip(*a, *b, [&](int64_t x, int64_t y) -> std::optional<int64_t> {
      if (!sym(x) && !sym(y)) return x * y;
      if (y == 1) return x;
      if (x == 1) return y;
      return std::nullopt;
    });
  } else if (op == Op::Add || op == Op::Sub) {
    const bool sub = op == Op::Sub;
    r = tensor_util::dims_zip(*a, *b, [&](int64_t x, int64_t y) -> std::optional<int64_t> {
      if (!sym(x) && !sym(y)) return sub ? x - y : x + y;
      if (y == 0) return x;
      if (x == 0 && !sub) return y;
      return std::nullopt;
    });
  } else {
    r = tensor_util::dims_zip(*a, *b, [&](int64_t x, int64_t y) -> std::optional<int64_t> {
      if (!sym(x) && !sym(y)) return x == y;
      if (x == y) return 1;
      if ((sym(x) && y < 0) || (sym(y) && x < 0)) return 0;
      return std::nullopt;
    });
  }
  if (r) tensor_util::set_dims_value(ctx, 0, std::move(*r));
}

// Shape and dtype of a broadcasting op over inputs [0, n) that must share one dtype.
Status infer_broadcasting(InferContext& ctx, size_t min_inputs, unsigned classes, DType out_dtype) {
  if (ctx.num_inputs() < min_inputs) return ctx.error("expects {} inputs, got {}", min_inputs, ctx.num_inputs());
  std::vector<size_t> which;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    if (!ctx.has_input(i)) return ctx.error("input {} is missing", i);
    GPUOPT_RETURN_IF_ERROR(check_input_dtype(ctx, i, classes));
    which.push_back(i);
  }
  GPUOPT_ASSIGN_OR_RETURN(DType t, common_input_dtype(ctx, which));
  ValueInfo& o = ctx.outputs[0];
  o.dtype = out_dtype == DType::Undefined ? t : out_dtype;
  GPUOPT_RETURN_IF_ERROR(infer_broadcast(ctx, which, &o));
  propagate_dims(ctx);
  return Status::Ok();
}

// Float -> integer conversion that saturates instead of invoking UB (NaN gives 0).
template <typename T>
T saturate_cast(double v) {
  if (std::isnan(v)) return T{0};
  if (v <= static_cast<double>(std::numeric_limits<T>::lowest())) return std::numeric_limits<T>::lowest();
  if (v >= static_cast<double>(std::numeric_limits<T>::max())) return std::numeric_limits<T>::max();
  return static_cast<T>(v);
}

// out = f(a, b): float types through f(double, double) rounded once, integer types through f(T, T).
template <unsigned kClasses, typename F>
void arith(KernelContext& ctx, F&& f) {
  dispatch_dtype(ctx.in(0).dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (kIsFloatLike<T>) {
      if constexpr ((kClasses & kFloatTypes) != 0)
        binary_broadcast<T, T, T>(ctx.in(0), ctx.in(1), ctx.out(0),
                                  [&](T a, T b) { return store_f64<T>(f(to_f64(a), to_f64(b))); });
    } else if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
      if constexpr ((kClasses & kIntTypes) != 0)
        binary_broadcast<T, T, T>(ctx.in(0), ctx.in(1), ctx.out(0), [&](T a, T b) { return static_cast<T>(f(a, b)); });
    }
  });
}

// Integer division and modulo fail cleanly on a zero divisor instead of trapping.
Status check_no_zero_divisor(const KernelContext& ctx) {
  const Tensor& b = ctx.in(1);
  if (!dtype_is_integer(b.dtype())) return Status::Ok();
  for (int64_t i = 0; i < b.numel(); ++i)
    if (b.get_i64(i) == 0) return ctx.error("integer division by zero (input 1, element {})", i);
  return Status::Ok();
}

// out(bool) = pred(a, b) with a and b compared in their own type (f16/bf16 through double).
template <bool kStrings, typename P>
void compare(KernelContext& ctx, P&& pred) {
  if constexpr (kStrings) {
    if (ctx.in(0).dtype() == DType::String) {
      const std::vector<std::string>& a = ctx.in(0).strings();
      const std::vector<std::string>& b = ctx.in(1).strings();
      bool* po = ctx.out(0).data<bool>();
      const BroadcastLoop loop = make_broadcast_loop(ctx.out(0).shape(), {ctx.in(0).shape(), ctx.in(1).shape()});
      loop.for_each_row([&](const int64_t* off, int64_t oo) {
        for (int64_t i = 0; i < loop.inner; ++i)
          po[oo + i] = pred(a[off[0] + i * loop.inner_strides[0]], b[off[1] + i * loop.inner_strides[1]]);
      });
      return;
    }
  }
  dispatch_dtype(ctx.in(0).dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (kIsFloatLike<T>)
      binary_broadcast<T, T, bool>(ctx.in(0), ctx.in(1), ctx.out(0),
                                   [&](T a, T b) { return pred(to_f64(a), to_f64(b)); });
    else
      binary_broadcast<T, T, bool>(ctx.in(0), ctx.in(1), ctx.out(0), [&](T a, T b) { return pred(a, b); });
  });
}

template <typename T>
T int_div(T a, T b) {
  if constexpr (std::is_signed_v<T>)
    if (b == T(-1)) return static_cast<T>(Unsigned<T>(0) - static_cast<Unsigned<T>>(a));  // MIN / -1 wraps
  return static_cast<T>(a / b);  // C++ truncates toward zero, as ONNX specifies
}

// Integer power by squaring; negative exponents give the truncated reciprocal (0 unless |base| is 1).
template <typename T>
T int_pow(T base, int64_t e) {
  if (e < 0) {
    if (base == T(1)) return T(1);
    if constexpr (std::is_signed_v<T>)
      if (base == T(-1)) return (e % 2) ? T(-1) : T(1);
    return T(0);
  }
  using U = Unsigned<T>;
  U result = 1, b = static_cast<U>(base);
  while (e) {
    if (e & 1) result = static_cast<U>(result * b);
    b = static_cast<U>(b * b);
    e >>= 1;
  }
  return static_cast<T>(result);
}

}  // namespace

#define GPUOPT_BINARY_ARITH(Name, classes, ...)                   \
  Status infer_##Name(InferContext& ctx) {                        \
    return infer_broadcasting(ctx, 2, classes, DType::Undefined); \
  }                                                               \
  Status cpu_##Name(KernelContext& ctx) {                         \
    arith<classes>(ctx, __VA_ARGS__);                             \
    return Status::Ok();                                          \
  }                                                               \
  double flops_##Name(const FlopsContext& ctx) {                  \
    return known_numel(ctx.outputs[0]);                           \
  }

// Integer add/sub/mul wrap: computed in the unsigned type of the same width.
GPUOPT_BINARY_ARITH(Add, kNumericTypes, [](auto a, auto b) {
  using T = decltype(a);
  if constexpr (std::is_integral_v<T>)
    return static_cast<T>(Unsigned<T>(a) + Unsigned<T>(b));
  else
    return a + b;
})
GPUOPT_BINARY_ARITH(Sub, kNumericTypes, [](auto a, auto b) {
  using T = decltype(a);
  if constexpr (std::is_integral_v<T>)
    return static_cast<T>(Unsigned<T>(a) - Unsigned<T>(b));
  else
    return a - b;
})
GPUOPT_BINARY_ARITH(Mul, kNumericTypes, [](auto a, auto b) {
  using T = decltype(a);
  if constexpr (std::is_integral_v<T>)
    return static_cast<T>(Unsigned<T>(a) * Unsigned<T>(b));
  else
    return a * b;
})

Status infer_Div(InferContext& ctx) {
  return infer_broadcasting(ctx, 2, kNumericTypes, DType::Undefined);
}
Status cpu_Div(KernelContext& ctx) {
  GPUOPT_RETURN_IF_ERROR(check_no_zero_divisor(ctx));
  arith<kNumericTypes>(ctx, [](auto a, auto b) {
    if constexpr (std::is_integral_v<decltype(a)>)
      return int_div(a, b);
    else
      return a / b;
  });
  return Status::Ok();
}
double flops_Div(const FlopsContext& ctx) {
  return known_numel(ctx.outputs[0]);
}

// Mod: fmod=0 takes the divisor's sign (Python %), integers only; fmod=1 the dividend's (C fmod).
Status infer_Mod(InferContext& ctx) {
  GPUOPT_RETURN_IF_ERROR(infer_broadcasting(ctx, 2, kNumericTypes, DType::Undefined));
  if (ctx.node.attr_i("fmod", 0) == 0 && dtype_is_float(ctx.outputs[0].dtype))
    return ctx.error("fmod must be 1 for float input (dtype {})", dtype_name(ctx.outputs[0].dtype));
  return Status::Ok();
}
Status cpu_Mod(KernelContext& ctx) {
  GPUOPT_RETURN_IF_ERROR(check_no_zero_divisor(ctx));
  const bool c_fmod = ctx.node.attr_i("fmod", 0) != 0;
  arith<kNumericTypes>(ctx, [c_fmod](auto a, auto b) {
    using T = decltype(a);
    if constexpr (std::is_integral_v<T>) {
      if constexpr (std::is_signed_v<T>)
        if (b == T(-1)) return T(0);  // MIN % -1 would trap
      T r = static_cast<T>(a % b);
      if constexpr (std::is_signed_v<T>)
        if (!c_fmod && r != 0 && ((r < 0) != (b < 0))) r = static_cast<T>(r + b);
      return r;
    } else {
      return std::fmod(a, b);
    }
  });
  return Status::Ok();
}
double flops_Mod(const FlopsContext& ctx) {
  return known_numel(ctx.outputs[0]);
}

// Pow: base and exponent may have different dtypes; the output has the base's.
Status infer_Pow(InferContext& ctx) {
  if (ctx.num_inputs() != 2 || !ctx.has_input(0) || !ctx.has_input(1))
    return ctx.error("expects 2 inputs, got {}", ctx.num_inputs());
  GPUOPT_RETURN_IF_ERROR(check_input_dtype(ctx, 0, kFloatTypes | kIntTypes));
  GPUOPT_RETURN_IF_ERROR(check_input_dtype(ctx, 1, kNumericTypes));
  ctx.outputs[0].dtype = ctx.in(0).dtype;
  return infer_broadcast(ctx, {0, 1}, &ctx.outputs[0]);
}
Status cpu_Pow(KernelContext& ctx) {
  dispatch_dtype(ctx.in(0).dtype(), [&](auto btag) {
    using B = decltype(btag);
    if constexpr (!std::is_same_v<B, bool>) {
      dispatch_dtype(ctx.in(1).dtype(), [&](auto etag) {
        using E = decltype(etag);
        if constexpr (!std::is_same_v<E, bool>) {
          binary_broadcast<B, E, B>(ctx.in(0), ctx.in(1), ctx.out(0), [](B b, E e) {
            if constexpr (std::is_integral_v<B> && std::is_integral_v<E>)
              return int_pow(b, static_cast<int64_t>(e));
            else if constexpr (std::is_integral_v<B>)
              return saturate_cast<B>(std::pow(to_f64(b), to_f64(e)));
            else
              return store_f64<B>(std::pow(to_f64(b), to_f64(e)));
          });
        }
      });
    }
  });
  return Status::Ok();
}
double flops_Pow(const FlopsContext& ctx) {
  return 4 * known_numel(ctx.outputs[0]);
}

#define GPUOPT_COMPARE(Name, classes, expr)                                                        \
  Status infer_##Name(InferContext& ctx) {                                                         \
    return infer_broadcasting(ctx, 2, classes, DType::Bool);                                       \
  }                                                                                                \
  Status cpu_##Name(KernelContext& ctx) {                                                          \
    compare<((classes)&kStringType) != 0>(ctx, [](const auto& a, const auto& b) { return expr; }); \
    return Status::Ok();                                                                           \
  }                                                                                                \
  double flops_##Name(const FlopsContext& ctx) {                                                   \
    return known_numel(ctx.outputs[0]);                                                            \
  }

GPUOPT_COMPARE(Equal, kAllTypes, a == b)
GPUOPT_COMPARE(Less, kNumericTypes, a < b)
GPUOPT_COMPARE(LessOrEqual, kNumericTypes, a <= b)
GPUOPT_COMPARE(Greater, kNumericTypes, a > b)
GPUOPT_COMPARE(GreaterOrEqual, kNumericTypes, a >= b)
GPUOPT_COMPARE(And, kBoolType, a&& b)
GPUOPT_COMPARE(Or, kBoolType, a || b)
GPUOPT_COMPARE(Xor, kBoolType, a != b)
#undef GPUOPT_COMPARE

// Bitwise ops on integers (opset 18) and BitShift on unsigned integers (opset 11).
GPUOPT_BINARY_ARITH(BitwiseAnd, kIntTypes, [](auto a, auto b) { return a & b; })
GPUOPT_BINARY_ARITH(BitwiseOr, kIntTypes, [](auto a, auto b) { return a | b; })
GPUOPT_BINARY_ARITH(BitwiseXor, kIntTypes, [](auto a, auto b) { return a ^ b; })

#undef GPUOPT_BINARY_ARITH

Status infer_BitShift(InferContext& ctx) {
  const std::string dir = ctx.node.attr_s("direction", "");
  if (dir != "LEFT" && dir != "RIGHT") return ctx.error("attribute direction is '{}'; expected LEFT or RIGHT", dir);
  return infer_broadcasting(ctx, 2, kUnsignedInts, DType::Undefined);
}
Status cpu_BitShift(KernelContext& ctx) {
  const bool left = ctx.node.attr_s("direction", "") == "LEFT";
  arith<kUnsignedInts>(ctx, [left](auto a, auto b) {
    using T = decltype(a);
    // shifting by the width or more is UB in C++; every bit is shifted out, so the result is 0
    if (static_cast<uint64_t>(b) >= sizeof(T) * 8) return T(0);
    return static_cast<T>(left ? a << b : a >> b);
  });
  return Status::Ok();
}
double flops_BitShift(const FlopsContext& ctx) {
  return known_numel(ctx.outputs[0]);
}

Status infer_Not(InferContext& ctx) {
  if (!ctx.has_input(0)) return ctx.error("input 0 is missing");
  GPUOPT_RETURN_IF_ERROR(check_input_dtype(ctx, 0, kBoolType));
  ctx.outputs[0] = ctx.in(0);
  ctx.outputs[0].value = nullptr;
  return Status::Ok();
}
Status cpu_Not(KernelContext& ctx) {
  const bool* x = ctx.in(0).data<bool>();
  bool* y = ctx.out(0).data<bool>();
  for (int64_t i = 0; i < ctx.in(0).numel(); ++i) y[i] = !x[i];
  return Status::Ok();
}
double flops_Not(const FlopsContext& ctx) {
  return known_numel(ctx.outputs[0]);
}

// Where(cond, X, Y): any element type for X and Y; three-way broadcasting.
Status infer_Where(InferContext& ctx) {
  if (ctx.num_inputs() != 3 || !ctx.has_input(0) || !ctx.has_input(1) || !ctx.has_input(2))
    return ctx.error("expects 3 inputs, got {}", ctx.num_inputs());
  GPUOPT_RETURN_IF_ERROR(check_input_dtype(ctx, 0, kBoolType));
  GPUOPT_ASSIGN_OR_RETURN(DType t, common_input_dtype(ctx, {1, 2}));
  ctx.outputs[0].dtype = t;
  GPUOPT_RETURN_IF_ERROR(infer_broadcast(ctx, {0, 1, 2}, &ctx.outputs[0]));
  // On shape values: the condition's elements pick from X's and Y's.
  const auto c = tensor_util::dims_value_of(ctx, 0), x = tensor_util::dims_value_of(ctx, 1),
             y = tensor_util::dims_value_of(ctx, 2);
  if (c && x && y) {
    const size_t n = std::max({c->size(), x->size(), y->size()});
    const auto at = [](const std::vector<int64_t>& v, size_t i) { return v[v.size() == 1 ? 0 : i]; };
    if ((c->size() == 1 || c->size() == n) && (x->size() == 1 || x->size() == n) && (y->size() == 1 || y->size() == n)) {
      std::vector<int64_t> out(n);
      for (size_t i = 0; i < n; ++i) out[i] = at(*c, i) ? at(*x, i) : at(*y, i);
      tensor_util::set_dims_value(ctx, 0, std::move(out));
    }
  }
  return Status::Ok();
}
Status cpu_Where(KernelContext& ctx) {
  const Tensor &c = ctx.in(0), &x = ctx.in(1), &y = ctx.in(2);
  Tensor& out = ctx.out(0);
  if (x.dtype() == DType::String) {
    const BroadcastLoop loop = make_broadcast_loop(out.shape(), {c.shape(), x.shape(), y.shape()});
    loop.for_each_row([&](const int64_t* off, int64_t oo) {
      for (int64_t i = 0; i < loop.inner; ++i) {
        const bool k = c.data<bool>()[off[0] + i * loop.inner_strides[0]];
        out.strings()[oo + i] =
            k ? x.strings()[off[1] + i * loop.inner_strides[1]] : y.strings()[off[2] + i * loop.inner_strides[2]];
      }
    });
    return Status::Ok();
  }
  dispatch_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    ternary_broadcast<bool, T, T, T>(c, x, y, out, [](bool k, T a, T b) { return k ? a : b; });
  });
  return Status::Ok();
}
double flops_Where(const FlopsContext& ctx) {
  return known_numel(ctx.outputs[0]);
}

// ---- Variadic Min / Max / Sum / Mean ------------------------------------------------------------

namespace {

// out = input 0 broadcast to out's shape, then out = pick(out, input k) for k = 1..n-1.
// Exact in every type, so it runs in the element type; floats propagate NaN like numpy.
template <bool kMax>
void min_max(KernelContext& ctx) {
  Tensor& out = ctx.out(0);
  dispatch_dtype(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* po = out.data<T>();
    for (size_t k = 0; k < ctx.num_inputs(); ++k) {
      const T* pi = ctx.in(k).data<T>();
      const BroadcastLoop loop = make_broadcast_loop(out.shape(), {ctx.in(k).shape()});
      loop.for_each_row([&](const int64_t* off, int64_t oo) {
        for (int64_t i = 0; i < loop.inner; ++i) {
          const T v = pi[off[0] + i * loop.inner_strides[0]];
          T& o = po[oo + i];
          if (k == 0) {
            o = v;
          } else if constexpr (kIsFloatLike<T>) {
            const double a = to_f64(o), b = to_f64(v);
            if (std::isnan(b) || (!std::isnan(a) && (kMax ? b > a : b < a))) o = v;
          } else {
            if (kMax ? v > o : v < o) o = v;
          }
        }
      });
    }
  });
}

// Sum or mean in double, rounded once into the output.
void sum_mean(KernelContext& ctx, bool mean) {
  Tensor& out = ctx.out(0);
  std::vector<double> acc(static_cast<size_t>(out.numel()), 0.0);
  for (size_t k = 0; k < ctx.num_inputs(); ++k) {
    dispatch_dtype(ctx.in(k).dtype(), [&](auto tag) {
      using T = decltype(tag);
      const T* pi = ctx.in(k).data<T>();
      const BroadcastLoop loop = make_broadcast_loop(out.shape(), {ctx.in(k).shape()});
      loop.for_each_row([&](const int64_t* off, int64_t oo) {
        for (int64_t i = 0; i < loop.inner; ++i) acc[oo + i] += to_f64(pi[off[0] + i * loop.inner_strides[0]]);
      });
    });
  }
  const double scale = mean ? 1.0 / static_cast<double>(ctx.num_inputs()) : 1.0;
  dispatch_dtype(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* po = out.data<T>();
    for (int64_t i = 0; i < out.numel(); ++i) po[i] = store_f64<T>(mean ? acc[i] * scale : acc[i]);
  });
}

}  // namespace

#define GPUOPT_VARIADIC(Name, classes, ...)                                                                      \
  Status infer_##Name(InferContext& ctx) {                                                                       \
    return infer_broadcasting(ctx, 1, classes, DType::Undefined);                                                \
  }                                                                                                              \
  Status cpu_##Name(KernelContext& ctx) {                                                                        \
    __VA_ARGS__;                                                                                                 \
    return Status::Ok();                                                                                         \
  }                                                                                                              \
  double flops_##Name(const FlopsContext& ctx) {                                                                 \
    return known_numel(ctx.outputs[0]) * static_cast<double>(ctx.inputs.size() > 1 ? ctx.inputs.size() - 1 : 1); \
  }

GPUOPT_VARIADIC(Min, kNumericTypes, min_max<false>(ctx))
GPUOPT_VARIADIC(Max, kNumericTypes, min_max<true>(ctx))
GPUOPT_VARIADIC(Sum, kFloatTypes, sum_mean(ctx, false))
GPUOPT_VARIADIC(Mean, kFloatTypes, sum_mean(ctx, true))
#undef GPUOPT_VARIADIC

}  // namespace gpuopt
