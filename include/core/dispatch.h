// Calls f(T{}) with T the C++ storage type of a numeric dtype (not String, not a narrow type):
//
//   dispatch_dtype(t.dtype(), [&](auto tag) { using T = decltype(tag); sum<T>(t); });
#pragma once

#include "core/dtype.h"
#include "core/status.h"

namespace gpuopt {

template <typename F>
decltype(auto) dispatch_dtype(DType t, F&& f) {
  switch (t) {
    case DType::F32: return f(float{});
    case DType::F64: return f(double{});
    case DType::F16: return f(Half{});
    case DType::BF16: return f(BFloat16{});
    case DType::I8: return f(int8_t{});
    case DType::U8: return f(uint8_t{});
    case DType::I16: return f(int16_t{});
    case DType::U16: return f(uint16_t{});
    case DType::I32: return f(int32_t{});
    case DType::U32: return f(uint32_t{});
    case DType::I64: return f(int64_t{});
    case DType::U64: return f(uint64_t{});
    case DType::Bool: return f(bool{});
    case DType::String:
    case DType::Undefined: break;
    default: break;  // narrow types (dtype_is_narrow) have no arithmetic storage type
  }
  GPUOPT_ASSERT(false, "dispatch_dtype: no numeric storage type for dtype {}", static_cast<int>(t));
  return f(float{});
}

// Element conversions through double (exact for every type but 64-bit ints above 2^53,
// which go through to_i64/from_i64 instead).
template <typename T>
inline double to_f64(T v) {
  if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) return static_cast<double>(static_cast<float>(v));
  else return static_cast<double>(v);
}
template <typename T>
inline T from_f64(double v) {
  if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) return T(static_cast<float>(v));
  else if constexpr (std::is_same_v<T, bool>) return v != 0.0;
  else return static_cast<T>(v);
}

}  // namespace gpuopt
