// Arithmetic of the CUDA quantization kernels (quant.cu, qmatmul.cu), shared with the host unit
// test that checks it against the CPU reference without a GPU.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>

#ifdef __CUDACC__
#define GPUOPT_QUANT_HD __host__ __device__
#else
#define GPUOPT_QUANT_HD
#endif

namespace gpuopt::cuda {

// Float types the scales may have.
enum class QFloat : uint8_t { kF32, kF16, kBF16 };

GPUOPT_QUANT_HD inline float quant_to_f32(double v) {
#ifdef __CUDA_ARCH__
  return __double2float_rn(v);
#else
  return static_cast<float>(v);
#endif
}

// v rounded to the precision of float type t via f32 (the CPU reference's round_to).
GPUOPT_QUANT_HD inline double quant_round_to(QFloat t, double v) {
  const float f = quant_to_f32(v);
  if (t == QFloat::kF16) return __half2float(__float2half_rn(f));
  if (t == QFloat::kBF16) return __bfloat162float(__float2bfloat16_rn(f));
  return f;
}

// QuantizeLinear of one value: x / scale in double rounded to the scale's type, half to even,
// plus the zero point, saturated to [lo, hi].
GPUOPT_QUANT_HD inline double quantize_value(double x, double scale, QFloat scale_t, double zp, double lo, double hi) {
  const double v = rint(quant_round_to(scale_t, x / scale)) + zp;
  return fmin(fmax(v, lo), hi);
}

// quantize_value for an x and a scale that are exact f32 values (f32, f16 or bf16 data), in f32:
// the f32 quotient is the f64 quotient rounded to f32 (double rounding is innocuous for a
// division when the wide format has at least 2p + 2 bits, 53 >= 2 * 24 + 2: Figueroa 1995), so
// the result equals quantize_value's without a double division per element.
GPUOPT_QUANT_HD inline float quantize_value_f32(float x, float scale, QFloat scale_t, float zp, float lo, float hi) {
#ifdef __CUDA_ARCH__
  float q = __fdiv_rn(x, scale);
#else
  float q = x / scale;
#endif
  if (scale_t == QFloat::kF16) q = __half2float(__float2half_rn(q));
  else if (scale_t == QFloat::kBF16) q = __bfloat162float(__float2bfloat16_rn(q));
  return fminf(fmaxf(rintf(q) + zp, lo), hi);
}

// DequantizeLinear of one value: (x - zp) * scale computed in f32 (exact difference, one rounding).
GPUOPT_QUANT_HD inline float dequantize_value(double x, double zp, double scale) {
#ifdef __CUDA_ARCH__
  return __double2float_rn(__dmul_rn(x - zp, scale));
#else
  return static_cast<float>((x - zp) * scale);
#endif
}

// QLinearMatMul's requantization of an exact integer sum: the multiplier (a_scale * b_scale) /
// y_scale rounded to the scales' type at each step, applied in double, half to even, saturated.
GPUOPT_QUANT_HD inline double requantize(int64_t acc, double a_scale, double b_scale, QFloat t, double y_scale,
                                         double y_zp, double lo, double hi) {
#ifdef __CUDA_ARCH__
  const double mult = quant_round_to(t, __ddiv_rn(quant_round_to(t, __dmul_rn(a_scale, b_scale)), y_scale));
  const double v = rint(__dadd_rn(__dmul_rn(static_cast<double>(acc), mult), y_zp));
#else
  const double mult = quant_round_to(t, quant_round_to(t, a_scale * b_scale) / y_scale);
  const double v = rint(static_cast<double>(acc) * mult + y_zp);
#endif
  return fmin(fmax(v, lo), hi);
}

}  // namespace gpuopt::cuda
