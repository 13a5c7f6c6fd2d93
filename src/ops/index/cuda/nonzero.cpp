// NonZero on the GPU (kernels/nonzero.cu). The output's shape [rank, count] depends on the data:
// the executor works it out from a host copy of the input before the launch, so here the
// output is already allocated and the kernel only writes the indices.
#include "backends/cuda/cuda_ops.h"
#include "backends/cuda/device_memory.h"
#include "ops/index/cuda/nonzero.h"

namespace gpuopt::cuda {
namespace {

Status run_nonzero(CudaKernelContext& k) {
  const Tensor& x = k.in(0);
  Tensor& y = k.out(0);
  const int64_t rows = x.rank() == 0 ? 1 : x.rank();
  if (y.dtype() != DType::I64 || y.rank() != 2 || y.shape()[0] != rows)
    return k.error("output {} {} is not int64 [{}, count]", dtype_name(y.dtype()), shape_to_string(y.shape()), rows);
  size_t bytes = 0;
  Status st = nonzero_scratch_bytes(x.dtype(), x.numel(), &bytes);
  if (!st.ok()) return k.error("{}", st.message());
  void* scratch = k.ctx.workspace;
  size_t avail = k.ctx.workspace_bytes;
  Tensor extra;  // only when the context's workspace is too small; back to the pool on return, stream-ordered
  if (bytes > avail) {
    if (!k.ctx.memory)
      return k.error("needs {} bytes of scratch for {} elements; the workspace has {}", bytes, x.numel(), avail);
    GPUOPT_ASSIGN_OR_RETURN(extra, k.ctx.memory->alloc(DType::U8, {static_cast<int64_t>(bytes)}, k.ctx.stream,
                                                       node_label(k.node) + " scratch"));
    scratch = extra.raw();
    avail = bytes;
  }
  st = launch_nonzero(x.dtype(), x.raw(), x.shape(), y.shape()[1], y.data<int64_t>(), scratch, avail, k.ctx.stream);
  return st.ok() ? st : k.error("{}", st.message());
}

bool nonzero_types(const Node&, const std::vector<DType>& in) {
  return in.size() == 1 && nonzero_dtype_supported(in[0]);
}

}  // namespace

GPUOPT_CUDA_OP(NonZero, &run_nonzero, &nonzero_types);

}  // namespace gpuopt::cuda
