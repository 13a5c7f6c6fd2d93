// Det: the determinant of the trailing [M, M] matrices by LU with partial pivoting, in double.
#include "ops/common/broadcast.h"
#include "ir/graph.h"

#include <cmath>
#include <limits>

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
