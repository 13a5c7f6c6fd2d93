// FP8 e4m3fn (OCP "E4M3", NVIDIA __nv_fp8_e4m3): 1 sign bit, 4 exponent bits (bias 7), 3
// mantissa bits, no infinities, S.1111.111 is NaN; largest finite 448, smallest subnormal 2^-9.
// Shared by the Fp8Gemm CPU reference (fp8_gemm.cpp), the CUDA quantize kernel
// (cuda/fp8_gemm.cu) and the fp8 rewrite pass, so all three round the same way.
//
// float -> e4m3 rounds to nearest, ties to even, and saturates: |x| >= 448 (and +-inf) gives
// +-448, NaN stays NaN (what cuBLASLt and __nv_cvt_float_to_fp8(.., __NV_SATFINITE, ..) do).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#ifdef __CUDACC__
#define GPUOPT_FP8_HD __host__ __device__
#else
#define GPUOPT_FP8_HD
#endif

namespace gpuopt::fp8 {

constexpr float kE4M3Max = 448.0f;
constexpr uint8_t kE4M3NaN = 0x7F;

GPUOPT_FP8_HD inline uint32_t f32_bits(float f) {
#ifdef __CUDA_ARCH__
  return __float_as_uint(f);
#else
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
#endif
}

// s rounded to an integer, ties to even. s is small and non-negative here (< 2^24), so
// floor and the difference are exact.
GPUOPT_FP8_HD inline float round_half_even(float s) {
  float r = floorf(s);
  const float d = s - r;
  if (d > 0.5f || (d == 0.5f && fmodf(r, 2.0f) != 0.0f)) r += 1.0f;
  return r;
}

// The e4m3fn bit pattern of x (round to nearest even, saturating, NaN -> 0x7F with x's sign).
GPUOPT_FP8_HD inline uint8_t f32_to_e4m3(float x) {
  const uint32_t bits = f32_bits(x);
  const uint8_t sign = static_cast<uint8_t>((bits >> 24) & 0x80u);
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint8_t>(sign | kE4M3NaN);
  const float a = fabsf(x);
  if (a >= kE4M3Max) return static_cast<uint8_t>(sign | 0x7E);  // +-448, also for +-inf
  if (a < 0.015625f) {                                           // below 2^-6: subnormal steps of 2^-9
    const float q = round_half_even(a * 512.0f);                 // 0..8; 8 is the smallest normal
    return static_cast<uint8_t>(sign | static_cast<uint8_t>(q));
  }
  const int e = static_cast<int>((bits >> 23) & 0xFFu) - 127;  // a in [2^e, 2^(e+1)), e in [-6, 8]
  const float q = round_half_even(ldexpf(a, 3 - e));           // in [8, 16]; 16 carries into e+1
  const int code = ((e + 7) << 3) + static_cast<int>(q) - 8;
  return static_cast<uint8_t>(sign | (code > 0x7E ? 0x7E : code));
}

// The float an e4m3fn bit pattern stands for (exact).
GPUOPT_FP8_HD inline float e4m3_to_f32(uint8_t c) {
  const int exp = (c >> 3) & 0xF, man = c & 0x7;
  float v;
  if (exp == 0xF && man == 0x7)
    v = NAN;
  else if (exp == 0)
    v = ldexpf(static_cast<float>(man), -9);
  else
    v = ldexpf(static_cast<float>(8 + man), exp - 10);
  return (c & 0x80) ? -v : v;
}

// x rounded to the nearest e4m3 value (saturating), as a float.
GPUOPT_FP8_HD inline float round_e4m3(float x) {
  return e4m3_to_f32(f32_to_e4m3(x));
}

}  // namespace gpuopt::fp8
