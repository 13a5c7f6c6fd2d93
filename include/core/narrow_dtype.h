// Element conversions of the narrow dtypes (core/dtype.h: float8 e4m3fn/e4m3fnuz/e5m2/e5m2fnuz,
// float8 e8m0, float4 e2m1, int4/uint4, int2/uint2), as ONNX defines them (Cast's table, the
// reference's ml_dtypes conversions). A narrow element is one byte in memory: its bit pattern for
// the float types, its value (sign-extended) for the integer types.
//
//   uint8_t b = narrow_from_f64(DType::F8E4M3FN, 300.0, {.saturate = true});  // 0x79 (288)
//   double v = narrow_to_f64(DType::F8E4M3FN, b);                             // 288
#pragma once

#include "core/dtype.h"

#include <cstdint>
#include <string>

namespace gpuopt {

// How Cast rounds to e8m0 (its round_mode attribute); the other types round to nearest even.
enum class E8M0Round : uint8_t { kUp, kDown, kNearest };

struct NarrowCast {
  // Float8 only: out-of-range values (and infinities) clamp to the largest finite value; else
  // they become NaN, or Inf for e5m2. Float4 always saturates; e8m0 saturates at 2^127.
  bool saturate = true;
  E8M0Round round = E8M0Round::kUp;
};

// The value of one element (narrow dtype `t`); NaN/Inf where the type has them.
double narrow_to_f64(DType t, uint8_t bits);
// One element from `v`: floats round to nearest even; integers truncate toward zero and keep the
// low bits (two's complement), as a C cast to int8 then masking (ml_dtypes' astype; NaN and
// infinities give 0).
uint8_t narrow_from_f64(DType t, double v, NarrowCast how = {});
// Largest finite value of a narrow float type; the range limit of a narrow integer type.
double narrow_max(DType t);
double narrow_min(DType t);

// Unpacks ONNX's packed storage of `numel` elements (sub-byte types: low bits first; a signed
// type sign-extends) into one byte per element; other narrow types copy. `packed` holds at least
// (numel * dtype_bits(t) + 7) / 8 bytes.
void narrow_unpack(DType t, const uint8_t* packed, int64_t numel, uint8_t* out);
// The reverse, for writing ONNX tensors.
std::string narrow_pack(DType t, const uint8_t* elems, int64_t numel);
inline size_t narrow_packed_bytes(DType t, int64_t numel) {
  return (static_cast<size_t>(numel) * static_cast<size_t>(dtype_bits(t)) + 7) / 8;
}

}  // namespace gpuopt
