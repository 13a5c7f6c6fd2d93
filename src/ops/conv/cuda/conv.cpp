// Conv through cuDNN (NCHW, symmetric pads, groups, dilations), descriptors and the chosen
// algorithm cached per shape — failures too. 1-D convs run as 2-D ones of unit height, 3-D ones
// through cuDNN's N-d descriptors (cudnn_conv.h). Asymmetric padding and SAME_* auto_pad run on
// the CPU (the conv1d pass hands 1-D convs in a graph to the 2-D path first: docs/cuda.md).
#include "backends/cuda/cuda_ops.h"
#include "ops/conv/cuda/cudnn_conv.h"
#include "backends/cuda/plan_store.h"
#include "core/cuda_check.h"

#include <cudnn.h>

namespace gpuopt::cuda {
namespace {

struct ConvPlan {
  Status status;
  ConvDescs d;
  cudnnConvolutionFwdAlgo_t algo{};
  size_t workspace = 0;
};

ConvPlanCache<ConvPlan> g_plans;

Status build(ConvPlan* p, const ConvKey& k, cudnnHandle_t h, size_t max_ws) {
  GPUOPT_RETURN_IF_ERROR(p->d.build(k, k.m, k.c / k.group));
  // The plan cache's choice for this shape, when it still fits (plan_store.h).
  const std::string entry = fmt::format("conv {} ws<={}", conv_key_text(k), max_ws);
  if (reuse_algo(PlanStore::current().find(entry), k.dt, max_ws, h, p->d, &p->algo, &p->workspace)) return Status::Ok();
  cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
  int found = 0;
  GPUOPT_CHECK_CALL(cudnnGetConvolutionForwardAlgorithm_v7(h, p->d.x, p->d.w, p->d.conv, p->d.y,
                                                           CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &found, perf));
  GPUOPT_RETURN_IF_ERROR(choose_algo(perf, found, k.dt, max_ws, p->d.conv, &p->algo, &p->workspace, "forward"));
  PlanStore::current().put(entry, algo_text(p->algo, p->d.conv));
  return Status::Ok();
}

Status run_conv(CudaKernelContext& k) {
  const Tensor& x = k.in(0);
  const Tensor& w = k.in(1);
  const Tensor& y = k.out(0);
  const ConvKey key = forward_conv_key(k.node, x.shape(), w.shape(), y.shape(), x.dtype(), false);
  GPUOPT_ASSIGN_OR_RETURN(cudnnHandle_t h, k.ctx.cudnn());
  const ConvPlan* plan =
      g_plans.get(key, [&](ConvPlan* p) { return build(p, key, h, conv_workspace_cap(k.ctx)); });
  GPUOPT_RETURN_IF_ERROR(plan->status.with_context(node_label(k.node)));
  Tensor hold;
  GPUOPT_ASSIGN_OR_RETURN(void* ws, call_workspace(k.ctx, plan->workspace, &hold));
  const float one = 1.f, zero = 0.f;
  const ConvDescs& d = plan->d;
  GPUOPT_CHECK_CALL(cudnnConvolutionForward(h, &one, d.x, x.raw(), d.w, w.raw(), d.conv, plan->algo, ws,
                                            plan->workspace, &zero, d.y, k.out(0).raw()));
  if (k.inputs.size() > 2 && k.inputs[2])
    GPUOPT_CHECK_CALL(cudnnAddTensor(h, &one, d.bias, k.in(2).raw(), &one, d.y, k.out(0).raw()));
  return Status::Ok();
}

bool conv_supported(const Node& n, const std::vector<DType>& in) {
  if (in.size() < 2 || in[0] != in[1] || (in.size() > 2 && in[2] != DType::Undefined && in[2] != in[0])) return false;
  if (in[0] != DType::F32 && in[0] != DType::F16 && in[0] != DType::BF16) return false;
  return conv_attrs_supported(n, 3);
}

}  // namespace

GPUOPT_CUDA_OP(Conv, &run_conv, &conv_supported);

}  // namespace gpuopt::cuda
