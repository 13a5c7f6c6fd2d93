// cuBLASLt matmul against a host product in double: f32/f16/bf16, transposes, batches with a
// broadcast operand, the bias epilogue, and the plan cache.
#include "ops/matmul/cuda/matmul_lt.h"
#include "core/dtype.h"
#include "cuda_test_util.h"

#include <cublasLt.h>

#include <cmath>
#include <random>

namespace gpuopt::cuda {
namespace {

using gpuopt::testing::GuardedBuffer;

struct Ctx {
  ExecContext ec;
  Ctx() {
    cudaStreamCreate(&ec.stream);
    cublasLtCreate(&ec.lt);
    ec.workspace_bytes = size_t{32} << 20;
    cudaMalloc(&ec.workspace, ec.workspace_bytes);
  }
  ~Ctx() {
    cudaFree(ec.workspace);
    cublasLtDestroy(ec.lt);
    cudaStreamDestroy(ec.stream);
  }
};

float q(DType dt, float v) {
  if (dt == DType::F16) return Half::to_float(Half::from_float(v));
  if (dt == DType::BF16) return BFloat16::to_float(BFloat16::from_float(v));
  return v;
}

void upload(GuardedBuffer& buf, DType dt, const std::vector<float>& v) {
  if (dt == DType::F32) return buf.upload(v);
  std::vector<uint16_t> h(v.size());
  for (size_t i = 0; i < v.size(); ++i) h[i] = dt == DType::F16 ? Half::from_float(v[i]) : BFloat16::from_float(v[i]);
  buf.upload(h);
}

std::vector<float> download(GuardedBuffer& buf, DType dt, size_t n) {
  if (dt == DType::F32) return buf.download<float>(n);
  auto h = buf.download<uint16_t>(n);
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = dt == DType::F16 ? Half::to_float(h[i]) : BFloat16::to_float(h[i]);
  return v;
}

struct Case {
  int64_t m, n, k, batch;
  bool ta, tb, broadcast_b, bias;
};

class Matmul : public ::testing::TestWithParam<DType> {};

TEST_P(Matmul, MatchesHostProduct) {
  GPUOPT_REQUIRE_CUDA();
  const DType dt = GetParam();
  Ctx ctx;
  std::mt19937 rng(99);
  std::uniform_real_distribution<float> u(-1, 1);
  const Case cases[] = {{64, 32, 128, 1, false, false, false, false}, {37, 53, 71, 3, false, false, false, false},
                        {33, 17, 65, 2, true, false, true, false},    {16, 40, 24, 4, false, true, true, false},
                        {128, 96, 64, 1, false, false, false, true}};
  for (const Case& c : cases) {
    const int64_t bb = c.broadcast_b ? 1 : c.batch;
    std::vector<float> a(c.batch * c.m * c.k), b(bb * c.k * c.n), bias(c.n);
    for (auto& v : a) v = q(dt, u(rng));
    for (auto& v : b) v = q(dt, u(rng));
    for (auto& v : bias) v = q(dt, u(rng));
    const size_t es = dtype_size(dt);
    GuardedBuffer da(a.size() * es), db(b.size() * es), dc(c.batch * c.m * c.n * es), dbias(c.n * es);
    upload(da, dt, a);
    upload(db, dt, b);
    upload(dbias, dt, bias);
    MatmulShape s{c.m, c.n, c.k, c.batch, c.ta, c.tb, c.m * c.k, c.broadcast_b ? 0 : c.k * c.n, c.m * c.n};
    Status st = matmul(ctx.ec, s, dt, da.data(), db.data(), dc.data(), 1.f, 0.f, c.bias ? dbias.data() : nullptr,
                       c.bias ? Epilogue::kBias : Epilogue::kNone);
    ASSERT_TRUE(st.ok()) << st.to_string();
    ASSERT_EQ(cudaStreamSynchronize(ctx.ec.stream), cudaSuccess);
    ASSERT_TRUE(dc.guards_intact());
    auto got = download(dc, dt, c.batch * c.m * c.n);
    const double tol = dt == DType::F32 ? 1e-4 : dt == DType::F16 ? 2e-2 : 1e-1;
    for (int64_t bi = 0; bi < c.batch; ++bi)
      for (int64_t i = 0; i < c.m; ++i)
        for (int64_t j = 0; j < c.n; ++j) {
          double want = c.bias ? bias[j] : 0.0;
          const float* A = a.data() + bi * c.m * c.k;
          const float* B = b.data() + (c.broadcast_b ? 0 : bi) * c.k * c.n;
          for (int64_t p = 0; p < c.k; ++p)
            want += double(c.ta ? A[p * c.m + i] : A[i * c.k + p]) * double(c.tb ? B[j * c.k + p] : B[p * c.n + j]);
          ASSERT_NEAR(got[(bi * c.m + i) * c.n + j], want, tol * (1 + std::fabs(want)))
              << "m=" << c.m << " n=" << c.n << " k=" << c.k << " at " << bi << "," << i << "," << j;
        }
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, Matmul, ::testing::Values(DType::F32, DType::F16, DType::BF16),
                         [](const auto& i) { return std::string(dtype_name(i.param)); });

TEST(MatmulPlans, CachedByShape) {
  GPUOPT_REQUIRE_CUDA();
  Ctx ctx;
  GuardedBuffer a(64 * 64 * 4), b(64 * 64 * 4), c(64 * 64 * 4);
  MatmulShape s{64, 64, 64, 1, false, false, 0, 0, 0};
  ASSERT_TRUE(matmul(ctx.ec, s, DType::F32, a.data(), b.data(), c.data(), 1.f, 0.f).ok());
  const size_t built = matmul_plans_built();
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(matmul(ctx.ec, s, DType::F32, a.data(), b.data(), c.data(), 1.f, 0.f).ok());
  EXPECT_EQ(matmul_plans_built(), built);
  EXPECT_EQ(matmul(ctx.ec, s, DType::I8, a.data(), b.data(), c.data(), 1.f, 0.f).code(), StatusCode::kUnimplemented);
}

}  // namespace
}  // namespace gpuopt::cuda
