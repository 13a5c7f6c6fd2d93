// The generic elementwise launchers against a host computation in double, with guard bytes.
#include "backends/cuda/elementwise.h"
#include "core/dtype.h"
#include "cuda_test_util.h"

#include <cmath>
#include <random>

namespace gpuopt::cuda {
namespace {

using gpuopt::testing::GuardedBuffer;

TEST(Broadcast, DescribesStridesAndRejectsMismatch) {
  auto d = make_broadcast({2, 1, 5}, {3, 5});
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->rank, 3);
  EXPECT_EQ(d->numel, 30);
  EXPECT_EQ(d->a_strides[1], 0);
  EXPECT_EQ(d->b_strides[0], 0);
  EXPECT_EQ(d->b_strides[1], 5);
  EXPECT_FALSE(make_broadcast({2, 3}, {4}).ok());
}

float round_to(DType dt, float v) {
  if (dt == DType::F16) return Half::to_float(Half::from_float(v));
  if (dt == DType::BF16) return BFloat16::to_float(BFloat16::from_float(v));
  return v;
}

std::vector<uint16_t> encode(DType dt, const std::vector<float>& v) {
  std::vector<uint16_t> o(v.size());
  for (size_t i = 0; i < v.size(); ++i) o[i] = dt == DType::F16 ? Half::from_float(v[i]) : BFloat16::from_float(v[i]);
  return o;
}

class BinaryBroadcast : public ::testing::TestWithParam<DType> {};

TEST_P(BinaryBroadcast, AddMulMatchHostAcrossOddShapes) {
  GPUOPT_REQUIRE_CUDA();
  const DType dt = GetParam();
  const Shape as{5, 7, 1, 13}, bs{7, 11, 1};
  auto d = make_broadcast(as, bs);
  ASSERT_TRUE(d.ok());
  std::mt19937 rng(42);
  std::uniform_real_distribution<float> u(-2, 2);
  std::vector<float> a(5 * 7 * 13), b(7 * 11);
  for (auto& v : a) v = round_to(dt, u(rng));
  for (auto& v : b) v = round_to(dt, u(rng));
  const size_t es = dtype_size(dt);
  GuardedBuffer da(a.size() * es), db(b.size() * es), dy(d->numel * es);
  if (dt == DType::F32) {
    da.upload(a);
    db.upload(b);
  } else {
    da.upload(encode(dt, a));
    db.upload(encode(dt, b));
  }
  for (BinaryOp op : {BinaryOp::kAdd, BinaryOp::kMul}) {
    ASSERT_TRUE(launch_binary(op, dt, da.data(), db.data(), dy.data(), *d, nullptr).ok());
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    ASSERT_TRUE(dy.guards_intact());
    std::vector<float> y(d->numel);
    if (dt == DType::F32) y = dy.download<float>(d->numel);
    else {
      auto raw = dy.download<uint16_t>(d->numel);
      for (size_t i = 0; i < raw.size(); ++i) y[i] = dt == DType::F16 ? Half::to_float(raw[i]) : BFloat16::to_float(raw[i]);
    }
    const double rel = dt == DType::F32 ? 1e-6 : dt == DType::F16 ? 1e-3 : 1e-2;
    for (int64_t i0 = 0; i0 < 5; ++i0)
      for (int64_t i1 = 0; i1 < 7; ++i1)
        for (int64_t i2 = 0; i2 < 11; ++i2)
          for (int64_t i3 = 0; i3 < 13; ++i3) {
            const double x = a[(i0 * 7 + i1) * 13 + i3], w = b[i1 * 11 + i2];
            const double want = op == BinaryOp::kAdd ? x + w : x * w;
            const double got = y[((i0 * 7 + i1) * 11 + i2) * 13 + i3];
            ASSERT_NEAR(got, want, 1e-5 + rel * std::fabs(want)) << i0 << "," << i1 << "," << i2 << "," << i3;
          }
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, BinaryBroadcast, ::testing::Values(DType::F32, DType::F16, DType::BF16),
                         [](const auto& i) { return std::string(dtype_name(i.param)); });

TEST(Unary, ActivationsMatchHost) {
  GPUOPT_REQUIRE_CUDA();
  const int64_t n = 4099;
  std::vector<float> x(n);
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-6, 6);
  for (auto& v : x) v = u(rng);
  GuardedBuffer dx(n * 4), dy(n * 4);
  dx.upload(x);
  struct Case { UnaryOp op; double (*f)(double); };
  const Case cases[] = {{UnaryOp::kRelu, [](double v) { return v > 0 ? v : 0.0; }},
                        {UnaryOp::kSigmoid, [](double v) { return 1 / (1 + std::exp(-v)); }},
                        {UnaryOp::kTanh, [](double v) { return std::tanh(v); }},
                        {UnaryOp::kGelu, [](double v) { return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))); }},
                        {UnaryOp::kRound, [](double v) { return std::nearbyint(v); }}};
  for (const Case& c : cases) {
    ASSERT_TRUE(launch_unary(c.op, DType::F32, dx.data(), dy.data(), n, {}, nullptr).ok());
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    ASSERT_TRUE(dy.guards_intact());
    auto y = dy.download<float>(n);
    for (int64_t i = 0; i < n; ++i) ASSERT_NEAR(y[i], c.f(x[i]), 1e-5 + 1e-5 * std::fabs(c.f(x[i]))) << static_cast<int>(c.op) << " x=" << x[i];
  }
}

TEST(Cast, F32ToF16AndBackRoundsLikeHost) {
  GPUOPT_REQUIRE_CUDA();
  const int64_t n = 1001;
  std::vector<float> x(n);
  for (int64_t i = 0; i < n; ++i) x[i] = (static_cast<float>(i) - 500.5f) * 0.37f;
  GuardedBuffer dx(n * 4), dh(n * 2), dback(n * 4);
  dx.upload(x);
  ASSERT_TRUE(launch_cast(DType::F32, DType::F16, dx.data(), dh.data(), n, nullptr).ok());
  ASSERT_TRUE(launch_cast(DType::F16, DType::F32, dh.data(), dback.data(), n, nullptr).ok());
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  auto h = dh.download<uint16_t>(n);
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(h[i], Half::from_float(x[i])) << i;
  EXPECT_TRUE(dh.guards_intact() && dback.guards_intact());
  EXPECT_FALSE(launch_cast(DType::String, DType::F32, dx.data(), dh.data(), n, nullptr).ok());
}

}  // namespace
}  // namespace gpuopt::cuda
