// Gather on the GPU (kernel in ops/tensor/cuda/layout.cu).
#include "backends/cuda/cuda_ops.h"
#include "ops/tensor/cuda/layout.h"

namespace gpuopt::cuda {
namespace {

Status run_gather(CudaKernelContext& k) {
  const Tensor& data = k.in(0);
  const Tensor& idx = k.in(1);
  int64_t axis = k.node.attr_i("axis", 0);
  if (!normalize_axis(&axis, data.rank())) return k.error("axis out of range");
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < axis; ++i) outer *= data.shape()[i];
  for (int64_t i = axis + 1; i < data.rank(); ++i) inner *= data.shape()[i];
  return launch_gather(dtype_size(data.dtype()), data.raw(), outer, data.shape()[axis], inner, idx.raw(),
                       idx.dtype() == DType::I64, idx.numel(), k.out(0).raw(), nullptr, k.ctx.stream);
}
bool gather_supported(const Node& n, const std::vector<DType>& in) {
  return in.size() == 2 && in[0] != DType::String && (in[1] == DType::I64 || in[1] == DType::I32);
}

}  // namespace

GPUOPT_CUDA_OP(Gather, &run_gather, &gather_supported);

}  // namespace gpuopt::cuda
