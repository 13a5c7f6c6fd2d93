// Int8Add (ai.gpuopt, written by fold_qdq from a QDQ residual add) on the GPU: one elementwise
// pass reading the two int8 tensors and writing int8 (or f16/f32) (int8_add.cu).
#include "backends/cuda/cuda_ops.h"
#include "ops/quant/cuda/int8_add.h"

namespace gpuopt::cuda {
namespace {

Status run_int8_add(CudaKernelContext& k) {
  const Tensor& a = k.in(0);
  const Tensor& b = k.in(2);
  if (a.shape() != b.shape()) return k.error("A {} and B {} differ in shape", a.describe(), b.describe());
  Int8AddArgs args;
  args.n = a.numel();
  args.a = a.data<int8_t>();
  args.b = b.data<int8_t>();
  args.scale_dt = k.in(1).dtype();
  args.a_scale = k.in(1).raw();
  args.b_scale = k.in(3).raw();
  args.y_scale = k.has_input(4) && k.inputs[4] ? k.in(4).raw() : nullptr;
  args.relu = k.node.attr_s("activation", "") == "Relu";
  args.out_dt = k.out(0).dtype();
  args.y = k.out(0).raw();
  return launch_int8_add(args, k.ctx.stream);
}

bool int8_add_supported(const Node& node, const std::vector<DType>& in) {
  if (in.size() < 4 || in[0] != DType::I8 || in[2] != DType::I8) return false;
  if ((in[1] != DType::F32 && in[1] != DType::F16) || in[3] != in[1]) return false;
  if (in.size() > 4 && in[4] != DType::Undefined && in[4] != in[1]) return false;
  const std::string act = node.attr_s("activation", "");
  return act.empty() || act == "Relu";
}

}  // namespace

GPUOPT_CUDA_OP(Int8Add, &run_int8_add, &int8_add_supported);

}  // namespace gpuopt::cuda
