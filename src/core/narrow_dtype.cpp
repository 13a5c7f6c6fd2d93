#include "core/narrow_dtype.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>

namespace gpuopt {
namespace {

// How a narrow float type spends its bits and where its NaN/Inf live.
enum class Special : uint8_t {
  kFn,    // no Inf; S.1111.111 is NaN (e4m3fn)
  kFnuz,  // no Inf, no -0; 0x80 is the only NaN (e4m3fnuz, e5m2fnuz)
  kIeee,  // exponent all ones: Inf (mantissa 0) or NaN (e5m2)
  kNone,  // no Inf, no NaN (e2m1)
};

struct FloatFormat {
  int bits, mbits, bias;
  Special special;
  uint8_t max_code;  // largest finite magnitude code
};

const FloatFormat* float_format(DType t) {
  static constexpr FloatFormat kE4M3FN{8, 3, 7, Special::kFn, 0x7E};
  static constexpr FloatFormat kE4M3FNUZ{8, 3, 8, Special::kFnuz, 0x7F};
  static constexpr FloatFormat kE5M2{8, 2, 15, Special::kIeee, 0x7B};
  static constexpr FloatFormat kE5M2FNUZ{8, 2, 16, Special::kFnuz, 0x7F};
  static constexpr FloatFormat kE2M1{4, 1, 1, Special::kNone, 0x7};
  switch (t) {
    case DType::F8E4M3FN: return &kE4M3FN;
    case DType::F8E4M3FNUZ: return &kE4M3FNUZ;
    case DType::F8E5M2: return &kE5M2;
    case DType::F8E5M2FNUZ: return &kE5M2FNUZ;
    case DType::F4E2M1: return &kE2M1;
    default: return nullptr;
  }
}

// Magnitude of a non-special code (sign bit clear).
double magnitude(const FloatFormat& f, unsigned mag) {
  const unsigned e = mag >> f.mbits, m = mag & ((1u << f.mbits) - 1);
  if (e == 0) return std::ldexp(static_cast<double>(m), 1 - f.bias - f.mbits);
  return std::ldexp(static_cast<double>((1u << f.mbits) + m), static_cast<int>(e) - f.bias - f.mbits);
}

double float_to_f64(const FloatFormat& f, uint8_t code) {
  const unsigned sign_bit = 1u << (f.bits - 1), mag = code & (sign_bit - 1);
  const bool neg = (code & sign_bit) != 0;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  switch (f.special) {
    case Special::kFn:
      if (mag == 0x7F) return nan;
      break;
    case Special::kFnuz:
      if (code == 0x80) return nan;
      break;
    case Special::kIeee:
      if ((mag >> f.mbits) == 0x1F) return (mag & 3) ? nan : (neg ? -INFINITY : INFINITY);
      break;
    case Special::kNone: break;
  }
  const double v = magnitude(f, mag);
  return neg ? -v : v;
}

uint8_t nan_code(const FloatFormat& f, bool neg) {
  switch (f.special) {
    case Special::kFn: return neg ? 0xFF : 0x7F;
    case Special::kFnuz: return 0x80;
    case Special::kIeee: return neg ? 0xFE : 0x7E;
    case Special::kNone: return 0x8;  // what ml_dtypes gives: e2m1 has no NaN, -0 stands in
  }
  return 0;
}

uint8_t float_from_f64(const FloatFormat& f, double v, bool saturate) {
  const uint8_t sign_bit = static_cast<uint8_t>(1u << (f.bits - 1));
  const bool neg = std::signbit(v);
  if (std::isnan(v)) return nan_code(f, neg);
  double a = std::fabs(v);
  const double max = magnitude(f, f.max_code);
  if (saturate || f.special == Special::kNone) a = std::min(a, max);
  unsigned code;
  if (std::isinf(a)) {
    code = f.max_code + 1u;  // overflow
  } else {
    // Largest code whose magnitude is <= a, then round to nearest, ties to the even code. The
    // code after max_code stands for overflow (its magnitude one step of max's exponent above).
    unsigned lo = 0, hi = f.max_code;
    while (lo < hi) {
      const unsigned mid = (lo + hi + 1) / 2;
      if (magnitude(f, mid) <= a) lo = mid;
      else hi = mid - 1;
    }
    code = lo;
    const double below = magnitude(f, lo);
    if (below < a) {
      const double above = lo < f.max_code ? magnitude(f, lo + 1) : max + (max - magnitude(f, f.max_code - 1u));
      const double d_lo = a - below, d_hi = above - a;
      if (d_hi < d_lo || (d_hi == d_lo && (lo & 1u))) code = lo + 1;
    }
  }
  if (code > f.max_code) {  // only without saturation
    if (f.special == Special::kIeee) return static_cast<uint8_t>((neg ? sign_bit : 0) | 0x7C);
    return nan_code(f, neg);
  }
  if (code == 0 && f.special == Special::kFnuz) return 0;  // no negative zero
  return static_cast<uint8_t>((neg ? sign_bit : 0) | code);
}

// ONNX's to_float8e8m0 (onnx.numpy_helper), on the float32 bits of v.
uint8_t e8m0_from_f64(double v, NarrowCast how) {
  const float x = static_cast<float>(v);
  uint32_t bits;
  std::memcpy(&bits, &x, 4);
  unsigned e = (bits >> 23) & 0xFF;
  if (e == 0xFF) return 0xFF;
  const uint32_t frac = bits & 0x7FFFFF;
  bool up = false;
  if (how.round == E8M0Round::kNearest) {
    const bool g = bits & 0x400000, r = bits & 0x200000, s = bits & 0x1FFFFF, lsb = e > 0;
    up = g && (r || s || lsb);
  } else if (how.round == E8M0Round::kUp) {
    up = frac != 0;
  }
  if (up && how.saturate && e == 0xFE) up = false;
  if (up) ++e;
  return static_cast<uint8_t>(e & 0xFF);
}

struct IntRange {
  int64_t lo, hi;
  int bits;
};

IntRange int_range(DType t) {
  switch (t) {
    case DType::I4: return {-8, 7, 4};
    case DType::U4: return {0, 15, 4};
    case DType::I2: return {-2, 1, 2};
    default: return {0, 3, 2};  // U2
  }
}

}  // namespace

double narrow_to_f64(DType t, uint8_t bits) {
  if (const FloatFormat* f = float_format(t)) return float_to_f64(*f, bits);
  if (t == DType::F8E8M0) return bits == 0xFF ? std::numeric_limits<double>::quiet_NaN() : std::ldexp(1.0, bits - 127);
  if (t == DType::I4 || t == DType::I2) return static_cast<double>(static_cast<int8_t>(bits));
  return static_cast<double>(bits);
}

uint8_t narrow_from_f64(DType t, double v, NarrowCast how) {
  if (const FloatFormat* f = float_format(t)) return float_from_f64(*f, v, how.saturate);
  if (t == DType::F8E8M0) return e8m0_from_f64(v, how);
  const IntRange r = int_range(t);
  // Truncate, keep the low bits, sign-extend the signed types (as ml_dtypes' astype does).
  const int64_t i = std::isfinite(v) && std::fabs(v) < 9.2e18 ? static_cast<int64_t>(v) : 0;
  const uint64_t mask = (uint64_t{1} << r.bits) - 1;
  uint64_t low = static_cast<uint64_t>(i) & mask;
  if (r.lo < 0 && (low >> (r.bits - 1))) low |= ~mask;  // sign-extend
  return static_cast<uint8_t>(low);
}

double narrow_max(DType t) {
  if (const FloatFormat* f = float_format(t)) return magnitude(*f, f->max_code);
  if (t == DType::F8E8M0) return std::ldexp(1.0, 127);
  return static_cast<double>(int_range(t).hi);
}

double narrow_min(DType t) {
  if (float_format(t)) return -narrow_max(t);
  if (t == DType::F8E8M0) return std::ldexp(1.0, -127);
  return static_cast<double>(int_range(t).lo);
}

void narrow_unpack(DType t, const uint8_t* packed, int64_t numel, uint8_t* out) {
  const int bits = dtype_bits(t);
  if (bits == 8) {
    if (numel) std::memcpy(out, packed, static_cast<size_t>(numel));
    return;
  }
  const unsigned per = 8u / static_cast<unsigned>(bits), mask = (1u << bits) - 1;
  const bool is_signed = t == DType::I4 || t == DType::I2;
  for (int64_t i = 0; i < numel; ++i) {
    unsigned v = (packed[i / per] >> ((i % per) * static_cast<unsigned>(bits))) & mask;
    if (is_signed && (v >> (bits - 1))) v |= ~mask;
    out[i] = static_cast<uint8_t>(v);
  }
}

std::string narrow_pack(DType t, const uint8_t* elems, int64_t numel) {
  std::string out(narrow_packed_bytes(t, numel), '\0');
  const int bits = dtype_bits(t);
  if (bits == 8) {
    if (numel) std::memcpy(out.data(), elems, static_cast<size_t>(numel));
    return out;
  }
  const unsigned per = 8u / static_cast<unsigned>(bits), mask = (1u << bits) - 1;
  for (int64_t i = 0; i < numel; ++i)
    out[static_cast<size_t>(i / per)] = static_cast<char>(static_cast<uint8_t>(out[static_cast<size_t>(i / per)]) |
                                                          ((elems[i] & mask) << ((i % per) * static_cast<unsigned>(bits))));
  return out;
}

}  // namespace gpuopt
