// Softmax, LogSoftmax and Hardmax. Before opset 13 the input is coerced to 2-D at `axis`
// (default 1) and the op runs over the flattened trailing block; from opset 13 it runs along the
// single dimension `axis` (default -1). Computed in double around the row maximum.
#include "backends/cpu/broadcast.h"
#include "ir/graph.h"

#include <cmath>
#include <limits>

namespace gpuopt {
namespace {

enum class Kind { kSoftmax, kLogSoftmax, kHardmax };

int64_t default_axis(int opset) {
  return opset < 13 ? 1 : -1;
}

Status infer_softmax(InferContext& ctx) {
  if (!ctx.has_input(0)) return ctx.error("input 0 is missing");
  GPUOPT_RETURN_IF_ERROR(check_input_dtype(ctx, 0, kFloatTypes));
  const ValueInfo& in = ctx.in(0);
  if (in.rank_known) {
    const int64_t rank = static_cast<int64_t>(in.shape.size());
    int64_t axis = ctx.node.attr_i("axis", default_axis(ctx.opset));
    // the coerced 2-D form also accepts axis == rank (everything in the outer block)
    const bool ok = ctx.opset < 13 ? (axis >= -rank && axis <= rank) : normalize_axis(&axis, rank);
    if (!ok)
      return ctx.error("axis {} is out of range for rank {}", ctx.node.attr_i("axis", default_axis(ctx.opset)), rank);
  }
  ctx.outputs[0].dtype = in.dtype;
  ctx.outputs[0].rank_known = in.rank_known;
  ctx.outputs[0].shape = in.shape;
  return Status::Ok();
}

Status cpu_softmax(KernelContext& ctx, Kind kind) {
  const Tensor& x = ctx.in(0);
  const int64_t rank = x.rank();
  int64_t axis = ctx.node.attr_i("axis", default_axis(ctx.opset));
  if (axis < 0) axis += rank;
  int64_t outer = 1, n = 1, inner = 1;
  for (int64_t d = 0; d < rank; ++d) {
    if (d < axis)
      outer *= x.dim(d);
    else if (ctx.opset < 13 || d == axis)
      n *= x.dim(d);  // opset < 13: the whole trailing block
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

Status infer_Softmax(InferContext& ctx) {
  return infer_softmax(ctx);
}
Status cpu_Softmax(KernelContext& ctx) {
  return cpu_softmax(ctx, Kind::kSoftmax);
}
double flops_Softmax(const FlopsContext& ctx) {
  return 5 * known_numel(ctx.outputs[0]);
}

Status infer_LogSoftmax(InferContext& ctx) {
  return infer_softmax(ctx);
}
Status cpu_LogSoftmax(KernelContext& ctx) {
  return cpu_softmax(ctx, Kind::kLogSoftmax);
}
double flops_LogSoftmax(const FlopsContext& ctx) {
  return 5 * known_numel(ctx.outputs[0]);
}

Status infer_Hardmax(InferContext& ctx) {
  return infer_softmax(ctx);
}
Status cpu_Hardmax(KernelContext& ctx) {
  return cpu_softmax(ctx, Kind::kHardmax);
}
double flops_Hardmax(const FlopsContext& ctx) {
  return known_numel(ctx.outputs[0]);
}

}  // namespace gpuopt
