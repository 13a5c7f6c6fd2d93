// Reductions (ReduceSum/Mean/Max/Min/Prod/L1/L2/SumSquare/LogSum/LogSumExp), ArgMax/ArgMin and
// CumSum. Floats accumulate in double and round once; integer sums and products wrap in 64 bits.
//
// Axes are an attribute before opset 13 (ReduceSum) / 18 (the others) and an optional input
// after; an empty axes list reduces everything unless noop_with_empty_axes is set.
#include "ops/common/broadcast.h"
#include "ir/graph.h"

#include <cmath>
#include <limits>

namespace gpuopt {
namespace {

enum class Reduce { kSum, kMean, kMax, kMin, kProd, kL1, kL2, kSumSquare, kLogSum, kLogSumExp };

struct AxesInfo {
  bool known = true;          // false: axes come from an input whose value is not known yet
  bool noop = false;          // empty axes with noop_with_empty_axes: identity
  std::vector<bool> reduced;  // per input dim (valid when known and rank known)
};

bool axes_from_input(const Node& node, int opset) {
  return node.op == Op::ReduceSum ? opset >= 13 : opset >= 18;
}

// Resolves the axes of a reduction for an input of rank `rank` (-1: unknown).
template <typename Ctx>
Result<AxesInfo> resolve_axes(const Ctx& ctx, int64_t rank, const Tensor* axes_value, bool axes_input_present) {
  AxesInfo info;
  std::vector<int64_t> axes;
  if (axes_from_input(ctx.node, ctx.opset)) {
    if (axes_input_present && !axes_value) {
      info.known = false;
      return info;
    }
    if (axes_value) axes = axes_value->to_i64_vector();
  } else {
    axes = ctx.node.attr_ints("axes");
  }
  if (axes.empty() && ctx.node.attr_i("noop_with_empty_axes", 0) != 0) {
    info.noop = true;
    return info;
  }
  if (rank < 0) return info;
  info.reduced.assign(static_cast<size_t>(rank), axes.empty());
  for (int64_t a : axes) {
    int64_t ax = a;
    if (!normalize_axis(&ax, rank)) return ctx.error("axis {} is out of range for rank {}", a, rank);
    if (info.reduced[ax]) return ctx.error("axis {} appears more than once", a);
    info.reduced[ax] = true;
  }
  return info;
}

Shape reduced_shape(const Shape& in, const std::vector<bool>& reduced, bool keepdims) {
  Shape out;
  for (size_t d = 0; d < in.size(); ++d) {
    if (!reduced[d])
      out.push_back(in[d]);
    else if (keepdims)
      out.push_back(1);
  }
  return out;
}

Status infer_reduce(InferContext& ctx, Reduce kind) {
  if (!ctx.has_input(0)) return ctx.error("input 0 is missing");
  const unsigned classes = kind == Reduce::kMax || kind == Reduce::kMin ? kNumericTypes | kBoolType : kNumericTypes;
  GPUOPT_RETURN_IF_ERROR(check_input_dtype(ctx, 0, classes));
  if (axes_from_input(ctx.node, ctx.opset) && ctx.has_input(1))
    GPUOPT_RETURN_IF_ERROR(check_input_dtype(ctx, 1, kSignedInts));
  const ValueInfo& in = ctx.in(0);
  ValueInfo& out = ctx.outputs[0];
  out.dtype = in.dtype;
  const bool keepdims = ctx.node.attr_i("keepdims", 1) != 0;
  const bool axes_input = axes_from_input(ctx.node, ctx.opset) && ctx.has_input(1);
  GPUOPT_ASSIGN_OR_RETURN(AxesInfo axes, resolve_axes(ctx, in.rank_known ? static_cast<int64_t>(in.shape.size()) : -1,
                                                      axes_input ? ctx.in(1).value : nullptr, axes_input));
  if (axes.noop) {
    out.rank_known = in.rank_known;
    out.shape = in.shape;
    return Status::Ok();
  }
  if (!in.rank_known) return Status::Ok();
  if (!axes.known) {
    // Axes not known yet: with keepdims the rank stays, and each dim is either itself or 1.
    if (keepdims) {
      out.rank_known = true;
      out.shape.clear();
      for (int64_t d : in.shape) out.shape.push_back(d == 1 ? 1 : kUnknownDim);
    }
    return Status::Ok();
  }
  out.rank_known = true;
  out.shape = reduced_shape(in.shape, axes.reduced, keepdims);
  return Status::Ok();
}

template <typename T>
using IntAcc = std::conditional_t<std::is_unsigned_v<T>, uint64_t, int64_t>;

// Wrapping 64-bit integer arithmetic (no signed-overflow UB).
template <typename A>
A wrap_add(A a, A b) {
  return static_cast<A>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
}
template <typename A>
A wrap_mul(A a, A b) {
  return static_cast<A>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
}

template <typename T>
void reduce_kernel(const Tensor& x, Tensor& y, const std::vector<bool>& reduced, Reduce kind) {
  Shape keep = x.shape();
  int64_t count = 1;
  for (size_t d = 0; d < keep.size(); ++d)
    if (reduced[d]) {
      count *= keep[d];
      keep[d] = 1;
    }
  // Walk x in order; offsets[0] is the output element each input element folds into.
  const BroadcastLoop loop = make_broadcast_loop(x.shape(), {keep, x.shape()});
  const T* px = x.data<T>();
  const int64_t n_out = y.numel();
  T* py = y.data<T>();
  auto for_each = [&](auto&& f) {
    loop.for_each_row([&](const int64_t* off, int64_t) {
      for (int64_t i = 0; i < loop.inner; ++i) f(off[0] + i * loop.inner_strides[0], px[off[1] + i]);
    });
  };
  if constexpr (std::is_same_v<T, bool>) {  // Max = any, Min = all
    for (int64_t o = 0; o < n_out; ++o) py[o] = kind == Reduce::kMin;
    for_each([&](int64_t o, bool v) { py[o] = kind == Reduce::kMax ? (py[o] || v) : (py[o] && v); });
  } else if constexpr (kIsFloatLike<T>) {
    const double inf = std::numeric_limits<double>::infinity();
    const double init = kind == Reduce::kProd                                ? 1.0
                        : kind == Reduce::kMax || kind == Reduce::kLogSumExp ? -inf
                        : kind == Reduce::kMin                               ? inf
                                                                             : 0.0;
    std::vector<double> acc(static_cast<size_t>(n_out), init);
    switch (kind) {
      case Reduce::kSum:
      case Reduce::kMean:
      case Reduce::kLogSum:
        for_each([&](int64_t o, T v) { acc[o] += to_f64(v); });
        break;
      case Reduce::kL1:
        for_each([&](int64_t o, T v) { acc[o] += std::fabs(to_f64(v)); });
        break;
      case Reduce::kL2:
      case Reduce::kSumSquare:
        for_each([&](int64_t o, T v) { acc[o] += to_f64(v) * to_f64(v); });
        break;
      case Reduce::kProd:
        for_each([&](int64_t o, T v) { acc[o] *= to_f64(v); });
        break;
      case Reduce::kMax:
      case Reduce::kLogSumExp:  // NaN propagates like numpy
        for_each([&](int64_t o, T v) {
          const double d = to_f64(v);
          if (std::isnan(d) || d > acc[o]) acc[o] = d;
        });
        break;
      case Reduce::kMin:
        for_each([&](int64_t o, T v) {
          const double d = to_f64(v);
          if (std::isnan(d) || d < acc[o]) acc[o] = d;
        });
        break;
    }
    if (kind == Reduce::kLogSumExp) {  // second pass around the max, for range
      std::vector<double> sum(static_cast<size_t>(n_out), 0.0);
      for_each([&](int64_t o, T v) {
        if (std::isfinite(acc[o])) sum[o] += std::exp(to_f64(v) - acc[o]);
      });
      for (int64_t o = 0; o < n_out; ++o)
        if (std::isfinite(acc[o])) acc[o] += std::log(sum[o]);
    }
    for (int64_t o = 0; o < n_out; ++o) {
      double r = acc[o];
      if (kind == Reduce::kMean)
        r /= static_cast<double>(count);
      else if (kind == Reduce::kL2)
        r = std::sqrt(r);
      else if (kind == Reduce::kLogSum)
        r = std::log(r);
      py[o] = store_f64<T>(r);
    }
  } else {
    using A = IntAcc<T>;
    const A init = kind == Reduce::kProd  ? A(1)
                   : kind == Reduce::kMax ? static_cast<A>(std::numeric_limits<T>::lowest())
                   : kind == Reduce::kMin ? static_cast<A>(std::numeric_limits<T>::max())
                                          : A(0);
    std::vector<A> acc(static_cast<size_t>(n_out), init);
    std::vector<double> facc;  // LogSumExp on integers goes through double
    switch (kind) {
      case Reduce::kSum:
      case Reduce::kMean:
      case Reduce::kLogSum:
        for_each([&](int64_t o, T v) { acc[o] = wrap_add<A>(acc[o], static_cast<A>(v)); });
        break;
      case Reduce::kL1:
        for_each([&](int64_t o, T v) {
          const A a = static_cast<A>(v);
          acc[o] = wrap_add<A>(acc[o], a < A(0) ? wrap_mul<A>(a, static_cast<A>(-1)) : a);
        });
        break;
      case Reduce::kL2:
      case Reduce::kSumSquare:
        for_each([&](int64_t o, T v) { acc[o] = wrap_add<A>(acc[o], wrap_mul<A>(A(v), A(v))); });
        break;
      case Reduce::kProd:
        for_each([&](int64_t o, T v) { acc[o] = wrap_mul<A>(acc[o], A(v)); });
        break;
      case Reduce::kMax:
        for_each([&](int64_t o, T v) { acc[o] = std::max<A>(acc[o], A(v)); });
        break;
      case Reduce::kMin:
        for_each([&](int64_t o, T v) { acc[o] = std::min<A>(acc[o], A(v)); });
        break;
      case Reduce::kLogSumExp:
        facc.assign(static_cast<size_t>(n_out), 0.0);
        for_each([&](int64_t o, T v) { facc[o] += std::exp(static_cast<double>(v)); });
        break;
    }
    for (int64_t o = 0; o < n_out; ++o) {
      switch (kind) {
        case Reduce::kMean:
          py[o] = count ? static_cast<T>(acc[o] / static_cast<A>(count)) : T(0);
          break;
        case Reduce::kL2:
          py[o] = static_cast<T>(std::sqrt(static_cast<double>(acc[o])));
          break;
        case Reduce::kLogSum:
          py[o] = static_cast<T>(std::log(static_cast<double>(acc[o])));
          break;
        case Reduce::kLogSumExp:
          py[o] = static_cast<T>(std::log(facc[o]));
          break;
        default:
          py[o] = static_cast<T>(acc[o]);
      }
    }
  }
}

Status cpu_reduce(KernelContext& ctx, Reduce kind) {
  const Tensor& x = ctx.in(0);
  const bool axes_input = axes_from_input(ctx.node, ctx.opset) && ctx.has_input(1);
  GPUOPT_ASSIGN_OR_RETURN(AxesInfo axes, resolve_axes(ctx, x.rank(), axes_input ? &ctx.in(1) : nullptr, axes_input));
  if (axes.noop) {  // identity (ReduceSumSquare etc. still do nothing: the spec says input is returned)
    if (x.nbytes()) std::memcpy(ctx.out(0).raw(), x.raw(), x.nbytes());
    return Status::Ok();
  }
  dispatch_dtype(x.dtype(), [&](auto tag) { reduce_kernel<decltype(tag)>(x, ctx.out(0), axes.reduced, kind); });
  return Status::Ok();
}

double flops_reduce(const FlopsContext& ctx, double per_element) {
  return per_element * (ctx.inputs.empty() ? 0.0 : known_numel(ctx.inputs[0]));
}

}  // namespace

#define GPUOPT_REDUCE(Name, kind, cost)          \
  Status infer_##Name(InferContext& ctx) {       \
    return infer_reduce(ctx, kind);              \
  }                                              \
  Status cpu_##Name(KernelContext& ctx) {        \
    return cpu_reduce(ctx, kind);                \
  }                                              \
  double flops_##Name(const FlopsContext& ctx) { \
    return flops_reduce(ctx, cost);              \
  }

