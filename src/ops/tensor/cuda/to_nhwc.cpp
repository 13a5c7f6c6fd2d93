// ToNhwc (ai.gpuopt, written by the nhwc_entry pass) on the GPU: one pass from the model's NCHW
// input to the channels-last region's, the input's quantize round trip included (to_nhwc.cu).
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
  if (k.has_input(1) && k.inputs[1]) {  // the input's quantize round trip (nhwc_entry took it in)
    if (k.in(1).numel() != 1 || k.in(1).dtype() != y.dtype())
      return k.error("y_scale {} must be one value of Y's type", k.in(1).describe());
    a.scale = k.in(1).raw();
    if (k.has_input(2) && k.inputs[2]) {
      if (k.in(2).numel() != 1) return k.error("y_zero_point {} must be one value", k.in(2).describe());
      a.zero_point = k.in(2).raw();
      a.zp_dt = k.in(2).dtype();
    }
  }
  return launch_to_nhwc(a, k.ctx.stream);
}

bool float_type(DType t) { return t == DType::F32 || t == DType::F16 || t == DType::BF16; }

bool to_nhwc_supported(const Node& node, const std::vector<DType>& in) {
  if (in.empty() || !float_type(in[0])) return false;
  const Result<DType> out = to_nhwc_out_dtype(node, in[0]);
  if (!out.ok() || !float_type(*out)) return false;
  if (in.size() > 1 && in[1] != DType::Undefined && in[1] != *out) return false;
  return in.size() < 3 || in[2] == DType::Undefined || in[2] == DType::I8 || in[2] == DType::U8;
}

}  // namespace

GPUOPT_CUDA_OP(ToNhwc, &run_to_nhwc, &to_nhwc_supported);

}  // namespace gpuopt::cuda
