// launch_conv_epilogue (conv_epilogue.h): one grid-stride pass, 32-bit index math below 2^31.
#include "ops/conv/cuda/conv_epilogue.h"
#include "ops/conv/cuda/conv_act.cuh"
#include "backends/cuda/kernels/kernel_common.cuh"
#include "core/cuda_check.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

namespace gpuopt::cuda {
namespace {

constexpr int kThreads = 256;

__device__ __forceinline__ float f(float v) { return v; }
__device__ __forceinline__ float f(__half v) { return __half2float(v); }
__device__ __forceinline__ float f(__nv_bfloat16 v) { return __bfloat162float(v); }
template <typename T> __device__ __forceinline__ T to(float v);
template <> __device__ __forceinline__ float to<float>(float v) { return v; }
template <> __device__ __forceinline__ __half to<__half>(float v) { return __float2half_rn(v); }
template <> __device__ __forceinline__ __nv_bfloat16 to<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }

// kChannelsLast: y is [.., C] (spatial == 1), so the channel is i % C without the division.
template <typename T, typename I, bool kChannelsLast>
__global__ void epilogue(T* __restrict__ y, const T* __restrict__ bias, const T* __restrict__ z, I n, I channels,
                         I spatial, ConvAct act) {
  for (I i = blockIdx.x * I(blockDim.x) + threadIdx.x; i < n; i += I(gridDim.x) * I(blockDim.x)) {
    float v = f(y[i]);
    if (bias) v += f(bias[(kChannelsLast ? i : i / spatial) % channels]);
    if (z) v += f(z[i]);
    v = apply_conv_act(act, v);
    y[i] = to<T>(v);
  }
}

template <typename T>
void launch(void* y, const void* bias, const void* z, int64_t n, int64_t c, int64_t sp, ConvAct act, cudaStream_t s) {
  const unsigned blocks = kern::grid_for(n, kThreads);
  auto* yy = static_cast<T*>(y);
  const auto* bb = static_cast<const T*>(bias);
  const auto* zz = static_cast<const T*>(z);
  const bool last = sp == 1;
  if (n < (int64_t{1} << 31)) {
    auto* k = last ? &epilogue<T, uint32_t, true> : &epilogue<T, uint32_t, false>;
    k<<<blocks, kThreads, 0, s>>>(yy, bb, zz, uint32_t(n), uint32_t(c), uint32_t(sp), act);
  } else {
    auto* k = last ? &epilogue<T, int64_t, true> : &epilogue<T, int64_t, false>;
    k<<<blocks, kThreads, 0, s>>>(yy, bb, zz, n, c, sp, act);
  }
}

}  // namespace

Status launch_conv_epilogue(DType dt, void* y, const void* bias, const void* z, int64_t n, int64_t channels,
                            int64_t spatial, ConvAct act, cudaStream_t s) {
  if (n == 0) return Status::Ok();
  if (channels <= 0 || spatial <= 0) return Status::InvalidArgument("conv epilogue: {} channels of {}", channels, spatial);
  switch (dt) {
    case DType::F32: launch<float>(y, bias, z, n, channels, spatial, act, s); break;
    case DType::F16: launch<__half>(y, bias, z, n, channels, spatial, act, s); break;
    case DType::BF16: launch<__nv_bfloat16>(y, bias, z, n, channels, spatial, act, s); break;
    default: return Status::Unimplemented("conv epilogue: dtype {}", dtype_name(dt));
  }
  GPUOPT_CHECK_CALL(cudaGetLastError());
  return Status::Ok();
}

}  // namespace gpuopt::cuda
