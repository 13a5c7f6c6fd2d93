// CumSum and CumProd on the GPU (kernels/scan.cu); the axis input is read on the host.
#include "backends/cuda/cuda_ops.h"
#include "ops/reduce/cuda/scan.h"

namespace gpuopt::cuda {
namespace {

template <bool kProd>
Status run_scan(CudaKernelContext& k) {
  const Tensor& x = k.in(0);
  if (!k.host[1] || k.host[1]->numel() < 1) return k.error("axis must be a single value");
  int64_t axis = k.host[1]->get_i64(0);
  if (x.rank() == 0 || !normalize_axis(&axis, x.rank()))
    return k.error("axis {} is out of range for rank {}", k.host[1]->get_i64(0), x.rank());
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= x.dim(d);
  for (int64_t d = axis + 1; d < x.rank(); ++d) inner *= x.dim(d);
  return launch_scan(x.dtype(), x.raw(), k.out(0).raw(), outer, x.dim(axis), inner, kProd,
                     k.node.attr_i("exclusive", 0) != 0, k.node.attr_i("reverse", 0) != 0, k.ctx.stream);
}

// f32/f64/f16/bf16/i32/i64 data, an i32/i64 axis.
bool scan_supported(const Node&, const std::vector<DType>& in) {
  if (in.size() != 2 || (in[1] != DType::I32 && in[1] != DType::I64)) return false;
  switch (in[0]) {
    case DType::F32: case DType::F64: case DType::F16: case DType::BF16: case DType::I32: case DType::I64: return true;
    default: return false;
  }
}

}  // namespace

GPUOPT_CUDA_OP(CumSum, &run_scan<false>, &scan_supported, host_inputs_mask({1}));
GPUOPT_CUDA_OP(CumProd, &run_scan<true>, &scan_supported, host_inputs_mask({1}));

}  // namespace gpuopt::cuda
