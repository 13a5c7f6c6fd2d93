// ToNhwc (ai.gpuopt, written by the nhwc_entry pass) on the GPU: one pass from the model's NCHW
// input to the channels-last region's (to_nhwc.cu).
#include "backends/cuda/cuda_ops.h"
#include "ops/tensor/cuda/to_nhwc.h"
#include "ops/tensor/to_nhwc.h"

namespace gpuopt::cuda {
namespace {

Status run_to_nhwc(CudaKernelContext& k) {
  const Tensor& x = k.in(0);
  Tensor& y = k.out(0);
  if (x.rank() != 4 || y.rank() != 4 || y.dim(3) < x.dim(1))
    return k.error("X {} and Y {}: expected [N, C, H, W] -> [N, H, W, >= C]", x.describe(), y.describe());
  ToNhwcArgs a;
  a.n = x.dim(0);
  a.c = x.dim(1);
  a.h = x.dim(2);
  a.w = x.dim(3);
  a.cp = y.dim(3);
  a.in_dt = x.dtype();
  a.out_dt = y.dtype();
  a.x = x.raw();
  a.y = y.raw();
  return launch_to_nhwc(a, k.ctx.stream);
}

bool float_type(DType t) { return t == DType::F32 || t == DType::F16 || t == DType::BF16; }

bool to_nhwc_supported(const Node& node, const std::vector<DType>& in) {
  if (in.empty() || !float_type(in[0])) return false;
  const Result<DType> out = to_nhwc_out_dtype(node, in[0]);
  return out.ok() && float_type(*out);
}

}  // namespace

GPUOPT_CUDA_OP(ToNhwc, &run_to_nhwc, &to_nhwc_supported);

}  // namespace gpuopt::cuda
