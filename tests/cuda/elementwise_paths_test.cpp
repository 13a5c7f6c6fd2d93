// The elementwise and Transpose launchers on the GPU where backend_ops cannot reach: pointers
// that are not 16-byte aligned (offset views into a buffer) take the scalar fallbacks, and a
// tensor of 2^31 elements takes the 64-bit kernel. Each result is checked against host math and
// the guard bytes around every output.
#include "backends/cuda/elementwise.h"
#include "ops/elementwise/cuda/elementwise_plan.h"
#include "ops/tensor/cuda/layout.h"
#include "ops/tensor/cuda/layout_plan.h"
#include "core/dtype.h"
#include "cuda_test_util.h"

#include <random>

namespace gpuopt::cuda {
namespace {

using gpuopt::testing::GuardedBuffer;

std::vector<float> random_floats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-2, 2);
  std::vector<float> v(n);
  for (auto& x : v) x = Half::to_float(Half::from_float(u(rng)));  // exactly representable in f16
  return v;
}
std::vector<uint16_t> to_half(const std::vector<float>& v) {
  std::vector<uint16_t> h(v.size());
  for (size_t i = 0; i < v.size(); ++i) h[i] = Half::from_float(v[i]);
  return h;
}
char* shifted(GuardedBuffer& b, size_t bytes) {
  return static_cast<char*>(b.data()) + bytes;
}

// f16 Add of every pattern with a, b and y shifted by 0, 1 or 3 elements off 16-byte alignment.
TEST(CudaElementwisePaths, BinaryMisalignedViewsMatchHost) {
  GPUOPT_REQUIRE_CUDA();
  const std::pair<Shape, Shape> shapes[] = {
      {{37, 64}, {37, 64}}, {{37, 64}, {64}}, {{37, 64}, {37, 1}}, {{37, 64}, {}}};
  for (const auto& [as, bs] : shapes) {
    auto d = make_broadcast(as, bs);
    ASSERT_TRUE(d.ok());
    const auto a = random_floats(static_cast<size_t>(shape_numel(as)), 1),
               b = random_floats(static_cast<size_t>(shape_numel(bs)), 2);
    for (size_t shift : {0, 1, 3}) {
      const size_t off = shift * 2;
      GuardedBuffer da(a.size() * 2 + 16), db(b.size() * 2 + 16), dy(static_cast<size_t>(d->numel) * 2 + 16);
      cudaMemcpy(shifted(da, off), to_half(a).data(), a.size() * 2, cudaMemcpyHostToDevice);
      cudaMemcpy(shifted(db, (off * 3) % 8), to_half(b).data(), b.size() * 2, cudaMemcpyHostToDevice);
      const BinaryPlan p = plan_binary(*d, 2, 2, shifted(da, off), shifted(db, (off * 3) % 8), shifted(dy, off));
      ASSERT_TRUE(launch_binary(BinaryOp::kAdd, DType::F16, shifted(da, off), shifted(db, (off * 3) % 8),
                                shifted(dy, off), *d, nullptr)
                      .ok());
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      std::vector<uint16_t> y(static_cast<size_t>(d->numel));
      cudaMemcpy(y.data(), shifted(dy, off), y.size() * 2, cudaMemcpyDeviceToHost);
      for (int64_t i = 0; i < d->numel; ++i) {
        const int64_t col = i % 64, row = i / 64;
        const float bv = bs.empty() ? b[0] : (bs.size() == 1 ? b[col] : (bs[1] == 1 ? b[row] : b[i]));
        ASSERT_EQ(y[i], Half::from_float(a[i] + bv))
            << shape_to_string(bs) << " shift " << shift << " element " << i << " path " << p.why;
      }
      // The bytes before the shifted view are the output's own slack: they must stay untouched too.
      EXPECT_TRUE(dy.guards_intact());
    }
  }
}

TEST(CudaElementwisePaths, UnaryAndCastMisalignedViewsMatchHost) {
  GPUOPT_REQUIRE_CUDA();
  const size_t n = 1001;
  const auto x = random_floats(n, 3);
  for (size_t shift : {0, 1, 2}) {
    GuardedBuffer dx(n * 4 + 16), dy(n * 4 + 16), dh(n * 2 + 16);
    cudaMemcpy(shifted(dx, shift * 4), x.data(), n * 4, cudaMemcpyHostToDevice);
    ASSERT_TRUE(launch_unary(UnaryOp::kNeg, DType::F32, shifted(dx, shift * 4), shifted(dy, 4 * ((shift + 1) % 3)), n,
                             {}, nullptr)
                    .ok());
    ASSERT_TRUE(launch_cast(DType::F32, DType::F16, shifted(dx, shift * 4), shifted(dh, 2 * shift), n, nullptr).ok());
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    std::vector<float> y(n);
    std::vector<uint16_t> h(n);
    cudaMemcpy(y.data(), shifted(dy, 4 * ((shift + 1) % 3)), n * 4, cudaMemcpyDeviceToHost);
    cudaMemcpy(h.data(), shifted(dh, 2 * shift), n * 2, cudaMemcpyDeviceToHost);
    for (size_t i = 0; i < n; ++i) {
      ASSERT_EQ(y[i], -x[i]) << "shift " << shift << " element " << i;
      ASSERT_EQ(h[i], Half::from_float(x[i])) << "shift " << shift << " element " << i;
    }
    EXPECT_TRUE(dy.guards_intact());
    EXPECT_TRUE(dh.guards_intact());
  }
}

