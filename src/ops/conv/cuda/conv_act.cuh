// The convolution epilogue's activation on the device (ops/conv/conv_activation.h), in f32:
// the same formulas as the CPU reference (ops/conv/fused_conv.cpp) and the unary kernels.
#pragma once

#include "ops/conv/conv_activation.h"

namespace gpuopt::cuda {

__device__ __forceinline__ float apply_conv_act(ConvAct a, float v) {
  switch (a) {
    case ConvAct::kRelu:
      return v > 0.f ? v : 0.f;
    case ConvAct::kHardSwish:
      return v * fminf(fmaxf(v * (1.f / 6.f) + 0.5f, 0.f), 1.f);
    case ConvAct::kSwish:
      return v / (1.f + __expf(-v));
    case ConvAct::kNone:
      break;
  }
  return v;
}

}  // namespace gpuopt::cuda