GPUOPT_REDUCE(ReduceSum, Reduce::kSum, 1)
GPUOPT_REDUCE(ReduceMean, Reduce::kMean, 1)
GPUOPT_REDUCE(ReduceMax, Reduce::kMax, 1)
GPUOPT_REDUCE(ReduceMin, Reduce::kMin, 1)
GPUOPT_REDUCE(ReduceProd, Reduce::kProd, 1)
GPUOPT_REDUCE(ReduceL1, Reduce::kL1, 2)
GPUOPT_REDUCE(ReduceL2, Reduce::kL2, 2)
GPUOPT_REDUCE(ReduceSumSquare, Reduce::kSumSquare, 2)
GPUOPT_REDUCE(ReduceLogSum, Reduce::kLogSum, 1)
GPUOPT_REDUCE(ReduceLogSumExp, Reduce::kLogSumExp, 3)
#undef GPUOPT_REDUCE

// ---- ArgMax / ArgMin ---------------------------------------------------------------------------

namespace {

Status infer_arg(InferContext& ctx) {
  if (!ctx.has_input(0)) return ctx.error("input 0 is missing");
  GPUOPT_RETURN_IF_ERROR(check_input_dtype(ctx, 0, kNumericTypes));
  ValueInfo& out = ctx.outputs[0];
  out.dtype = DType::I64;
  const ValueInfo& in = ctx.in(0);
  if (!in.rank_known) return Status::Ok();
  const int64_t rank = static_cast<int64_t>(in.shape.size());
  int64_t axis = ctx.node.attr_i("axis", 0);
  if (!normalize_axis(&axis, rank))
    return ctx.error("axis {} is out of range for rank {}", ctx.node.attr_i("axis", 0), rank);
  if (in.shape[axis] == 0) return ctx.error("axis {} has extent 0: no element to select", axis);
  std::vector<bool> reduced(static_cast<size_t>(rank), false);
  reduced[axis] = true;
  out.rank_known = true;
  out.shape = reduced_shape(in.shape, reduced, ctx.node.attr_i("keepdims", 1) != 0);
  return Status::Ok();
}

template <typename T>
auto compare_value(T v) {
  if constexpr (kIsFloatLike<T>)
    return to_f64(v);
  else
    return v;
}

template <bool kMax>
Status cpu_arg(KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  int64_t axis = ctx.node.attr_i("axis", 0);
  normalize_axis(&axis, x.rank());
  const bool last = ctx.node.attr_i("select_last_index", 0) != 0;
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= x.dim(d);
  for (int64_t d = axis + 1; d < x.rank(); ++d) inner *= x.dim(d);
  const int64_t n = x.dim(axis);
  int64_t* py = ctx.out(0).data<int64_t>();
  dispatch_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* px = x.data<T>();
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) {
        const T* p = px + o * n * inner + i;
        int64_t best = 0;
        for (int64_t k = 1; k < n; ++k) {
          // floats compare through double (f16/bf16), integers in their own type (exact for i64)
          const auto v = compare_value(p[k * inner]), b = compare_value(p[best * inner]);
          const bool better = kMax ? (last ? v >= b : v > b) : (last ? v <= b : v < b);
          if (better) best = k;
        }
        py[o * inner + i] = best;
      }
  });
  return Status::Ok();
}

}  // namespace

