// Softmax, LogSoftmax and Hardmax. Before opset 13 the input is coerced to 2-D at `axis`
// (default 1) and the op runs over the flattened trailing block; from opset 13 it runs along the
// single dimension `axis` (default -1). Computed in double around the row maximum.
#include "ops/common/broadcast.h"
#include "ir/graph.h"

#include <cmath>
#include <limits>

namespace gpuopt {
namespace {

enum class Kind { kSoftmax, kLogSoftmax, kHardmax };

// The two ONNX forms: before 13 the input is coerced to 2-D at `axis` (default 1); from 13 the
// op runs along the one dimension `axis` (default -1).
enum class Form { kCoerced2D, kAxis };

int64_t default_axis(Form form) { return form == Form::kCoerced2D ? 1 : -1; }

Status infer_softmax(InferContext& ctx, Form form) {
  if (!ctx.has_input(0)) return ctx.error("input 0 is missing");
  GPUOPT_RETURN_IF_ERROR(check_input_dtype(ctx, 0, kFloatTypes));
  const ValueInfo& in = ctx.in(0);
  if (in.rank_known) {
    const int64_t rank = static_cast<int64_t>(in.shape.size());
    int64_t axis = ctx.node.attr_i("axis", default_axis(form));
    // the coerced 2-D form also accepts axis == rank (everything in the outer block)
    const bool ok = form == Form::kCoerced2D ? (axis >= -rank && axis <= rank) : normalize_axis(&axis, rank);
    if (!ok) return ctx.error("axis {} is out of range for rank {}", ctx.node.attr_i("axis", default_axis(form)), rank);
  }
  ctx.outputs[0].dtype = in.dtype;
  ctx.outputs[0].rank_known = in.rank_known;
  ctx.outputs[0].shape = in.shape;
  return Status::Ok();
}

Status cpu_softmax(KernelContext& ctx, Kind kind, Form form) {
  const Tensor& x = ctx.in(0);
  const int64_t rank = x.rank();
  int64_t axis = ctx.node.attr_i("axis", default_axis(form));
  if (axis < 0) axis += rank;
  int64_t outer = 1, n = 1, inner = 1;
  for (int64_t d = 0; d < rank; ++d) {
    if (d < axis)
      outer *= x.dim(d);
    else if (form == Form::kCoerced2D || d == axis)
      n *= x.dim(d);  // coerced to 2-D: the whole trailing block
    else
      inner *= x.dim(d);
  }
  dispatch_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (kIsFloatLike<T>) {
      const T* px = x.data<T>();
      T* py = ctx.out(0).data<T>();
      std::vector<double> row(static_cast<size_t>(n));
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t i = 0; i < inner; ++i) {
          const int64_t base = o * n * inner + i;
          double mx = -std::numeric_limits<double>::infinity();
          int64_t arg = 0;
          for (int64_t k = 0; k < n; ++k) {
            row[k] = to_f64(px[base + k * inner]);
            if (row[k] > mx) {
              mx = row[k];
              arg = k;
            }
          }
          if (kind == Kind::kHardmax) {
            for (int64_t k = 0; k < n; ++k) py[base + k * inner] = store_f64<T>(k == arg ? 1.0 : 0.0);
            continue;
          }
          double sum = 0;
          for (int64_t k = 0; k < n; ++k) sum += std::exp(row[k] - mx);
          const double log_sum = std::log(sum);
          for (int64_t k = 0; k < n; ++k) {
            const double z = row[k] - mx;
            py[base + k * inner] = store_f64<T>(kind == Kind::kSoftmax ? std::exp(z) / sum : z - log_sum);
          }
        }
    }
  });
  return Status::Ok();
}

}  // namespace

Status infer_Softmax_v1(InferContext& ctx) { return infer_softmax(ctx, Form::kCoerced2D); }
Status cpu_Softmax_v1(KernelContext& ctx) { return cpu_softmax(ctx, Kind::kSoftmax, Form::kCoerced2D); }
Status infer_Softmax(InferContext& ctx) { return infer_softmax(ctx, Form::kAxis); }
Status cpu_Softmax(KernelContext& ctx) { return cpu_softmax(ctx, Kind::kSoftmax, Form::kAxis); }
double flops_Softmax(const FlopsContext& ctx) {
  return 5 * known_numel(ctx.outputs[0]);
}

