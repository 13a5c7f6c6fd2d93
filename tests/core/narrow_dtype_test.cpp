// Narrow dtypes: what the ONNX node tests do not reach (packing of odd element counts, the
// special values of each float8 kind from the ONNX Cast table). The conversions themselves are
// checked by the node tests (Cast/CastLike/QuantizeLinear/DequantizeLinear) in the conformance run.
#include "core/narrow_dtype.h"
#include "core/tensor.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace gpuopt {
namespace {

TEST(NarrowDtype, PackUnpackOddCounts) {
  // int4: 5 elements take 3 bytes, low nibble first, the last high nibble zero.
  const std::vector<uint8_t> i4 = {0xF9, 0x07, 0x00, 0xFF, 0xF8};  // -7, 7, 0, -1, -8 sign-extended
  const std::string packed = narrow_pack(DType::I4, i4.data(), 5);
  ASSERT_EQ(packed.size(), 3u);
  EXPECT_EQ(static_cast<uint8_t>(packed[0]), 0x79);
  EXPECT_EQ(static_cast<uint8_t>(packed[1]), 0xF0);
  EXPECT_EQ(static_cast<uint8_t>(packed[2]), 0x08);
  std::vector<uint8_t> back(5);
  narrow_unpack(DType::I4, reinterpret_cast<const uint8_t*>(packed.data()), 5, back.data());
  EXPECT_EQ(back, i4);
  for (size_t k = 0; k < back.size(); ++k)
    EXPECT_EQ(narrow_to_f64(DType::I4, back[k]), static_cast<double>(static_cast<int8_t>(i4[k])));
  // uint2: 6 elements in 2 bytes, two bits each from the low end.
  const std::vector<uint8_t> u2 = {3, 0, 1, 2, 1, 3};
  const std::string p2 = narrow_pack(DType::U2, u2.data(), 6);
  ASSERT_EQ(p2.size(), 2u);
  EXPECT_EQ(static_cast<uint8_t>(p2[0]), 0b10010011);
  EXPECT_EQ(static_cast<uint8_t>(p2[1]), 0b00001101);
  std::vector<uint8_t> b2(6);
  narrow_unpack(DType::U2, reinterpret_cast<const uint8_t*>(p2.data()), 6, b2.data());
  EXPECT_EQ(b2, u2);
}

TEST(NarrowDtype, Float8SpecialValues) {
  // ONNX's Cast table: saturate clamps +-Inf to +-max for e4m3fn and e5m2; without it, e4m3fn
  // has no Inf (NaN), e5m2 keeps Inf, the fnuz kinds have one NaN (0x80) and no -0.
  EXPECT_EQ(narrow_from_f64(DType::F8E4M3FN, INFINITY, {.saturate = true}), 0x7E);
  EXPECT_EQ(narrow_to_f64(DType::F8E4M3FN, 0x7E), 448.0);
  EXPECT_TRUE(std::isnan(narrow_to_f64(DType::F8E4M3FN, narrow_from_f64(DType::F8E4M3FN, 1e6, {.saturate = false}))));
  EXPECT_EQ(narrow_from_f64(DType::F8E5M2, -INFINITY, {.saturate = false}), 0xFC);
  EXPECT_EQ(narrow_to_f64(DType::F8E5M2, 0xFC), -INFINITY);
  EXPECT_EQ(narrow_from_f64(DType::F8E5M2, 1e9, {.saturate = true}), 0x7B);
  EXPECT_EQ(narrow_to_f64(DType::F8E5M2, 0x7B), 57344.0);
  EXPECT_EQ(narrow_from_f64(DType::F8E4M3FNUZ, -0.0), 0x00);
  EXPECT_EQ(narrow_from_f64(DType::F8E5M2FNUZ, NAN), 0x80);
  EXPECT_TRUE(std::isnan(narrow_to_f64(DType::F8E4M3FNUZ, 0x80)));
  EXPECT_EQ(narrow_to_f64(DType::F8E4M3FNUZ, 0x7F), 240.0);
  // Smallest subnormals: 2^-9 (e4m3fn), 2^-16 (e5m2); halfway rounds to even (zero).
  EXPECT_EQ(narrow_to_f64(DType::F8E4M3FN, 0x01), std::ldexp(1.0, -9));
  EXPECT_EQ(narrow_from_f64(DType::F8E4M3FN, std::ldexp(1.0, -10)), 0x00);
  EXPECT_EQ(narrow_from_f64(DType::F8E5M2, std::ldexp(3.0, -17)), 0x02);  // 1.5 ulps -> 2 (even)
  // e8m0: powers of two only, 0xFF is NaN.
  EXPECT_EQ(narrow_to_f64(DType::F8E8M0, 127), 1.0);
  EXPECT_TRUE(std::isnan(narrow_to_f64(DType::F8E8M0, 0xFF)));
}

TEST(NarrowDtype, TensorElementAccess) {
  Tensor t = Tensor::empty(DType::F4E2M1, {4});
  const double in[] = {0.75, -5.0, 100.0, 1.5};  // ties to even: 1.0, -4.0; saturates at 6
  for (int i = 0; i < 4; ++i) t.set_f64(i, in[i]);
  EXPECT_EQ(t.get_f64(0), 1.0);
  EXPECT_EQ(t.get_f64(1), -4.0);
  EXPECT_EQ(t.get_f64(2), 6.0);
  EXPECT_EQ(t.get_f64(3), 1.5);
  const Tensor f = t.cast(DType::F32);
  EXPECT_EQ(f.data<float>()[1], -4.0f);
  EXPECT_EQ(dtype_size(DType::I4), 1u);
  EXPECT_EQ(dtype_bits(DType::I4), 4);
  EXPECT_FALSE(dtype_from_kserve("INT4").has_value());  // no KServe datatype carries them
}

}  // namespace
}  // namespace gpuopt
