// ReduceMean/Sum/Max/Min/Prod/L2/SumSquare on the GPU (the row kernels in ops/norm/cuda/norm.cu).
#include "backends/cuda/cuda_ops.h"
#include "ops/norm/cuda/norm.h"

namespace gpuopt::cuda {
namespace {

template <ReduceOp kOp>
Status run_reduce(CudaKernelContext& k) {
  const Tensor& x = k.in(0);
  const int64_t r = x.rank();
  std::vector<int64_t> axes;
  if (k.host.size() > 1 && k.host[1]) axes = k.host[1]->to_i64_vector();
  else axes = k.node.attr_ints("axes");
  std::vector<bool> reduced(static_cast<size_t>(r), axes.empty() && k.node.attr_i("noop_with_empty_axes", 0) == 0);
  for (int64_t a : axes) {
    if (!normalize_axis(&a, r)) return k.error("axis out of range");
    reduced[static_cast<size_t>(a)] = true;
  }
  return launch_reduce(kOp, x.dtype(), x.raw(), k.out(0).raw(), x.shape(), reduced, k.ctx.stream);
}

}  // namespace

GPUOPT_CUDA_OP(ReduceMean, &run_reduce<ReduceOp::kMean>, &first_float, host_inputs_mask({1}));
GPUOPT_CUDA_OP(ReduceSum, &run_reduce<ReduceOp::kSum>, &first_float, host_inputs_mask({1}));
GPUOPT_CUDA_OP(ReduceMax, &run_reduce<ReduceOp::kMax>, &first_float, host_inputs_mask({1}));
GPUOPT_CUDA_OP(ReduceMin, &run_reduce<ReduceOp::kMin>, &first_float, host_inputs_mask({1}));
GPUOPT_CUDA_OP(ReduceProd, &run_reduce<ReduceOp::kProd>, &first_float, host_inputs_mask({1}));
GPUOPT_CUDA_OP(ReduceL2, &run_reduce<ReduceOp::kL2>, &first_float, host_inputs_mask({1}));
GPUOPT_CUDA_OP(ReduceSumSquare, &run_reduce<ReduceOp::kSumSquare>, &first_float, host_inputs_mask({1}));

}  // namespace gpuopt::cuda
