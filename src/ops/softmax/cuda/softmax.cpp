// Softmax and LogSoftmax on the GPU (the row kernels in ops/norm/cuda/norm.cu).
#include "backends/cuda/cuda_ops.h"
#include "ops/norm/cuda/norm.h"

namespace gpuopt::cuda {
namespace {

// [outer, axis, inner] around `axis`; opset < 13 Softmax flattens to 2-D at `axis` instead.
Status run_softmax_impl(CudaKernelContext& k, bool log) {
  const Tensor& x = k.in(0);
  const int64_t r = x.rank();
  int64_t axis = k.node.attr_i("axis", k.opset < 13 ? 1 : -1);
  if (!normalize_axis(&axis, r)) return k.error("axis {} out of range for rank {}", axis, r);
  int64_t outer = 1, mid = 1, inner = 1;
  for (int64_t i = 0; i < r; ++i) (i < axis ? outer : i == axis ? mid : inner) *= x.shape()[i];
  if (k.opset < 13) {
    mid *= inner;
    inner = 1;
  }
  return launch_softmax(x.dtype(), x.raw(), k.out(0).raw(), outer, mid, inner, log, k.ctx.stream);
}
Status run_softmax(CudaKernelContext& k) { return run_softmax_impl(k, false); }
Status run_log_softmax(CudaKernelContext& k) { return run_softmax_impl(k, true); }

}  // namespace

GPUOPT_CUDA_OP(Softmax, &run_softmax, &first_float);
GPUOPT_CUDA_OP(LogSoftmax, &run_log_softmax, &first_float);

}  // namespace gpuopt::cuda
