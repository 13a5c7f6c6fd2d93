// InstanceNormalization and GroupNormalization on the GPU (kernels in rows.cu).
#include "backends/cuda/cuda_ops.h"
#include "ops/norm/cuda/rows.h"

namespace gpuopt::cuda {
namespace {

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

GPUOPT_CUDA_OP(InstanceNormalization, &run_instance_norm, &norm_supported);
GPUOPT_CUDA_OP(GroupNormalization, &run_group_norm, &norm_supported);

}  // namespace gpuopt::cuda
