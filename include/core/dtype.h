// Element types. The numbering follows ONNX TensorProto.DataType so the importer maps 1:1.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>

namespace gpuopt {

// X(Name, onnx_id, c_type_or_storage, size, short_name, kserve_name, numpy_descr)
#define GPUOPT_DTYPES(X)                                   \
  X(F32, 1, float, 4, "f32", "FP32", "<f4")               \
  X(U8, 2, uint8_t, 1, "u8", "UINT8", "|u1")              \
  X(I8, 3, int8_t, 1, "i8", "INT8", "|i1")                \
  X(U16, 4, uint16_t, 2, "u16", "UINT16", "<u2")          \
  X(I16, 5, int16_t, 2, "i16", "INT16", "<i2")            \
  X(I32, 6, int32_t, 4, "i32", "INT32", "<i4")            \
  X(I64, 7, int64_t, 8, "i64", "INT64", "<i8")            \
  X(String, 8, std::string, 0, "string", "BYTES", "")     \
  X(Bool, 9, bool, 1, "bool", "BOOL", "|b1")              \
  X(F16, 10, ::gpuopt::Half, 2, "f16", "FP16", "<f2")     \
  X(F64, 11, double, 8, "f64", "FP64", "<f8")             \
  X(U32, 12, uint32_t, 4, "u32", "UINT32", "<u4")         \
  X(U64, 13, uint64_t, 8, "u64", "UINT64", "<u8")         \
  X(BF16, 16, ::gpuopt::BFloat16, 2, "bf16", "BF16", "")                 \
  X(F8E4M3FN, 17, uint8_t, 1, "f8e4m3fn", "FP8E4M3FN", "")             \
  X(F8E4M3FNUZ, 18, uint8_t, 1, "f8e4m3fnuz", "FP8E4M3FNUZ", "")       \
  X(F8E5M2, 19, uint8_t, 1, "f8e5m2", "FP8E5M2", "")                   \
  X(F8E5M2FNUZ, 20, uint8_t, 1, "f8e5m2fnuz", "FP8E5M2FNUZ", "")       \
  X(U4, 21, uint8_t, 1, "u4", "UINT4", "")                             \
  X(I4, 22, int8_t, 1, "i4", "INT4", "")                               \
  X(F4E2M1, 23, uint8_t, 1, "f4e2m1", "FP4E2M1", "")                   \
  X(F8E8M0, 24, uint8_t, 1, "f8e8m0", "FP8E8M0", "")                   \
  X(U2, 25, uint8_t, 1, "u2", "UINT2", "")                             \
  X(I2, 26, int8_t, 1, "i2", "INT2", "")

enum class DType : uint8_t {
  Undefined = 0,
#define GPUOPT_X(name, id, ctype, size, sname, kname, np) name = id,
  GPUOPT_DTYPES(GPUOPT_X)
#undef GPUOPT_X
};

size_t dtype_size(DType t);               // bytes per element; 0 for String/Undefined
std::string_view dtype_name(DType t);     // "f32"
std::string_view dtype_kserve_name(DType t);  // "FP32"
std::optional<DType> dtype_from_name(std::string_view name);   // accepts "f32", "float32", "float"
std::optional<DType> dtype_from_kserve(std::string_view name);  // "FP32"
std::optional<DType> dtype_from_onnx(int onnx_type);
bool dtype_is_float(DType t);
bool dtype_is_integer(DType t);  // signed or unsigned; not Bool; not the narrow types below

// Narrow types (ONNX's float8, float4, e8m0, int4/uint4, int2/uint2): one byte per element in
// memory (sub-byte ones unpacked, signed ones sign-extended), packed low bits first only in ONNX
// files. Numeric ops do not take them (dispatch_dtype has no storage type for them): Cast,
// CastLike, QuantizeLinear, DequantizeLinear and pure data movement do. core/narrow_dtype.h
// converts their elements.
bool dtype_is_narrow(DType t);
// Bits per element in ONNX storage: 4 or 2 for sub-byte types, 8 * dtype_size otherwise.
int dtype_bits(DType t);

// IEEE half and bfloat16 storage with exact round-to-nearest-even conversions.
struct Half {
  uint16_t bits = 0;
  Half() = default;
  explicit Half(float f) : bits(from_float(f)) {}
  explicit operator float() const { return to_float(bits); }
  static uint16_t from_float(float f);
  static float to_float(uint16_t h);
};

struct BFloat16 {
  uint16_t bits = 0;
  BFloat16() = default;
  explicit BFloat16(float f) : bits(from_float(f)) {}
  explicit operator float() const { return to_float(bits); }
  static uint16_t from_float(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);  // quiet NaN
    u += 0x7fffu + ((u >> 16) & 1u);
    return static_cast<uint16_t>(u >> 16);
  }
  static float to_float(uint16_t b) {
    uint32_t u = static_cast<uint32_t>(b) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
};

}  // namespace gpuopt
