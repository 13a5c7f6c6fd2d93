// float -> e4m3 on the GPU, for the kernels that write FP8 GEMM inputs (Fp8Gemm's quantize,
// SkipLayerNormalization's e4m3 copy): on FP8 GPUs (sm_89+) the hardware's
// cvt.rn.satfinite.e4m3 (round to nearest even, saturating at +-448, NaN stays NaN: the rounding
// of fp8_e4m3.h, which older architectures run instead); backend-ops holds both to the CPU
// reference.
#pragma once

#include "ops/quant/fp8_e4m3.h"

#include <cuda_fp8.h>

#include <cstdint>

namespace gpuopt::cuda {

__device__ __forceinline__ uint32_t to_e4m3(float v) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  return __nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E4M3);
#else
  return fp8::f32_to_e4m3(v);
#endif
}

}  // namespace gpuopt::cuda
