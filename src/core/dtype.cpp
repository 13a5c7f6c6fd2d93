#include "core/dtype.h"

#include <cmath>
#include <string>

namespace gpuopt {

size_t dtype_size(DType t) {
  switch (t) {
#define GPUOPT_X(name, id, ctype, size, sname, kname, np) \
  case DType::name: return size;
    GPUOPT_DTYPES(GPUOPT_X)
#undef GPUOPT_X
    case DType::Undefined: return 0;
  }
  return 0;
}

std::string_view dtype_name(DType t) {
  switch (t) {
#define GPUOPT_X(name, id, ctype, size, sname, kname, np) \
  case DType::name: return sname;
    GPUOPT_DTYPES(GPUOPT_X)
#undef GPUOPT_X
    case DType::Undefined: return "undefined";
  }
  return "undefined";
}

std::string_view dtype_kserve_name(DType t) {
  switch (t) {
#define GPUOPT_X(name, id, ctype, size, sname, kname, np) \
  case DType::name: return kname;
    GPUOPT_DTYPES(GPUOPT_X)
#undef GPUOPT_X
    case DType::Undefined: return "INVALID";
  }
  return "INVALID";
}

std::optional<DType> dtype_from_name(std::string_view n) {
#define GPUOPT_X(name, id, ctype, size, sname, kname, np) \
  if (n == sname) return DType::name;
  GPUOPT_DTYPES(GPUOPT_X)
#undef GPUOPT_X
  static constexpr std::pair<std::string_view, DType> kAliases[] = {
      {"float32", DType::F32}, {"float", DType::F32},   {"float16", DType::F16}, {"half", DType::F16},
      {"bfloat16", DType::BF16}, {"float64", DType::F64}, {"double", DType::F64}, {"int8", DType::I8},
      {"uint8", DType::U8},     {"int16", DType::I16},   {"uint16", DType::U16}, {"int32", DType::I32},
      {"uint32", DType::U32},   {"int64", DType::I64},   {"uint64", DType::U64}, {"fp32", DType::F32},
      {"fp16", DType::F16}};
  for (auto& [a, t] : kAliases)
    if (n == a) return t;
  return std::nullopt;
}

std::optional<DType> dtype_from_kserve(std::string_view n) {
  // Narrow types have no KServe datatype: the protocol cannot carry them.
#define GPUOPT_X(name, id, ctype, size, sname, kname, np) \
  if (n == kname && !dtype_is_narrow(DType::name)) return DType::name;
  GPUOPT_DTYPES(GPUOPT_X)
#undef GPUOPT_X
  return std::nullopt;
}

std::optional<DType> dtype_from_onnx(int id) {
  switch (id) {
#define GPUOPT_X(name, oid, ctype, size, sname, kname, np) \
  case oid: return DType::name;
    GPUOPT_DTYPES(GPUOPT_X)
#undef GPUOPT_X
    default: return std::nullopt;
  }
}

bool dtype_is_float(DType t) {
  return t == DType::F32 || t == DType::F16 || t == DType::BF16 || t == DType::F64;
}

bool dtype_is_integer(DType t) {
  switch (t) {
    case DType::U8: case DType::I8: case DType::U16: case DType::I16: case DType::I32:
    case DType::I64: case DType::U32: case DType::U64:
      return true;
    default:
      return false;
  }
}

bool dtype_is_narrow(DType t) {
  return static_cast<int>(t) >= static_cast<int>(DType::F8E4M3FN) && static_cast<int>(t) <= static_cast<int>(DType::I2);
}

int dtype_bits(DType t) {
  switch (t) {
    case DType::U4: case DType::I4: case DType::F4E2M1: return 4;
    case DType::U2: case DType::I2: return 2;
    default: return static_cast<int>(8 * dtype_size(t));
  }
}

uint16_t Half::from_float(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u;
  x &= 0x7fffffffu;
  if (x > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);  // NaN
  if (x >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow -> Inf (>= 65520)
  if (x < 0x38800000u) {  // subnormal half or zero: round to nearest even at 2^-24
    const float a = std::fabs(f) * 16777216.0f;  // scale so one half-subnormal ulp = 1
    const float r = std::nearbyint(a);           // default rounding mode: nearest even
    return static_cast<uint16_t>(sign | static_cast<uint32_t>(r));
  }
  // normal: rebias exponent, round mantissa 23 -> 10 bits to nearest even
  uint32_t h = ((x >> 13) - (112u << 10));
  const uint32_t rem = x & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;
  return static_cast<uint16_t>(sign | h);
}

float Half::to_float(uint16_t h) {
  const uint32_t sign = (static_cast<uint32_t>(h) & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t man = h & 0x3ffu;
  if (exp == 0) {
    const float v = std::ldexp(static_cast<float>(man), -24);
    return sign ? -v : v;
  }
  uint32_t u;
  if (exp == 31) u = sign | 0x7f800000u | (man << 13);
  else u = sign | ((exp + 112u) << 23) | (man << 13);
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

}  // namespace gpuopt
