// TopK, InstanceNormalization and GroupNormalization on the GPU (kernels in kernels/rows.cu).
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

// X, scale, B of one float dtype.
bool norm_supported(const Node&, const std::vector<DType>& in) {
  if (in.size() != 3) return false;
  if (in[0] != DType::F32 && in[0] != DType::F16 && in[0] != DType::BF16) return false;
  return in[1] == in[0] && in[2] == in[0];
}

Status run_norm(CudaKernelContext& k, int64_t groups) {
  const Tensor &x = k.in(0), &sc = k.in(1), &bi = k.in(2);
  if (x.rank() < 2) return k.error("input rank {} is below 2", x.rank());
  const int64_t N = x.dim(0), C = x.dim(1), S = N * C != 0 ? x.numel() / (N * C) : 0;
  if (groups < 1 || C % groups != 0) return k.error("{} channels are not divisible by {} groups", C, groups);
  auto per_channel = [&](const Tensor& t, const char* what, bool* ch) -> Status {
    if (t.numel() == C) *ch = true;
    else if (t.numel() == groups) *ch = false;
    else return k.error("{} has {} values for {} channels and {} groups", what, t.numel(), C, groups);
    return Status::Ok();
  };
  bool sc_ch = true, bi_ch = true;
  GPUOPT_RETURN_IF_ERROR(per_channel(sc, "scale", &sc_ch));
  GPUOPT_RETURN_IF_ERROR(per_channel(bi, "bias", &bi_ch));
  return launch_groupnorm(x.dtype(), x.raw(), sc.raw(), bi.raw(), k.out(0).raw(), N, groups, C / groups, S, sc_ch, bi_ch,
                          k.node.attr_f("epsilon", 1e-5f), k.ctx.stream);
}
Status run_instance_norm(CudaKernelContext& k) {
  if (k.in(0).rank() < 3) return k.error("input rank {} is below 3", k.in(0).rank());
  return run_norm(k, k.in(0).dim(1));
}
Status run_group_norm(CudaKernelContext& k) { return run_norm(k, k.node.attr_i("num_groups", 0)); }

}  // namespace

GPUOPT_CUDA_OP(TopK, &run_topk, &topk_supported, host_inputs_mask({1}));
GPUOPT_CUDA_OP(InstanceNormalization, &run_instance_norm, &norm_supported);
GPUOPT_CUDA_OP(GroupNormalization, &run_group_norm, &norm_supported);

}  // namespace gpuopt::cuda
