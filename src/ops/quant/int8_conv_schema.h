// Int8Conv's inputs and attributes (ai.gpuopt, written by fold_qdq and fuse_int8_residual), named
// once for the CPU reference (int8_conv.cpp), the CUDA kernel (cuda/int8_conv.cpp) and the
// passes. The semantics are in int8_conv.cpp's header comment.
#pragma once

#include <cstddef>

namespace gpuopt::int8conv {

enum Input : size_t {
  kX = 0,     // int8 activation
  kW,         // int8 weight (constant)
  kXScale,    // scalar
  kWScale,    // scalar or [M]
  kBias,      // [M], optional
  kYScale,    // scalar, optional: the conv's int8 output scale (required with a residual)
  kZ,         // residual form: int8 tensor of Y's shape, optional
  kZScale,    //   its scale (scalar; required with Z)
  kOutScale,  //   the output scale after the residual add (scalar, optional: float output)
  kNumInputs
};

inline constexpr const char* kActivation = "activation";                   // "" or "Relu", before the residual
inline constexpr const char* kResidualActivation = "residual_activation";  // "" or "Relu", after it
inline constexpr const char* kChannelsLast = "channels_last";              // 0 or 1

}  // namespace gpuopt::int8conv
