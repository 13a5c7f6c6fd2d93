// Einsum kernel (see einsum.h); the per-element sum is in einsum_math.h.
#include "ops/matmul/cuda/einsum_math.h"
#include "backends/cuda/kernels/kernel_common.cuh"
#include "core/cuda_check.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

namespace gpuopt::cuda {
namespace {

constexpr int kThreads = 128;
unsigned grid_for(int64_t n) { return kern::grid_for(n, kThreads); }

using kern::from_d;
using kern::to_d;

template <typename T>
__global__ void einsum_kernel(EinsumInputs in, T* __restrict__ y, EinsumDesc d) {
  for (int64_t o = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; o < d.out_n; o += int64_t(gridDim.x) * blockDim.x)
    y[o] = from_d<T>(einsum_point(d, o, [&in](int k, int64_t off) { return to_d(static_cast<const T*>(in.p[k])[off]); }));
}

}  // namespace

Status launch_einsum(DType dt, const EinsumInputs& in, void* y, const EinsumDesc& d, cudaStream_t s) {
  if (d.out_n == 0) return Status::Ok();
  switch (dt) {
    case DType::F32: einsum_kernel<float><<<grid_for(d.out_n), kThreads, 0, s>>>(in, static_cast<float*>(y), d); break;
    case DType::F16: einsum_kernel<__half><<<grid_for(d.out_n), kThreads, 0, s>>>(in, static_cast<__half*>(y), d); break;
    case DType::BF16:
      einsum_kernel<__nv_bfloat16><<<grid_for(d.out_n), kThreads, 0, s>>>(in, static_cast<__nv_bfloat16*>(y), d);
      break;
    default: return Status::Unimplemented("CUDA Einsum on dtype {}", dtype_name(dt));
  }
  GPUOPT_CHECK_CALL(cudaGetLastError());
  return Status::Ok();
}

}  // namespace gpuopt::cuda
