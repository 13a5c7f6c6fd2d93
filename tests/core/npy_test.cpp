#include "core/npy.h"
#include "core/table.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <random>
#include <unistd.h>

namespace gpuopt {
namespace {

std::string tmp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("gpuopt_npy_" + std::to_string(::getpid()) + "_" + name)).string();
}

class NpyRoundTrip : public ::testing::TestWithParam<DType> {};

TEST_P(NpyRoundTrip, WriteThenReadGivesSameBytes) {
  const DType dt = GetParam();
  std::mt19937 rng(static_cast<unsigned>(dt) * 7919u);
  std::uniform_real_distribution<double> u(-100, 100);
  for (const Shape& shape : {Shape{}, Shape{0}, Shape{5, 7, 11}, Shape{128, 2, 2, 2}}) {
    Tensor t = Tensor::empty(dt, shape);
    for (int64_t i = 0; i < t.numel(); ++i) t.set_f64(i, u(rng));
    const std::string p = tmp_path(std::string(dtype_name(dt)));
    ASSERT_TRUE(write_npy(p, t).ok());
    auto r = read_npy(p);
    std::remove(p.c_str());
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_EQ(r->dtype(), dt == DType::BF16 ? DType::U16 : dt);
    EXPECT_EQ(r->shape(), shape);
    ASSERT_EQ(r->nbytes(), t.nbytes());
    if (t.nbytes()) { EXPECT_EQ(0, std::memcmp(r->raw(), t.raw(), t.nbytes())); }  // empty: no buffers to compare
  }
}

INSTANTIATE_TEST_SUITE_P(AllDtypes, NpyRoundTrip,
                         ::testing::Values(DType::F32, DType::F64, DType::F16, DType::I8, DType::U8, DType::I16,
                                           DType::U16, DType::I32, DType::U32, DType::I64, DType::U64, DType::Bool,
                                           DType::BF16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

TEST(Npy, ReadsWhatNumpyWrites) {
  // np.save of np.arange(6, dtype=np.float32).reshape(2, 3), header as NumPy 1.x writes it.
  std::string h = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
  h.append(118 - h.size(), ' ');
  h += '\n';
  std::string bytes = std::string("\x93NUMPY\x01\x00", 8) + static_cast<char>(h.size()) + '\0' + h;
  for (int i = 0; i < 6; ++i) {
    float f = static_cast<float>(i);
    bytes.append(reinterpret_cast<char*>(&f), 4);
  }
  auto r = parse_npy(bytes.data(), bytes.size());
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->shape(), (Shape{2, 3}));
  EXPECT_EQ(r->data<float>()[5], 5.0f);
}

TEST(Npy, RejectsCorruptInputWithClearErrors) {
  EXPECT_NE(parse_npy("hello", 5, "x.npy").status().message().find("not a .npy file"), std::string::npos);
  Tensor t = Tensor::zeros(DType::F32, {4, 4});
  std::string bytes = serialize_npy(t);
  auto r = parse_npy(bytes.data(), bytes.size() - 3, "short.npy");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("short.npy: .npy data is"), std::string::npos) << r.status().message();
  std::string fortran = bytes;
  fortran.replace(fortran.find("False"), 5, "True ");
  EXPECT_EQ(parse_npy(fortran.data(), fortran.size()).status().code(), StatusCode::kUnimplemented);
  EXPECT_EQ(read_npy("/nonexistent/x.npy").status().code(), StatusCode::kNotFound);
}

TEST(Half, ConversionsRoundToNearestEven) {
  EXPECT_EQ(Half::from_float(1.0f), 0x3c00);
  EXPECT_EQ(Half::from_float(-2.0f), 0xc000);
  EXPECT_EQ(Half::from_float(65504.0f), 0x7bff);
  EXPECT_EQ(Half::from_float(65520.0f), 0x7c00);      // rounds to +Inf
  EXPECT_EQ(Half::from_float(5.960464477539063e-8f), 0x0001);  // smallest subnormal
  EXPECT_EQ(Half::from_float(1.0f + 1.0f / 2048), 0x3c00);     // tie -> even
  EXPECT_EQ(Half::from_float(1.0f + 3.0f / 2048), 0x3c02);     // tie -> even (up)
  EXPECT_TRUE(std::isnan(Half::to_float(Half::from_float(NAN))));
  for (uint32_t b = 0; b < 0x7c00; ++b) {  // every finite positive half survives a round trip
    const float f = Half::to_float(static_cast<uint16_t>(b));
    ASSERT_EQ(Half::from_float(f), b) << b;
  }
  EXPECT_EQ(BFloat16::from_float(1.0f), 0x3f80);
  EXPECT_EQ(BFloat16::to_float(0x4049), 3.140625f);
}

TEST(Tensor, CastAndReshape) {
  Tensor t = Tensor::from_vector<double>(DType::F32, {2, 2}, {1.5, -2.5, 3.0, 0.0});
  Tensor i = t.cast(DType::I32);
  EXPECT_EQ(i.data<int32_t>()[0], 1);
  EXPECT_EQ(i.data<int32_t>()[1], -2);
  Tensor b = t.cast(DType::Bool);
  EXPECT_TRUE(b.data<bool>()[2]);
  EXPECT_FALSE(b.data<bool>()[3]);
  EXPECT_TRUE(t.reshaped({4}).ok());
  EXPECT_FALSE(t.reshaped({3}).ok());
  Tensor big = Tensor::from_vector<int64_t>(DType::I64, {1}, {(int64_t{1} << 62) + 1});
  EXPECT_EQ(big.get_i64(0), (int64_t{1} << 62) + 1);
}

TEST(Table, AlignsNumbersRight) {
  Table t({"name", "GB/s"});
  t.add({"copy", "4100.5"});
  t.add({"read", "12.0"});
  EXPECT_EQ(t.render(), "name    GB/s\n------------\ncopy  4100.5\nread    12.0\n");
  EXPECT_EQ(format_bytes(1536), "1.50 KiB");
  EXPECT_EQ(format_rate(4.1e12, "B/s"), "4.10 TB/s");
  EXPECT_EQ(parse_byte_size("512"), 512u);
  EXPECT_EQ(parse_byte_size("64K"), 65536u);
  EXPECT_EQ(parse_byte_size("2G"), size_t{2} << 30);
  EXPECT_EQ(parse_byte_size("1.5GiB"), size_t{3} << 29);
  EXPECT_FALSE(parse_byte_size("lots").has_value());
  EXPECT_FALSE(parse_byte_size("3X").has_value());
}

}  // namespace
}  // namespace gpuopt