Status infer_LogSoftmax_v1(InferContext& ctx) { return infer_softmax(ctx, Form::kCoerced2D); }
Status cpu_LogSoftmax_v1(KernelContext& ctx) { return cpu_softmax(ctx, Kind::kLogSoftmax, Form::kCoerced2D); }
Status infer_LogSoftmax(InferContext& ctx) { return infer_softmax(ctx, Form::kAxis); }
Status cpu_LogSoftmax(KernelContext& ctx) { return cpu_softmax(ctx, Kind::kLogSoftmax, Form::kAxis); }
double flops_LogSoftmax(const FlopsContext& ctx) {
  return 5 * known_numel(ctx.outputs[0]);
}

Status infer_Hardmax_v1(InferContext& ctx) { return infer_softmax(ctx, Form::kCoerced2D); }
Status cpu_Hardmax_v1(KernelContext& ctx) { return cpu_softmax(ctx, Kind::kHardmax, Form::kCoerced2D); }
Status infer_Hardmax(InferContext& ctx) { return infer_softmax(ctx, Form::kAxis); }
Status cpu_Hardmax(KernelContext& ctx) { return cpu_softmax(ctx, Kind::kHardmax, Form::kAxis); }
double flops_Hardmax(const FlopsContext& ctx) {
  return known_numel(ctx.outputs[0]);
}

}  // namespace gpuopt

// ---- NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss --------------------------------------
//
// Both gather -logp[n, target[n, d], d] * weight[target] over N x D positions (D = the flattened
// trailing dims), skip ignore_index, then reduce: "none" keeps [N, d...], "sum" adds, "mean"
// divides by the total weight of the positions that were not ignored.

namespace gpuopt {
namespace {

Status infer_loss(InferContext& ctx, bool softmax) {
  const char* what = softmax ? "scores" : "input";
  if (!ctx.has_input(0) || !ctx.has_input(1)) return ctx.error("expects inputs {} and target", what);
  GPUOPT_RETURN_IF_ERROR(check_input_dtype(ctx, 0, kFloatTypes));
  GPUOPT_RETURN_IF_ERROR(check_input_dtype(ctx, 1, kSignedInts));
  GPUOPT_RETURN_IF_ERROR(common_input_dtype(ctx, {0, 2}));
  const std::string reduction = ctx.node.attr_s("reduction", "mean");
  if (reduction != "none" && reduction != "sum" && reduction != "mean")
    return ctx.error("attribute reduction is '{}'; expected none, sum or mean", reduction);
  const ValueInfo &x = ctx.in(0), &t = ctx.in(1);
  if (x.rank_known && x.shape.size() < 2)
    return ctx.error("{} must have rank >= 2; got {}", what, shape_to_string(x.shape));
  if (x.rank_known && t.rank_known) {
    if (t.shape.size() + 1 != x.shape.size())
      return ctx.error("target rank {} must be {} rank {} minus 1", t.shape.size(), what, x.shape.size());
    for (size_t d = 0; d < t.shape.size(); ++d) {
      const int64_t xd = x.shape[d == 0 ? 0 : d + 1], td = t.shape[d];
      if (dim_is_known(xd) && dim_is_known(td) && xd != td)
        return ctx.error("target shape {} does not match {} shape {}", shape_to_string(t.shape), what,
                         shape_to_string(x.shape));
    }
  }
  if (ctx.has_input(2) && ctx.in(2).rank_known && x.rank_known) {
    const Shape& w = ctx.in(2).shape;
    if (w.size() != 1 || (dim_is_known(w[0]) && dim_is_known(x.shape[1]) && w[0] != x.shape[1]))
      return ctx.error("weight shape {} must be [C] with C = {}", shape_to_string(w), x.shape[1]);
  }
  ValueInfo& out = ctx.outputs[0];
  out.dtype = x.dtype;
  if (reduction == "none") {
    out.rank_known = t.rank_known;
    out.shape = t.shape;
  } else {
    out.rank_known = true;
    out.shape.clear();
  }
  if (softmax && ctx.outputs.size() > 1) {
    ctx.outputs[1].dtype = x.dtype;
    ctx.outputs[1].rank_known = x.rank_known;
    ctx.outputs[1].shape = x.shape;
  }
  return Status::Ok();
}

// logp: [N, C, D] log-probabilities in double.
Status nll(KernelContext& ctx, const std::vector<double>& logp, int64_t n, int64_t c, int64_t d) {
  const Tensor& target = ctx.in(1);
  const Tensor* weight = ctx.has_input(2) ? &ctx.in(2) : nullptr;
  const bool has_ignore = ctx.node.has_attr("ignore_index");
  const int64_t ignore = ctx.node.attr_i("ignore_index", 0);
  const std::string reduction = ctx.node.attr_s("reduction", "mean");
  std::vector<double> loss(static_cast<size_t>(n * d), 0.0);
  double total = 0, total_weight = 0;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < d; ++j) {
      const int64_t cls = target.get_i64(i * d + j);
      if (has_ignore && cls == ignore) continue;
      if (cls < 0 || cls >= c) return ctx.error("target value {} at element {} is outside [0, {})", cls, i * d + j, c);
      const double w = weight ? weight->get_f64(cls) : 1.0;
      loss[i * d + j] = -logp[(i * c + cls) * d + j] * w;
      total += loss[i * d + j];
      total_weight += w;
    }
  Tensor& out = ctx.out(0);
  if (reduction == "none") {
    for (int64_t i = 0; i < n * d; ++i) out.set_f64(i, loss[i]);
  } else {
    // set_f64 rounds double -> f16/bf16 via float; store_f64 rounds once
    dispatch_dtype(out.dtype(), [&](auto tag) {
      using T = decltype(tag);
      if constexpr (kIsFloatLike<T>) *out.data<T>() = store_f64<T>(reduction == "sum" ? total : total / total_weight);
    });
    return Status::Ok();
  }
  dispatch_dtype(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (kIsFloatLike<T>)
      for (int64_t i = 0; i < n * d; ++i) out.data<T>()[i] = store_f64<T>(loss[i]);
  });
  return Status::Ok();
}

