#include "backends/cuda/allocator.h"
#include "cuda_test_util.h"

namespace gpuopt::cuda {
namespace {

TEST(DeviceAllocator, RoundSizeClasses) {
  EXPECT_EQ(DeviceAllocator::round_size(1), 512u);
  EXPECT_EQ(DeviceAllocator::round_size(513), 1024u);
  EXPECT_EQ(DeviceAllocator::round_size(size_t{1} << 20), size_t{1} << 20);
  const size_t r = DeviceAllocator::round_size((size_t{1} << 20) + 1);
  EXPECT_GE(r, (size_t{1} << 20) + 1);
  EXPECT_LE(r, (size_t{1} << 20) * 9 / 8 + (size_t{1} << 17));
}

TEST(DeviceAllocator, ReusesBlocksWithoutNewMallocs) {
  GPUOPT_REQUIRE_CUDA();
  DeviceAllocator a(0, 0);
  auto p = a.allocate(1000, "t0");
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  a.release(*p);
  const size_t mallocs = a.stats().device_mallocs;
  for (int i = 0; i < 10; ++i) {
    auto q = a.allocate(900, "t1");
    ASSERT_TRUE(q.ok());
    EXPECT_EQ(*q, *p);
    a.release(*q);
  }
  EXPECT_EQ(a.stats().device_mallocs, mallocs);
}

TEST(DeviceAllocator, LimitGivesOutOfMemoryNamingTensorAndStaysUsable) {
  GPUOPT_REQUIRE_CUDA();
  DeviceAllocator a(0, size_t{64} << 20);  // 64 MiB cap
  auto big = a.allocate(size_t{100} << 20, "conv1:0");
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.status().code(), StatusCode::kOutOfMemory);
  EXPECT_NE(big.status().message().find("'conv1:0'"), std::string::npos) << big.status().message();
  EXPECT_NE(big.status().message().find("100.00 MiB"), std::string::npos) << big.status().message();
  auto small = a.allocate(size_t{16} << 20, "conv1:0");  // a smaller batch still fits
  ASSERT_TRUE(small.ok()) << small.status().to_string();
  a.release(*small);
}

TEST(DeviceAllocator, DeviceOutOfMemoryIsAStatusNotACrash) {
  GPUOPT_REQUIRE_CUDA();
  DeviceAllocator a(0, 0);
  auto huge = a.allocate(size_t{1} << 50, "huge");  // 1 PiB
  ASSERT_FALSE(huge.ok());
  EXPECT_EQ(huge.status().code(), StatusCode::kOutOfMemory);
  auto ok = a.allocate(4096, "after");
  EXPECT_TRUE(ok.ok()) << ok.status().to_string();
  if (ok.ok()) a.release(*ok);
}

}  // namespace
}  // namespace gpuopt::cuda
