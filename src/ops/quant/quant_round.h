// QuantizeLinear's rounding of one value to int8 (zero point 0), for the CPU kernels that
// quantize in their epilogue (Int8Gemm's y_scale, SkipLayerNormalization's int8 output): x / scale
// rounded to the float type `calc` (the scale's type, as ONNX's reference and cpu_QuantizeLinear
// divide), then half to even (the default rounding mode), saturated to [-128, 127].
#pragma once

#include "core/dtype.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace gpuopt::quant {

inline double round_to_float_type(DType t, double v) {
  switch (t) {
    case DType::F32: return static_cast<float>(v);
    case DType::F16: return static_cast<float>(Half(static_cast<float>(v)));
    case DType::BF16: return static_cast<float>(BFloat16(static_cast<float>(v)));
    default: return v;
  }
}

inline int8_t quantize_int8(double x, double scale, DType calc) {
  const double r = std::nearbyint(round_to_float_type(calc, x / scale));
  return static_cast<int8_t>(std::isnan(r) ? 0.0 : std::clamp(r, -128.0, 127.0));
}

}  // namespace gpuopt::quant
