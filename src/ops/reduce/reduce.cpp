// Reductions (ReduceSum/Mean/Max/Min/Prod/L1/L2/SumSquare/LogSum/LogSumExp); ArgMax/ArgMin and
// CumSum/CumProd are in arg_scan.cpp, Det in ops/matmul/det.cpp. Floats accumulate in double and round once; integer sums and products wrap in 64 bits.
//
// Two forms (ops_versions.inc): axes are an attribute before opset 13 (ReduceSum) / 18 (the
// others), and an optional input after; an empty axes list reduces everything unless
// noop_with_empty_axes is set.
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

enum class Axes { kAttribute, kInput };  // where the form reads its axes from

// Resolves the axes of a reduction for an input of rank `rank` (-1: unknown).
template <typename Ctx>
Result<AxesInfo> resolve_axes(const Ctx& ctx, Axes form, int64_t rank, const Tensor* axes_value,
                              bool axes_input_present) {
  AxesInfo info;
  std::vector<int64_t> axes;
  if (form == Axes::kInput) {
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

Status infer_reduce(InferContext& ctx, Reduce kind, Axes form) {
  if (!ctx.has_input(0)) return ctx.error("input 0 is missing");
  const unsigned classes = kind == Reduce::kMax || kind == Reduce::kMin ? kNumericTypes | kBoolType : kNumericTypes;
  GPUOPT_RETURN_IF_ERROR(check_input_dtype(ctx, 0, classes));
  if (form == Axes::kInput && ctx.has_input(1))
    GPUOPT_RETURN_IF_ERROR(check_input_dtype(ctx, 1, kSignedInts));
  const ValueInfo& in = ctx.in(0);
  ValueInfo& out = ctx.outputs[0];
  out.dtype = in.dtype;
  const bool keepdims = ctx.node.attr_i("keepdims", 1) != 0;
  const bool axes_input = form == Axes::kInput && ctx.has_input(1);
  GPUOPT_ASSIGN_OR_RETURN(AxesInfo axes, resolve_axes(ctx, form, in.rank_known ? static_cast<int64_t>(in.shape.size()) : -1,
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

Status cpu_reduce(KernelContext& ctx, Reduce kind, Axes form) {
  const Tensor& x = ctx.in(0);
  const bool axes_input = form == Axes::kInput && ctx.has_input(1);
  GPUOPT_ASSIGN_OR_RETURN(AxesInfo axes, resolve_axes(ctx, form, x.rank(), axes_input ? &ctx.in(1) : nullptr, axes_input));
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

// Name_v1: axes as an attribute (ops_versions.inc gives its range); Name: axes as an input.
#define GPUOPT_REDUCE(Name, kind, cost)                                                                   \
  Status infer_##Name##_v1(InferContext& ctx) { return infer_reduce(ctx, kind, Axes::kAttribute); }    \
  Status cpu_##Name##_v1(KernelContext& ctx) { return cpu_reduce(ctx, kind, Axes::kAttribute); }       \
  Status infer_##Name(InferContext& ctx) { return infer_reduce(ctx, kind, Axes::kInput); }             \
  Status cpu_##Name(KernelContext& ctx) { return cpu_reduce(ctx, kind, Axes::kInput); }                \
  double flops_##Name(const FlopsContext& ctx) { return flops_reduce(ctx, cost); }

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

}  // namespace gpuopt
