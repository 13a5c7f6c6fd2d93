// NhwcMaxPool (ai.gpuopt, written by the layout_nhwc pass): MaxPool over [N, H, W, C]. By
// default gpuopt's channels-last kernel (maxpool_nhwc.h: 16-byte vectors of channels, several
// output pixels per thread so overlapping window columns are loaded once; any pads, strides,
// ceil_mode, dilations). GPUOPT_POOL_KERNEL=cudnn keeps the earlier path for A/B runs: where
// cuDNN's pooling computes exactly the node (symmetric pads below the window, no ceil_mode, no
// dilation) cudnnPoolingForward with NHWC descriptors, cached per shape in a ConvPlanCache (a
// pool is a depthwise window op: ConvKey names every size it has); otherwise, or where cuDNN
// refuses the call, our kernel. cuDNN's pooling ran ResNet-50's stem pool at batch 256 in 314 us
// on the H200 (0.8 TB/s). Every path leaves padded taps out of the maximum, as ONNX does.
#include "backends/cuda/cuda_ops.h"
#include "ops/conv/cuda/cudnn_conv.h"
#include "ops/pool/cuda/maxpool_nhwc.h"
#include "ops/pool/cuda/pool.h"
#include "gpuopt/kernel_settings.h"
#include "core/cuda_check.h"
#include "core/log.h"

#include <cudnn.h>

#include <atomic>

namespace gpuopt::cuda {
namespace {

struct PoolPlan {
  Status status;
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnPoolingDescriptor_t pool = nullptr;
  mutable std::atomic<bool> declined{false};  // cuDNN refused the call: our kernel runs it

