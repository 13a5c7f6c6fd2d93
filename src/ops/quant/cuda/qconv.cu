// QLinearConv kernel (see qconv.h).
#include "ops/quant/cuda/qconv.h"
#include "backends/cuda/kernels/kernel_common.cuh"
#include "core/cuda_check.h"

#include <cuda_runtime.h>

namespace gpuopt::cuda {
namespace {

constexpr int kThreads = 128;
unsigned grid_for(int64_t n) { return kern::grid_for(n, kThreads); }

__global__ void qconv_kernel(QConvDesc d, const void* __restrict__ x, const void* __restrict__ w,
                             const void* __restrict__ w_zp, const float* __restrict__ w_scale,
                             const int32_t* __restrict__ bias, void* __restrict__ y) {
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < d.numel; e += int64_t(gridDim.x) * blockDim.x) {
    int64_t m = 0;
    const int64_t acc = qconv_sum(d, e, x, w, w_zp, bias, &m);
    const double v = requantize(acc, d.x_scale, w_scale[d.w_scale_count == 1 ? 0 : m], d.scale_t, d.y_scale, d.y_zp,
                                d.y_signed ? -128.0 : 0.0, d.y_signed ? 127.0 : 255.0);
    if (d.y_signed) static_cast<int8_t*>(y)[e] = static_cast<int8_t>(v);
    else static_cast<uint8_t*>(y)[e] = static_cast<uint8_t>(v);
  }
}

}  // namespace

Status launch_qlinear_conv(const QConvDesc& d, const void* x, const void* w, const void* w_zp, const float* w_scale,
                           const int32_t* bias, void* y, cudaStream_t s) {
  if (d.numel == 0) return Status::Ok();
  qconv_kernel<<<grid_for(d.numel), kThreads, 0, s>>>(d, x, w, w_zp, w_scale, bias, y);
  GPUOPT_CHECK_CALL(cudaGetLastError());
  return Status::Ok();
}

}  // namespace gpuopt::cuda
