// Softmax and LogSoftmax on the GPU (the row kernels in ops/norm/cuda/norm.cu).
#include "backends/cuda/cuda_ops.h"
#include "ops/norm/cuda/norm.h"

namespace gpuopt::cuda {
namespace {

// [outer, axis, inner] around `axis`; the form before opset 13 (coerce_2d) flattens to 2-D at
// `axis` (default 1) instead.
Status run_softmax_impl(CudaKernelContext& k, bool log, bool coerce_2d) {
  const Tensor& x = k.in(0);
  const int64_t r = x.rank();
  int64_t axis = k.node.attr_i("axis", coerce_2d ? 1 : -1);
  if (!normalize_axis(&axis, r)) return k.error("axis {} out of range for rank {}", axis, r);
  int64_t outer = 1, mid = 1, inner = 1;
  for (int64_t i = 0; i < r; ++i) (i < axis ? outer : i == axis ? mid : inner) *= x.shape()[i];
  if (coerce_2d) {
    mid *= inner;
    inner = 1;
  }
  return launch_softmax(x.dtype(), x.raw(), k.out(0).raw(), outer, mid, inner, log, k.ctx.stream);
}
Status run_softmax_v1(CudaKernelContext& k) { return run_softmax_impl(k, false, true); }
Status run_log_softmax_v1(CudaKernelContext& k) { return run_softmax_impl(k, true, true); }
Status run_softmax(CudaKernelContext& k) { return run_softmax_impl(k, false, false); }
Status run_log_softmax(CudaKernelContext& k) { return run_softmax_impl(k, true, false); }

}  // namespace

GPUOPT_CUDA_OP_RANGE(Softmax, 1, 12, &run_softmax_v1, &first_float);
GPUOPT_CUDA_OP_RANGE(Softmax, 13, kOpsetMax, &run_softmax, &first_float);
GPUOPT_CUDA_OP_RANGE(LogSoftmax, 1, 12, &run_log_softmax_v1, &first_float);
GPUOPT_CUDA_OP_RANGE(LogSoftmax, 13, kOpsetMax, &run_log_softmax, &first_float);

}  // namespace gpuopt::cuda