  PoolPlan() = default;
  PoolPlan(const PoolPlan&) = delete;
  PoolPlan& operator=(const PoolPlan&) = delete;
  ~PoolPlan() {
    if (x) cudnnDestroyTensorDescriptor(x);
    if (y) cudnnDestroyTensorDescriptor(y);
    if (pool) cudnnDestroyPoolingDescriptor(pool);
  }
};

ConvPlanCache<PoolPlan> g_plans;

Status build(PoolPlan* p, const ConvKey& k) {
  auto i = [](int64_t v) { return static_cast<int>(v); };
  const cudnnDataType_t t = dnn_type(k.dt);
  GPUOPT_CHECK_CALL(cudnnCreateTensorDescriptor(&p->x));
  GPUOPT_CHECK_CALL(cudnnSetTensor4dDescriptor(p->x, CUDNN_TENSOR_NHWC, t, i(k.n), i(k.c), i(k.h), i(k.w)));
  GPUOPT_CHECK_CALL(cudnnCreateTensorDescriptor(&p->y));
  GPUOPT_CHECK_CALL(cudnnSetTensor4dDescriptor(p->y, CUDNN_TENSOR_NHWC, t, i(k.n), i(k.c), i(k.oh), i(k.ow)));
  GPUOPT_CHECK_CALL(cudnnCreatePoolingDescriptor(&p->pool));
  GPUOPT_CHECK_CALL(cudnnSetPooling2dDescriptor(p->pool, CUDNN_POOLING_MAX, CUDNN_PROPAGATE_NAN, i(k.kh), i(k.kw),
                                                i(k.ph), i(k.pw), i(k.sh), i(k.sw)));
  int dims[4] = {};
  GPUOPT_CHECK_CALL(cudnnGetPooling2dForwardOutputDim(p->pool, p->x, &dims[0], &dims[1], &dims[2], &dims[3]));
  if (dims[2] != k.oh || dims[3] != k.ow)
    return Status::Unimplemented("cuDNN pools to {}x{}, the node's output is {}x{}", dims[2], dims[3], k.oh, k.ow);
  return Status::Ok();
}

// The attributes cudnnPoolingForward computes exactly.
bool cudnn_pools(const Node& n) {
  const auto ks = n.attr_ints("kernel_shape");
  const auto pads = n.attr_ints("pads", {0, 0, 0, 0});
  if (pads.size() != 4 || pads[0] != pads[2] || pads[1] != pads[3] || pads[0] >= ks[0] || pads[1] >= ks[1])
    return false;
  return n.attr_i("ceil_mode", 0) == 0 && n.attr_ints("dilations", {1, 1}) == std::vector<int64_t>{1, 1};
}

// GPUOPT_POOL_KERNEL (the context's KernelSettings): `cudnn` takes cuDNN's pooling where it is
// exact; `ours` (the default), gpuopt's kernel.
bool pool_kernel_is_cudnn(const CudaKernelContext& k) {
  return k.ctx.kernels().pool_kernel == KernelSettings::PoolKernel::kCudnn;
}

// The channels-last kernel (maxpool_nhwc.h); past its 32-bit sizes, the general pool2d kernel.
Status run_own_kernel(CudaKernelContext& k) {
  const Tensor& x = k.in(0);
  Tensor& y = k.out(0);
  const auto ks = k.node.attr_ints("kernel_shape");
  const auto st = k.node.attr_ints("strides", {1, 1});
  const auto pads = k.node.attr_ints("pads", {0, 0, 0, 0});
  const auto dl = k.node.attr_ints("dilations", {1, 1});
  const MaxPoolNhwcArgs a{x.shape()[0], x.shape()[1], x.shape()[2], x.shape()[3], y.shape()[1], y.shape()[2], ks[0],
                          ks[1],        st[0],        st[1],        pads[0],      pads[1],      dl[0],        dl[1]};
  const MaxPoolNhwcPlan plan = plan_maxpool_nhwc(a, dtype_size(x.dtype()), common_alignment(x.raw(), y.raw()));
  if (!plan.ok) return run_pool2d(k, /*max=*/true, /*nhwc=*/true);
  return launch_maxpool_nhwc(x.dtype(), x.raw(), y.raw(), a, plan, k.ctx.stream);
}

Status run_nhwc_maxpool(CudaKernelContext& k) {
  if (!pool_kernel_is_cudnn(k) || !cudnn_pools(k.node)) return run_own_kernel(k);
  const Tensor& x = k.in(0);
  Tensor& y = k.out(0);
  const auto ks = k.node.attr_ints("kernel_shape");
  const auto st = k.node.attr_ints("strides", {1, 1});
  const auto pads = k.node.attr_ints("pads", {0, 0, 0, 0});
  const ConvKey key{x.shape()[0],
                    x.shape()[3],
                    x.shape()[1],
                    x.shape()[2],
                    x.shape()[3],
                    ks[0],
                    ks[1],
                    y.shape()[1],
                    y.shape()[2],
                    1,
                    pads[0],
                    pads[1],
                    st[0],
                    st[1],
                    1,
                    1,
                    x.dtype(),
                    true};
  const PoolPlan* plan = g_plans.get(key, [&](PoolPlan* p) { return build(p, key); });
  if (!plan->status.ok() || plan->declined.load()) return run_own_kernel(k);
  GPUOPT_ASSIGN_OR_RETURN(cudnnHandle_t h, k.ctx.cudnn());
  const float one = 1.f, zero = 0.f;
  const cudnnStatus_t s = cudnnPoolingForward(h, plan->pool, &one, plan->x, x.raw(), &zero, plan->y, y.raw());
  if (s == CUDNN_STATUS_SUCCESS) return Status::Ok();
  // As in ops_fusedconv.cpp: 2xxx/3xxx are refusals checked before anything is queued.
  const int family = static_cast<int>(s) / 1000;
  if (family != 2 && family != 3) GPUOPT_CHECK_CALL(s);
  if (!plan->declined.exchange(true))
    GPUOPT_LOG(info, "{}: cuDNN declined NHWC max pooling for {} ({}); running our kernel instead", node_label(k.node),
               dtype_name(x.dtype()), cudnnGetErrorString(s));
  return run_own_kernel(k);
}

// 2-D, explicit pads or VALID (the kernels read `pads`), no Indices output.
bool nhwc_maxpool_supported(const Node& n, const std::vector<DType>& in) {
  if (in.empty() || (in[0] != DType::F32 && in[0] != DType::F16 && in[0] != DType::BF16)) return false;
  if (n.outputs.size() > 1 && n.outputs[1] != kNoValue) return false;
  const std::string ap = n.attr_s("auto_pad", "NOTSET");
  return n.attr_ints("kernel_shape").size() == 2 && (ap == "NOTSET" || ap == "VALID");
}

}  // namespace

GPUOPT_CUDA_OP(NhwcMaxPool, &run_nhwc_maxpool, &nhwc_maxpool_supported);

}  // namespace gpuopt::cuda