Status infer_ArgMax(InferContext& ctx) {
  return infer_arg(ctx);
}
Status cpu_ArgMax(KernelContext& ctx) {
  return cpu_arg<true>(ctx);
}
double flops_ArgMax(const FlopsContext& ctx) {
  return flops_reduce(ctx, 1);
}
Status infer_ArgMin(InferContext& ctx) {
  return infer_arg(ctx);
}
Status cpu_ArgMin(KernelContext& ctx) {
  return cpu_arg<false>(ctx);
}
double flops_ArgMin(const FlopsContext& ctx) {
  return flops_reduce(ctx, 1);
}

// ---- CumSum / CumProd ------------------------------------------------------------------------------------

namespace {

Status infer_cumulative(InferContext& ctx) {
  if (!ctx.has_input(0) || !ctx.has_input(1)) return ctx.error("expects 2 inputs (x, axis)");
  GPUOPT_RETURN_IF_ERROR(check_input_dtype(ctx, 0, kNumericTypes));
  GPUOPT_RETURN_IF_ERROR(check_input_dtype(ctx, 1, kSignedInts));
  const ValueInfo &x = ctx.in(0), &a = ctx.in(1);
  if (a.rank_known && shape_numel(a.shape) >= 0 && (a.shape.size() > 1 || shape_numel(a.shape) != 1))
    return ctx.error("axis must be a scalar; got shape {}", shape_to_string(a.shape));
  if (a.value && x.rank_known) {
    int64_t axis = a.value->get_i64(0);
    if (!normalize_axis(&axis, static_cast<int64_t>(x.shape.size())))
      return ctx.error("axis {} is out of range for rank {}", a.value->get_i64(0), x.shape.size());
  }
  ctx.outputs[0].dtype = x.dtype;
  ctx.outputs[0].rank_known = x.rank_known;
  ctx.outputs[0].shape = x.shape;
  return Status::Ok();
}

// CumSum and CumProd (exclusive starts from the identity, 0 or 1).
template <bool kProd>
Status cpu_cumulative(KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  int64_t axis = ctx.in(1).get_i64(0);
  if (x.rank() == 0 || !normalize_axis(&axis, x.rank()))
    return ctx.error("axis {} is out of range for rank {}", ctx.in(1).get_i64(0), x.rank());
  const bool exclusive = ctx.node.attr_i("exclusive", 0) != 0;
  const bool reverse = ctx.node.attr_i("reverse", 0) != 0;
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= x.dim(d);
  for (int64_t d = axis + 1; d < x.rank(); ++d) inner *= x.dim(d);
  const int64_t n = x.dim(axis);
  dispatch_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (!std::is_same_v<T, bool>) {
      using A = std::conditional_t<kIsFloatLike<T>, double, IntAcc<T>>;
      const T* px = x.data<T>();
      T* py = ctx.out(0).data<T>();
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t i = 0; i < inner; ++i) {
          A acc = kProd ? A(1) : A(0);
          for (int64_t s = 0; s < n; ++s) {
            const int64_t k = reverse ? n - 1 - s : s;
            const int64_t idx = (o * n + k) * inner + i;
            if constexpr (kIsFloatLike<T>) {
              const double v = to_f64(px[idx]);
              if (!exclusive) acc = kProd ? acc * v : acc + v;
              py[idx] = store_f64<T>(acc);
              if (exclusive) acc = kProd ? acc * v : acc + v;
            } else {
              const A v = static_cast<A>(px[idx]);
              if (!exclusive) acc = kProd ? wrap_mul<A>(acc, v) : wrap_add<A>(acc, v);
              py[idx] = static_cast<T>(acc);
              if (exclusive) acc = kProd ? wrap_mul<A>(acc, v) : wrap_add<A>(acc, v);
            }
          }
        }
    }
  });
  return Status::Ok();
}
}  // namespace

