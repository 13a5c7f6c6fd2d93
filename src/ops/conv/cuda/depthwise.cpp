// The host side of the depthwise channels-last kernel (depthwise.h), called by NhwcFusedConv.
#include "ops/conv/cuda/cudnn_conv.h"
#include "ops/conv/cuda/depthwise.h"
#include "ops/tensor/cuda/layout.h"
#include "core/log.h"
#include "gpuopt/kernel_settings.h"

namespace gpuopt::cuda {

bool depthwise_nhwc_applies(const CudaKernelContext& k, const ConvKey& key) {
  const bool use_cudnn = k.ctx.kernels().depthwise == KernelSettings::Depthwise::kCudnn;
  return !use_cudnn && key.nhwc && key.group == key.c && key.m == key.c && key.group > 1 &&
         (key.dt == DType::F16 || key.dt == DType::BF16);
}

Status run_depthwise_nhwc(CudaKernelContext& k, const ConvKey& key, ConvAct act, const void* x, const void* w,
                          const void* bias, const void* z, void* y, void* mean, ConvAct in_act) {
  DepthwiseArgs a;
  a.dt = key.dt;
  a.x = x;
  a.bias = bias;
  a.z = z;
  a.y = y;
  a.n = key.n;
  a.h = key.h;
  a.w = key.w;
  a.c = key.c;
  a.oh = key.oh;
  a.ow = key.ow;
  a.kh = key.kh;
  a.kw = key.kw;
  a.sh = key.sh;
  a.sw = key.sw;
  a.ph = key.ph;
  a.pw = key.pw;
  a.dh = key.dh;
  a.dw = key.dw;
  a.act = act;
  a.in_act = in_act;
  using D = KernelSettings::Depthwise;
  const D choice = k.ctx.kernels().depthwise;
  a.tile = choice == D::kWide     ? DepthwiseTile::kWide
           : choice == D::kNarrow ? DepthwiseTile::kNarrow
           : choice == D::kWide1  ? DepthwiseTile::kWideS1
           : choice == D::kTiles  ? DepthwiseTile::kAuto
                                  : DepthwiseTile::kSmem;  // auto, smem
  // The shared-memory kernel where it takes the shape (w_t is the workspace's, 256-aligned).
  const bool smem = a.tile == DepthwiseTile::kSmem && depthwise_smem_applies(a);
  if (a.tile == DepthwiseTile::kSmem)  // the debug log says which shapes fall back
    GPUOPT_LOG(debug, "{}: depthwise {}", node_label(k.node), smem ? "smem kernel" : "smem does not apply: register tiles");
  // The transposed filter, then (with mean) the f32 partial sums, 256-byte aligned.
  const size_t w_bytes = (static_cast<size_t>(key.c * key.kh * key.kw) * dtype_size(key.dt) + 255) / 256 * 256;
  const size_t sum_bytes =
      !mean ? 0 : smem ? depthwise_smem_mean_workspace(a) : depthwise_mean_workspace(key.n, key.c, key.oh);
  Tensor hold;
  GPUOPT_ASSIGN_OR_RETURN(void* w_t, call_workspace(k.ctx, w_bytes + sum_bytes, &hold));
  // [c, kh, kw, 1] -> [kh * kw, c]: a few KB, so every tap of the kernel is one vector access.
  GPUOPT_RETURN_IF_ERROR(
      launch_transpose(dtype_size(key.dt), w, w_t, Shape{key.c, key.kh * key.kw}, {1, 0}, k.ctx.stream));
  a.w_t = w_t;
  void* partial = static_cast<char*>(w_t) + w_bytes;
  if (smem) return launch_depthwise_smem(a, mean, partial, k.ctx.stream).with_context(node_label(k.node));
  if (mean) return launch_depthwise_nhwc_mean(a, mean, partial, k.ctx.stream).with_context(node_label(k.node));
  return launch_depthwise_nhwc(a, k.ctx.stream).with_context(node_label(k.node));
}

Status run_spatial_mean_nhwc(CudaKernelContext& k, const ConvKey& key, const void* y, void* mean) {
  Tensor hold;
  GPUOPT_ASSIGN_OR_RETURN(void* partial,
                          call_workspace(k.ctx, depthwise_mean_workspace(key.n, key.m, key.oh), &hold));
  return launch_spatial_mean_nhwc(key.dt, y, key.n, key.oh, key.ow, key.m, mean, partial, k.ctx.stream)
      .with_context(node_label(k.node));
}

}  // namespace gpuopt::cuda
