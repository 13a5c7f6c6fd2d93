// GPU checks: each kernel against a CPU reference. They need a CUDA device; elsewhere they say
// "skipped: no CUDA device" (the same binary runs them on the GPU machine).
#include "bench/gpu.h"
#include "bench/cpu_gemm.h"

#include <gtest/gtest.h>

namespace gpuopt::bench {
namespace {

#define REQUIRE_GPU()                                                \
  do {                                                               \
    if (!cuda_device_count().ok()) GTEST_SKIP() << "no CUDA device"; \
  } while (0)

TEST(GpuCheck, NoDeviceIsUnavailableNotACrash) {
  if (cuda_device_count().ok()) GTEST_SKIP() << "a CUDA device is present";
  EXPECT_EQ(query_device(0).status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(query_device(0).status().message(), "no CUDA device");
  EXPECT_EQ(time_memory(MemTest::CopyKernel, 1 << 20, {}).status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(time_gemm(GemmType::BF16, 1024, 0, 1, 1).status().code(), StatusCode::kUnavailable);
}

TEST(GpuCheck, MemoryKernels) {
  REQUIRE_GPU();
  const Status s = check_memory_kernels(0);
  EXPECT_TRUE(s.ok()) << s.to_string();
}

TEST(GpuCheck, FmaKernels) {
  REQUIRE_GPU();
  for (FmaKind k : {FmaKind::F32, FmaKind::F16x2, FmaKind::F64}) {
    const Status s = check_fma(k, 0);
    EXPECT_TRUE(s.ok()) << s.to_string();
  }
}

TEST(GpuCheck, RooflineKernels) {
  REQUIRE_GPU();
  for (RooflineType t : {RooflineType::F32, RooflineType::F16}) {
    for (int f : {1, 2, 4, 8, 64, 1024}) {
      const Status s = check_roofline(t, f, 0);
      EXPECT_TRUE(s.ok()) << s.to_string();
    }
  }
}

TEST(GpuCheck, GemmAllTypes) {
  REQUIRE_GPU();
  for (GemmType t : {GemmType::F32, GemmType::TF32, GemmType::F16, GemmType::BF16, GemmType::FP8, GemmType::INT8}) {
    const Status s = check_gemm(t, 272, 0);                // not a power of two
    if (s.code() == StatusCode::kUnimplemented) continue;  // fp8 before sm_89
    EXPECT_TRUE(s.ok()) << gemm_type_name(t) << ": " << s.to_string();
  }
}

TEST(GpuCheck, GraphEqualsLaunches) {
  REQUIRE_GPU();
  const Status s = check_graph(0);
  EXPECT_TRUE(s.ok()) << s.to_string();
}

TEST(GpuCheck, TimingsArePositiveAndBounded) {
  REQUIRE_GPU();
  auto d = query_device(0);
  ASSERT_TRUE(d.ok()) << d.status().to_string();
  MemParams p;
  p.repeat = 5;
  auto t = time_memory(MemTest::CopyKernel, 64 << 20, p);
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  const double gbps = copy_count(64 << 20).bytes / t->median / 1e9;
  EXPECT_GT(gbps, 10);
  EXPECT_LT(gbps, 1.5 * theoretical_bandwidth(*d) / 1e9);  // cannot beat the pins by much (L2 aside)
  auto g = time_gemm(GemmType::BF16, 1024, 0, 3, 2);
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  EXPECT_GT(g->seconds.median, 0);
}

TEST(CpuGemm, OpenBlasAgreesWithDotProducts) {
  const Status s = check_cpu_sgemm(67);
  if (s.code() == StatusCode::kUnavailable) GTEST_SKIP() << "built without BLAS";
  EXPECT_TRUE(s.ok()) << s.to_string();
  auto t = time_cpu_sgemm(64, 3);
  ASSERT_TRUE(t.ok());
  EXPECT_GT(t->median, 0);
  EXPECT_EQ(t->count, 3);
}

}  // namespace
}  // namespace gpuopt::bench
