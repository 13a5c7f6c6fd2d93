// ConvTranspose through cuDNN: the transposed convolution is the backward-data pass of the
// forward convolution that maps the output's shape to the input's (ConvTranspose's weight
// [C, M/group, k...] is that convolution's filter). NCHW, 1-D (as 2-D of unit height), 2-D and
// 3-D (cuDNN's N-d descriptors), symmetric pads, output_padding, groups, dilations; plans cached
// per shape, failures too. auto_pad other than NOTSET/VALID, an explicit output_shape and
// asymmetric pads run on the CPU.
#include "backends/cuda/cuda_ops.h"
#include "ops/conv/cuda/cudnn_conv.h"
#include "core/cuda_check.h"

#include <cudnn.h>

namespace gpuopt::cuda {
namespace {

struct Plan {
  Status status;
  ConvDescs d;
  cudnnConvolutionBwdDataAlgo_t algo{};
  size_t workspace = 0;
};

ConvPlanCache<Plan> g_plans;

// x: [n, c, spatial...] (the forward convolution's output, "dy"); y: [n, m, spatial...] ("dx").
Status build(Plan* p, const ConvKey& k, cudnnHandle_t h, size_t max_ws) {
  GPUOPT_RETURN_IF_ERROR(p->d.build(k, k.c, k.m / k.group));
  cudnnConvolutionBwdDataAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
  int found = 0;
  GPUOPT_CHECK_CALL(cudnnGetConvolutionBackwardDataAlgorithm_v7(h, p->d.w, p->d.x, p->d.conv, p->d.y,
                                                                CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &found, perf));
  return choose_algo(perf, found, k.dt, max_ws, p->d.conv, &p->algo, &p->workspace, "backward-data");
}

Status run_conv_transpose(CudaKernelContext& k) {
  const Tensor& x = k.in(0);
  const Tensor& w = k.in(1);
  const Tensor& y = k.out(0);
  if (x.rank() < 3 || x.rank() > 5 || w.rank() != x.rank())
    return k.error("only 1-D, 2-D and 3-D (NC...) transposed convolutions run on CUDA");
  const int64_t group = k.node.attr_i("group", 1);
  if (w.shape()[0] != x.shape()[1] || w.shape()[1] * group != y.shape()[1])
    return k.error("weight {} does not match input {} and output {}", shape_to_string(w.shape()),
                   shape_to_string(x.shape()), shape_to_string(y.shape()));
  // The forward convolution's x is ConvTranspose's x ("dy"), its y ConvTranspose's y ("dx").
  const ConvKey key = conv_key_of(k.node, x.shape(), w.shape(), y.shape(), y.shape()[1], x.dtype(), false);
  GPUOPT_ASSIGN_OR_RETURN(cudnnHandle_t h, k.ctx.cudnn());
  const Plan* plan = g_plans.get(key, [&](Plan* p) { return build(p, key, h, conv_workspace_cap(k.ctx)); });
  GPUOPT_RETURN_IF_ERROR(plan->status.with_context(node_label(k.node)));
  Tensor hold;
  GPUOPT_ASSIGN_OR_RETURN(void* ws, call_workspace(k.ctx, plan->workspace, &hold));
  const float one = 1.f, zero = 0.f;
  const ConvDescs& d = plan->d;
  GPUOPT_CHECK_CALL(cudnnConvolutionBackwardData(h, &one, d.w, w.raw(), d.x, x.raw(), d.conv, plan->algo,
                                                 ws, plan->workspace, &zero, d.y, k.out(0).raw()));
  if (k.inputs.size() > 2 && k.inputs[2])
    GPUOPT_CHECK_CALL(cudnnAddTensor(h, &one, d.bias, k.in(2).raw(), &one, d.y, k.out(0).raw()));
  return Status::Ok();
}

// The spatial rank (1, 2 or 3) comes from any attribute that has one value per spatial axis;
// every such attribute must agree with it.
bool conv_transpose_supported(const Node& n, const std::vector<DType>& in) {
  if (in.size() < 2 || in[0] != in[1] || (in.size() > 2 && in[2] != DType::Undefined && in[2] != in[0])) return false;
  if (in[0] != DType::F32 && in[0] != DType::F16 && in[0] != DType::BF16) return false;
  const std::string ap = n.attr_s("auto_pad", "NOTSET");
  if ((ap != "NOTSET" && ap != "VALID") || n.has_attr("output_shape")) return false;
  const auto ks = n.attr_ints("kernel_shape"), st = n.attr_ints("strides"), dl = n.attr_ints("dilations");
  const auto pads = n.attr_ints("pads"), op = n.attr_ints("output_padding");
  const size_t nd = !ks.empty() ? ks.size() : !st.empty() ? st.size() : !dl.empty() ? dl.size()
                  : !op.empty() ? op.size() : pads.size() / 2;
  if (nd < 1 || nd > 3) return false;
  for (const auto* v : {&ks, &st, &dl, &op})
    if (!v->empty() && v->size() != nd) return false;
  if (pads.empty()) return true;
  if (pads.size() != 2 * nd) return false;
  for (size_t i = 0; i < nd; ++i)
    if (pads[i] != pads[nd + i]) return false;
  return true;
}

}  // namespace

GPUOPT_CUDA_OP(ConvTranspose, &run_conv_transpose, &conv_transpose_supported);

}  // namespace gpuopt::cuda
