// ArgMax / ArgMin on the GPU (argmax.cu): axis, keepdims (a view: the memory is the same) and
// select_last_index, as the CPU reference.
#include "backends/cuda/cuda_ops.h"
#include "ops/reduce/cuda/argmax.h"

namespace gpuopt::cuda {
namespace {

template <bool kMax>
Status run_arg(CudaKernelContext& k) {
  const Tensor& x = k.in(0);
  int64_t axis = k.node.attr_i("axis", 0);
  if (x.rank() == 0 || !normalize_axis(&axis, x.rank()))
    return k.error("axis {} is out of range for rank {}", k.node.attr_i("axis", 0), x.rank());
  if (x.dim(axis) == 0) return k.error("axis {} has extent 0: no element to select", axis);
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= x.dim(d);
  for (int64_t d = axis + 1; d < x.rank(); ++d) inner *= x.dim(d);
  return launch_arg(kMax, x.dtype(), x.raw(), k.out(0).data<int64_t>(), outer, x.dim(axis), inner,
                    k.node.attr_i("select_last_index", 0) != 0, k.ctx.stream)
      .with_context(node_label(k.node));
}

bool arg_supported(const Node&, const std::vector<DType>& in) {
  if (in.size() != 1) return false;
  switch (in[0]) {
    case DType::F32: case DType::F16: case DType::BF16: case DType::I32: case DType::I64: return true;
    default: return false;
  }
}

}  // namespace

GPUOPT_CUDA_OP(ArgMax, &run_arg<true>, &arg_supported);
GPUOPT_CUDA_OP(ArgMin, &run_arg<false>, &arg_supported);

}  // namespace gpuopt::cuda
