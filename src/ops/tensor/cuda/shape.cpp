// Shape-only ops on the GPU: the output is a view of the input's memory with the inferred
// shape (no kernel, no copy). Their shape inputs are read on the host.
#include "backends/cuda/cuda_ops.h"

namespace gpuopt::cuda {
namespace {

Status run_view(CudaKernelContext& k) {
  const Tensor& in = k.in(0);
  Tensor& out = k.out(0);
  out = Tensor::wrap(out.dtype(), out.shape(), in.storage(), in.offset());
  return Status::Ok();
}

}  // namespace

GPUOPT_CUDA_OP(Reshape, &run_view, &any_types, host_inputs_mask({1}), true);
GPUOPT_CUDA_OP(Flatten, &run_view, &any_types, 0, true);
GPUOPT_CUDA_OP(Squeeze, &run_view, &any_types, host_inputs_mask({1}), true);
GPUOPT_CUDA_OP(Unsqueeze, &run_view, &any_types, host_inputs_mask({1}), true);
GPUOPT_CUDA_OP(Identity, &run_view, &any_types, 0, true);

}  // namespace gpuopt::cuda
