// call_workspace (cuda_ops.h): the context's workspace, or a pool allocation for one call; and
// the context's kernel settings.
#include "backends/cuda/cuda_ops.h"
#include "backends/cuda/device_memory.h"
#include "gpuopt/kernel_settings.h"

namespace gpuopt::cuda {

const KernelSettings& ExecContext::kernels() const {
  static const KernelSettings kDefaults;
  return settings ? *settings : kDefaults;
}

Result<void*> call_workspace(ExecContext& ctx, size_t bytes, Tensor* hold) {
  if (bytes <= ctx.workspace_bytes) return ctx.workspace;
  if (!ctx.memory)
    return Status::OutOfMemory("{} bytes of library workspace needed, {} available and no device memory pool to take more",
                                     bytes, ctx.workspace_bytes);
  GPUOPT_ASSIGN_OR_RETURN(*hold, ctx.memory->alloc(DType::U8, Shape{static_cast<int64_t>(bytes)}, ctx.stream,
                                                   "library workspace"));
  return hold->raw();
}

}  // namespace gpuopt::cuda
