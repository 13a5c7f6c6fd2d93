// The checked shape arithmetic every shape computed from model data goes through, the tensor
// size check that refuses a model whose tensors cannot fit, and host allocation failing as a
// Status instead of an abort.
#include "core/shape.h"
#include "core/tensor.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>

namespace gpuopt {
namespace {

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr int64_t k2p40 = int64_t{1} << 40;

TEST(CheckedShape, MulAndAddReportOverflowAndLeaveOutAlone) {
  int64_t out = 7;
  EXPECT_TRUE(checked_mul(3, 5, &out));
  EXPECT_EQ(out, 15);
  EXPECT_TRUE(checked_mul(-4, 6, &out));
  EXPECT_EQ(out, -24);
  out = 7;
  EXPECT_FALSE(checked_mul(k2p40, k2p40, &out));
  EXPECT_EQ(out, 7);
  EXPECT_FALSE(checked_mul(kMax, 2, &out));
  EXPECT_FALSE(checked_mul(std::numeric_limits<int64_t>::min(), -1, &out));
  EXPECT_TRUE(checked_mul(kMax, 1, &out));
  EXPECT_EQ(out, kMax);
  EXPECT_TRUE(checked_add(kMax - 1, 1, &out));
  EXPECT_EQ(out, kMax);
  out = 7;
  EXPECT_FALSE(checked_add(kMax, 1, &out));
  EXPECT_EQ(out, 7);
  EXPECT_FALSE(checked_add(std::numeric_limits<int64_t>::min(), -1, &out));
}

TEST(CheckedShape, NumelAndBytes) {
  EXPECT_EQ(checked_numel({}), 1);
  EXPECT_EQ(checked_numel({5, 7, 11}), 385);
  EXPECT_EQ(checked_numel({k2p40, k2p40}), std::nullopt);  // 2^80 would wrap to 0
  EXPECT_EQ(checked_numel({0, k2p40, k2p40, k2p40}), 0);  // empty, not an overflow
  EXPECT_EQ(checked_numel({k2p40, k2p40, 0}), 0);
  EXPECT_EQ(checked_numel({3, kUnknownDim}), std::nullopt);
  EXPECT_EQ(checked_nbytes({128, 2, 2, 2}, 4), 4096u);
  EXPECT_EQ(checked_nbytes({int64_t{1} << 62}, 4), std::nullopt);  // elements fit, bytes do not
  EXPECT_EQ(checked_nbytes({int64_t{1} << 61}, 4), uint64_t{1} << 63);
}

TEST(CheckedShape, ShapeNumelSaturatesInsteadOfWrapping) {
  EXPECT_EQ(shape_numel({5, 7}), 35);
  EXPECT_EQ(shape_numel({5, kUnknownDim}), -1);
  EXPECT_EQ(shape_numel({k2p40, k2p40}), kMax);
  EXPECT_EQ(shape_numel({k2p40, k2p40, kUnknownDim}), -1);  // unknown wins over overflow
  EXPECT_EQ(shape_numel({k2p40, k2p40, 0}), 0);
}

TEST(CheckedShape, ExtentFromDouble) {
  EXPECT_EQ(extent_from_double(12.0), 12);
  EXPECT_EQ(extent_from_double(12.9), 12);
  EXPECT_EQ(extent_from_double(1e30), std::nullopt);  // a cast would be undefined behaviour
  EXPECT_EQ(extent_from_double(std::numeric_limits<double>::infinity()), std::nullopt);
  EXPECT_EQ(extent_from_double(std::numeric_limits<double>::quiet_NaN()), std::nullopt);
  EXPECT_EQ(extent_from_double(-1.0), std::nullopt);
}

TEST(TensorSize, RefusesWhatCannotFitNamingShapeAndBytes) {
  EXPECT_TRUE(check_tensor_size(DType::F32, {1000, 1000}, 0).ok());
  EXPECT_TRUE(check_tensor_size(DType::F32, {kUnknownDim, 3}, 1).ok());  // not concrete: later
  Status st = check_tensor_size(DType::F32, {1000000000000, 3}, 0);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), StatusCode::kOutOfMemory);
  EXPECT_NE(st.message().find("f32 [1000000000000,3] needs 10.91 TiB"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("of physical memory"), std::string::npos) << st.message();
  st = check_tensor_size(DType::F32, {1024, 1024}, size_t{1} << 20);  // 4 MiB under a 1 MiB limit
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("needs 4.00 MiB, more than --memory-limit 1.00 MiB"), std::string::npos) << st.message();
  EXPECT_TRUE(check_tensor_size(DType::F32, {512, 512}, size_t{1} << 20).ok());  // exactly 1 MiB fits
  st = check_tensor_size(DType::F32, {k2p40, k2p40}, 0);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("[1099511627776,1099511627776]"), std::string::npos) << st.message();
}

TEST(TensorSize, FailedHostAllocationIsAStatus) {
  // 2^60 bytes: past any host's memory; aligned_alloc fails and try_empty says so, no abort.
  auto t = Tensor::try_empty(DType::F32, {int64_t{1} << 58}, "huge");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), StatusCode::kOutOfMemory);
  EXPECT_NE(t.status().message().find("out of memory allocating 'huge' (f32 [288230376151711744])"), std::string::npos)
      << t.status().message();
  auto wrap = Tensor::try_empty(DType::F64, {k2p40, k2p40}, "wraps");
  ASSERT_FALSE(wrap.ok());
  EXPECT_EQ(wrap.status().code(), StatusCode::kOutOfMemory);
  auto s = Tensor::try_empty(DType::String, {int64_t{1} << 58}, "strings");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kOutOfMemory);
  auto ok = Tensor::try_empty(DType::F32, {5, 7}, "small");
  ASSERT_TRUE(ok.ok()) << ok.status().to_string();
  EXPECT_EQ(ok->nbytes(), 140u);
  EXPECT_NE(ok->raw(), nullptr);
}

}  // namespace
}  // namespace gpuopt
