// MaxPool, AveragePool (2-D windows) and the global pools on the GPU (kernels in ops/norm/cuda/norm.cu).
#include "backends/cuda/cuda_ops.h"
#include "ops/norm/cuda/norm.h"
#include "ops/pool/cuda/pool.h"

namespace gpuopt::cuda {
namespace {

Status run_maxpool(CudaKernelContext& k) { return run_pool2d(k, true, false); }
Status run_avgpool(CudaKernelContext& k) { return run_pool2d(k, false, false); }
bool pool_supported(const Node& n, const std::vector<DType>& in) {
  if (!first_float(n, in) || n.attr_ints("kernel_shape").size() != 2) return false;
  if (n.attr_s("auto_pad", "NOTSET") != "NOTSET" && n.attr_s("auto_pad", "NOTSET") != "VALID") return false;
  // MaxPool's optional Indices output stays on the CPU.
  return n.outputs.size() < 2 || n.outputs[1] == kNoValue;
}

template <ReduceOp kOp>
Status run_global_pool(CudaKernelContext& k) {
  const Tensor& x = k.in(0);
  std::vector<bool> reduced(static_cast<size_t>(x.rank()), false);
  for (int64_t i = 2; i < x.rank(); ++i) reduced[static_cast<size_t>(i)] = true;
  return launch_reduce(kOp, x.dtype(), x.raw(), k.out(0).raw(), x.shape(), reduced, k.ctx.stream);
}

}  // namespace

Status run_pool2d(CudaKernelContext& k, bool max, bool nhwc) {
  const Tensor& x = k.in(0);
  Tensor& y = k.out(0);
  const auto ks = k.node.attr_ints("kernel_shape");
  const auto st = k.node.attr_ints("strides", {1, 1});
  const auto pads = k.node.attr_ints("pads", {0, 0, 0, 0});
  const auto dl = k.node.attr_ints("dilations", {1, 1});
  const int c = nhwc ? 3 : 1, h = nhwc ? 1 : 2;  // channel axis, first spatial axis
  Pool2d p{x.shape()[0], x.shape()[c], x.shape()[h], x.shape()[h + 1], y.shape()[h], y.shape()[h + 1],
           ks[0],        ks[1],        st[0],        st[1],            pads[0],      pads[1],
           dl[0],        dl[1],        max,          k.node.attr_i("count_include_pad", 0) != 0, nhwc};
  return launch_pool2d(x.dtype(), x.raw(), y.raw(), p, k.ctx.stream);
}

GPUOPT_CUDA_OP(MaxPool, &run_maxpool, &pool_supported);
GPUOPT_CUDA_OP(AveragePool, &run_avgpool, &pool_supported);
GPUOPT_CUDA_OP(GlobalAveragePool, &run_global_pool<ReduceOp::kMean>, &first_float);
GPUOPT_CUDA_OP(GlobalMaxPool, &run_global_pool<ReduceOp::kMax>, &first_float);

}  // namespace gpuopt::cuda
