// TopK on the GPU (kernel in ops/norm/cuda/rows.cu).
#include "backends/cuda/cuda_ops.h"
#include "ops/norm/cuda/rows.h"

namespace gpuopt::cuda {
namespace {

Status run_topk(CudaKernelContext& k) {
  const Tensor& x = k.in(0);
  int64_t axis = k.node.attr_i("axis", -1);
  if (!normalize_axis(&axis, x.rank())) return k.error("axis {} out of range for rank {}", k.node.attr_i("axis", -1), x.rank());
  Tensor* vals = !k.outputs.empty() ? k.outputs[0] : nullptr;
  Tensor* idx = k.outputs.size() > 1 ? k.outputs[1] : nullptr;
  if (!vals && !idx) return Status::Ok();
  const int64_t kk = (vals ? vals : idx)->shape()[axis];
  const int64_t n = x.shape()[axis];
  if (kk < 0 || kk > n) return k.error("k = {} must be in [0, {}]", kk, n);
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < axis; ++i) outer *= x.shape()[i];
  for (int64_t i = axis + 1; i < x.rank(); ++i) inner *= x.shape()[i];
  return launch_topk(x.dtype(), x.raw(), vals ? vals->raw() : nullptr, idx ? static_cast<int64_t*>(idx->raw()) : nullptr,
                     outer, n, inner, kk, k.node.attr_i("largest", 1) != 0, k.ctx.stream);
}
bool topk_supported(const Node&, const std::vector<DType>& in) {
  if (in.empty()) return false;
  const DType t = in[0];
  if (t != DType::F32 && t != DType::F16 && t != DType::BF16 && t != DType::I32 && t != DType::I64) return false;
  return in.size() < 2 || in[1] == DType::I64 || in[1] == DType::Undefined;
}

}  // namespace

GPUOPT_CUDA_OP(TopK, &run_topk, &topk_supported, host_inputs_mask({1}));

}  // namespace gpuopt::cuda
