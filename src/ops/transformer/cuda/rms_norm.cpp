// RMSNormalization (ONNX opset 23) on the GPU: the LayerNorm row kernels (ops/norm/cuda) without
// the centring, statistics in f32. The scale must hold one value per normalised element (a
// broadcast scale is an error naming the shapes).
#include "backends/cuda/cuda_ops.h"
#include "ops/norm/cuda/norm.h"

namespace gpuopt::cuda {
namespace {

Status run_rmsnorm(CudaKernelContext& k) {
  const Tensor& x = k.in(0);
  int64_t axis = k.node.attr_i("axis", -1);
  if (!normalize_axis(&axis, x.rank())) return k.error("axis out of range");
  int64_t rows = 1, cols = 1;
  for (int64_t i = 0; i < x.rank(); ++i) (i < axis ? rows : cols) *= x.shape()[i];
  if (k.in(1).numel() != cols)
    return k.error("scale {} has {} elements for the {} normalised ones (X {} from axis {})",
                   shape_to_string(k.in(1).shape()), k.in(1).numel(), cols, shape_to_string(x.shape()), axis);
  return launch_rmsnorm(x.dtype(), x.raw(), k.in(1).raw(), k.out(0).raw(), rows, cols, k.node.attr_f("epsilon", 1e-5f),
                        nullptr, k.ctx.stream)
      .with_context(node_label(k.node));
}

bool rmsnorm_supported(const Node& n, const std::vector<DType>& in) {
  return in.size() >= 2 && first_float(n, in) && in[1] == in[0];
}

}  // namespace

GPUOPT_CUDA_OP(RMSNormalization, &run_rmsnorm, &rmsnorm_supported);

}  // namespace gpuopt::cuda
