// ArgMax/ArgMin and CumSum/CumProd (the reductions are in reduce.cpp). Floats compare and
// accumulate as reduce.cpp does; integer sums and products wrap in 64 bits.
#include "ops/common/broadcast.h"
#include "ir/graph.h"

#include <cmath>
#include <limits>

namespace gpuopt {

namespace {

// One operation per input element.
double one_per_element(const FlopsContext& ctx) {
  return ctx.inputs.empty() ? 0.0 : known_numel(ctx.inputs[0]);
}

// ---- ArgMax / ArgMin ---------------------------------------------------------------------------

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
  return one_per_element(ctx);
}
Status infer_ArgMin(InferContext& ctx) {
  return infer_arg(ctx);
}
Status cpu_ArgMin(KernelContext& ctx) {
  return cpu_arg<false>(ctx);
}
double flops_ArgMin(const FlopsContext& ctx) {
  return one_per_element(ctx);
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
  return one_per_element(ctx);
}
Status infer_CumProd(InferContext& ctx) {
  return infer_cumulative(ctx);
}
Status cpu_CumProd(KernelContext& ctx) {
  return cpu_cumulative<true>(ctx);
}
double flops_CumProd(const FlopsContext& ctx) {
  return one_per_element(ctx);
}

}  // namespace gpuopt