// BERT's head transpose from a view 2 bytes off alignment: the row copy narrows its chunks.
TEST(CudaElementwisePaths, TransposeRowsFromMisalignedView) {
  GPUOPT_REQUIRE_CUDA();
  const Shape s{3, 5, 7, 64};
  const int64_t n = shape_numel(s);
  std::vector<uint16_t> x(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) x[static_cast<size_t>(i)] = static_cast<uint16_t>(i * 7 + 1);
  for (size_t off : {0, 2, 4, 8}) {
    GuardedBuffer dx(static_cast<size_t>(n) * 2 + 16), dy(static_cast<size_t>(n) * 2 + 16);
    cudaMemcpy(shifted(dx, off), x.data(), x.size() * 2, cudaMemcpyHostToDevice);
    ASSERT_TRUE(launch_transpose(2, shifted(dx, off), shifted(dy, 0), s, {0, 2, 1, 3}, nullptr).ok());
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    std::vector<uint16_t> y(x.size());
    cudaMemcpy(y.data(), shifted(dy, 0), y.size() * 2, cudaMemcpyDeviceToHost);
    for (int64_t a = 0, o = 0; a < 3; ++a)
      for (int64_t c = 0; c < 7; ++c)
        for (int64_t b = 0; b < 5; ++b)
          for (int64_t e = 0; e < 64; ++e, ++o)
            ASSERT_EQ(y[static_cast<size_t>(o)], x[static_cast<size_t>(((a * 5 + b) * 7 + c) * 64 + e)])
                << "offset " << off << " at " << o;
    EXPECT_TRUE(dy.guards_intact());
  }
}

// 2^31 + 6 elements: the 64-bit kernel, with a real broadcast ([2, N] == [2, 1]).
TEST(CudaElementwisePaths, TwoToThe31ElementsTakeThe64BitKernel) {
  GPUOPT_REQUIRE_CUDA();
  const int64_t half = (int64_t{1} << 30) + 3, n = 2 * half;
  auto d = make_broadcast({2, half}, {2, 1});
  ASSERT_TRUE(d.ok());
  ASSERT_EQ(plan_binary(*d, 1, 1, nullptr, nullptr, nullptr).path, BinaryPath::kGeneral64);
  void *a = nullptr, *b = nullptr, *y = nullptr;
  if (cudaMalloc(&a, static_cast<size_t>(n)) != cudaSuccess || cudaMalloc(&y, static_cast<size_t>(n)) != cudaSuccess ||
      cudaMalloc(&b, 2) != cudaSuccess) {
    cudaFree(a);
    cudaFree(y);
    cudaGetLastError();
    GTEST_SKIP() << "skipped: 4.3 GB of device memory not available";
  }
  cudaMemset(a, 5, static_cast<size_t>(half));
  cudaMemset(static_cast<char*>(a) + half, 9, static_cast<size_t>(half));
  const uint8_t bv[2] = {5, 9};
  cudaMemcpy(b, bv, 2, cudaMemcpyHostToDevice);
  cudaMemset(y, 0, static_cast<size_t>(n));
  ASSERT_TRUE(launch_binary(BinaryOp::kEqual, DType::U8, a, b, y, *d, nullptr).ok());
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  // Samples: both ends, both sides of the row boundary, and around 2^31.
  for (int64_t at : {int64_t{0}, half - 4096, half, kMax32 - 4096, n - 4096}) {
    std::vector<uint8_t> h(4096);
    cudaMemcpy(h.data(), static_cast<char*>(y) + at, h.size(), cudaMemcpyDeviceToHost);
    for (size_t i = 0; i < h.size(); ++i) ASSERT_EQ(h[i], 1) << "element " << at + static_cast<int64_t>(i);
  }
  cudaFree(a);
  cudaFree(b);
  cudaFree(y);
}

}  // namespace
}  // namespace gpuopt::cuda