Status cpu_loss(KernelContext& ctx, bool softmax) {
  const Tensor& x = ctx.in(0);
  const int64_t n = x.dim(0), c = x.dim(1), d = x.numel() / std::max<int64_t>(1, n * c);
  std::vector<double> logp(static_cast<size_t>(x.numel()));
  for (int64_t i = 0; i < x.numel(); ++i) logp[i] = x.get_f64(i);
  if (softmax) {  // log-softmax over C, around the max
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < d; ++j) {
        double mx = -std::numeric_limits<double>::infinity(), sum = 0;
        for (int64_t k = 0; k < c; ++k) mx = std::max(mx, logp[(i * c + k) * d + j]);
        for (int64_t k = 0; k < c; ++k) sum += std::exp(logp[(i * c + k) * d + j] - mx);
        const double lse = mx + std::log(sum);
        for (int64_t k = 0; k < c; ++k) logp[(i * c + k) * d + j] -= lse;
      }
    if (ctx.outputs.size() > 1 && ctx.outputs[1]) {
      Tensor& lp = ctx.out(1);
      dispatch_dtype(lp.dtype(), [&](auto tag) {
        using T = decltype(tag);
        if constexpr (kIsFloatLike<T>)
          for (int64_t i = 0; i < lp.numel(); ++i) lp.data<T>()[i] = store_f64<T>(logp[i]);
      });
    }
  }
  return nll(ctx, logp, n, c, d);
}

}  // namespace

Status infer_NegativeLogLikelihoodLoss(InferContext& ctx) {
  return infer_loss(ctx, false);
}
Status cpu_NegativeLogLikelihoodLoss(KernelContext& ctx) {
  return cpu_loss(ctx, false);
}
double flops_NegativeLogLikelihoodLoss(const FlopsContext& ctx) {
  return 2 * known_numel(ctx.inputs[1]);
}

Status infer_SoftmaxCrossEntropyLoss(InferContext& ctx) {
  return infer_loss(ctx, true);
}
Status cpu_SoftmaxCrossEntropyLoss(KernelContext& ctx) {
  return cpu_loss(ctx, true);
}
double flops_SoftmaxCrossEntropyLoss(const FlopsContext& ctx) {
  return 5 * known_numel(ctx.inputs[0]);
}

}  // namespace gpuopt