Status infer_CumSum(InferContext& ctx) {
  return infer_cumulative(ctx);
}
Status cpu_CumSum(KernelContext& ctx) {
  return cpu_cumulative<false>(ctx);
}
double flops_CumSum(const FlopsContext& ctx) {
  return flops_reduce(ctx, 1);
}
Status infer_CumProd(InferContext& ctx) {
  return infer_cumulative(ctx);
}
Status cpu_CumProd(KernelContext& ctx) {
  return cpu_cumulative<true>(ctx);
}
double flops_CumProd(const FlopsContext& ctx) {
  return flops_reduce(ctx, 1);
}

}  // namespace gpuopt

// ---- Det ---------------------------------------------------------------------------------------
// Determinant of the trailing [M, M] matrices by LU with partial pivoting, in double.

namespace gpuopt {

Status infer_Det(InferContext& ctx) {
  if (!ctx.has_input(0)) return ctx.error("input 0 is missing");
  GPUOPT_RETURN_IF_ERROR(check_input_dtype(ctx, 0, kFloatTypes));
  const ValueInfo& x = ctx.in(0);
  ValueInfo& out = ctx.outputs[0];
  out.dtype = x.dtype;
  if (!x.rank_known) return Status::Ok();
  const size_t r = x.shape.size();
  if (r < 2) return ctx.error("input must have rank >= 2; got {}", shape_to_string(x.shape));
  const int64_t m = x.shape[r - 2], n = x.shape[r - 1];
  if (dim_is_known(m) && dim_is_known(n) && m != n)
    return ctx.error("trailing matrices must be square; got shape {}", shape_to_string(x.shape));
  out.rank_known = true;
  out.shape.assign(x.shape.begin(), x.shape.end() - 2);
  return Status::Ok();
}

Status cpu_Det(KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  const int64_t m = x.dim(-1);
  const int64_t batch = ctx.out(0).numel();
  std::vector<double> a(static_cast<size_t>(m * m));
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t i = 0; i < m * m; ++i) a[i] = x.get_f64(b * m * m + i);
    double det = 1;
    for (int64_t k = 0; k < m && det != 0; ++k) {
      int64_t p = k;
      for (int64_t i = k + 1; i < m; ++i)
        if (std::fabs(a[i * m + k]) > std::fabs(a[p * m + k])) p = i;
      if (a[p * m + k] == 0) {
        det = 0;
        break;
      }
      if (p != k) {
        for (int64_t j = 0; j < m; ++j) std::swap(a[k * m + j], a[p * m + j]);
        det = -det;
      }
      det *= a[k * m + k];
      for (int64_t i = k + 1; i < m; ++i) {
        const double f = a[i * m + k] / a[k * m + k];
        for (int64_t j = k; j < m; ++j) a[i * m + j] -= f * a[k * m + j];
      }
    }
    dispatch_dtype(x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      if constexpr (kIsFloatLike<T>) ctx.out(0).data<T>()[b] = store_f64<T>(det);
    });
  }
  return Status::Ok();
}

double flops_Det(const FlopsContext& ctx) {
  // LU: about 2/3 m^3 per matrix
  if (ctx.inputs.empty() || !ctx.inputs[0] || !ctx.inputs[0]->rank_known || ctx.inputs[0]->shape.size() < 2) return 0;
  const int64_t m = ctx.inputs[0]->shape.back();
  return m < 0 ? 0.0 : known_numel(ctx.outputs[0]) * (2.0 / 3.0) * static_cast<double>(m * m * m);
}

}  // namespace gpuopt
