// End to end through gpuopt::Session: the same graph run with device "cuda" and device "cpu"
// (the reference) must agree — f32 within 1e-4 of the output scale, fp16/bf16 within a relative
// L2 error of 1e-2. Also: ops without a CUDA kernel fall back to the CPU, --memory-limit gives a
// kOutOfMemory Status naming the tensor and leaves the session usable, concurrent runs of one
// session stay correct. Every test skips without a CUDA device.
#include "cuda_test_util.h"
#include "session_util.h"

#include "backends/cuda/cuda_ops.h"
#include "gpuopt/session.h"
#include "ir/graph.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <thread>

namespace gpuopt {
namespace {

using testing::float_attr;
using testing::int_attr;
using testing::ints_attr;
using testing::random_tensor;
using testing::rel_l2;

// x[N,3,16,16] -> Conv(3->8, 3x3, pad 1) -> BatchNormalization -> Relu -> MaxPool(2, stride 2)
// -> Flatten -> Gemm(transB) -> y[N,10]. N is symbolic so the OOM test can vary the batch.
Graph make_cnn(uint32_t seed) {
  std::mt19937 rng(seed);
  Graph g;
  g.opset = 17;
  ValueId x = g.add_input("x", DType::F32, {g.symbol_dim("N"), 3, 16, 16});
  ValueId w = g.add_constant("w", random_tensor(DType::F32, {8, 3, 3, 3}, rng, 0.3f));
  ValueId b = g.add_constant("b", random_tensor(DType::F32, {8}, rng, 0.1f));
  ValueId scale = g.add_constant("bn_scale", random_tensor(DType::F32, {8}, rng, 0.5f));
  ValueId bias = g.add_constant("bn_bias", random_tensor(DType::F32, {8}, rng, 0.1f));
  ValueId mean = g.add_constant("bn_mean", random_tensor(DType::F32, {8}, rng, 0.1f));
  Tensor var_t = random_tensor(DType::F32, {8}, rng, 0.2f);
  for (int64_t i = 0; i < 8; ++i) var_t.set_f64(i, 0.5 + std::abs(var_t.get_f64(i)));  // variance > 0
  ValueId var = g.add_constant("bn_var", var_t);
  ValueId fc_w = g.add_constant("fc_w", random_tensor(DType::F32, {10, 8 * 8 * 8}, rng, 0.05f));
  ValueId fc_b = g.add_constant("fc_b", random_tensor(DType::F32, {10}, rng, 0.1f));

  ValueId c = g.add_node(Op::Conv, "conv", {x, w, b}, 1, {{"pads", ints_attr({1, 1, 1, 1})}})[0];
  ValueId n = g.add_node(Op::BatchNormalization, "bn", {c, scale, bias, mean, var}, 1)[0];
  ValueId r = g.add_node(Op::Relu, "relu", {n}, 1)[0];
  ValueId p = g.add_node(Op::MaxPool, "pool", {r}, 1,
                         {{"kernel_shape", ints_attr({2, 2})}, {"strides", ints_attr({2, 2})}})[0];
  ValueId f = g.add_node(Op::Flatten, "flatten", {p}, 1, {{"axis", int_attr(1)}})[0];
  ValueId y = g.add_node(Op::Gemm, "fc", {f, fc_w, fc_b}, 1, {{"transB", int_attr(1)}}, {"y"})[0];
  g.mark_output(y);
  return g;
}

constexpr int64_t kB = 2, kS = 7, kD = 16, kVocab = 50;

// ids[B,S] i64, mask[S,S] bool -> embeddings Gather -> self-attention (MatMul, Transpose, Mul,
// Where, Softmax) -> residual Add -> LayerNormalization -> Erf-GELU -> Reshape [-1, D] -> y.
Graph make_transformer(uint32_t seed) {
  std::mt19937 rng(seed);
  Graph g;
  g.opset = 17;
  ValueId ids = g.add_input("ids", DType::I64, {kB, kS});
  ValueId mask = g.add_input("mask", DType::Bool, {kS, kS});
  ValueId emb = g.add_constant("emb", random_tensor(DType::F32, {kVocab, kD}, rng, 1.0f));
  ValueId wq = g.add_constant("wq", random_tensor(DType::F32, {kD, kD}, rng, 0.25f));
  ValueId wk = g.add_constant("wk", random_tensor(DType::F32, {kD, kD}, rng, 0.25f));
  ValueId wv = g.add_constant("wv", random_tensor(DType::F32, {kD, kD}, rng, 0.25f));
  ValueId gamma = g.add_constant("ln_g", random_tensor(DType::F32, {kD}, rng, 1.0f));
  ValueId beta = g.add_constant("ln_b", random_tensor(DType::F32, {kD}, rng, 0.1f));
  ValueId inv_sqrt_d = g.add_constant("inv_sqrt_d", Tensor::scalar_f32(1.0f / std::sqrt(float(kD))));
  ValueId neg = g.add_constant("neg", Tensor::scalar_f32(-1e4f));  // representable in f16
  ValueId half = g.add_constant("half", Tensor::scalar_f32(0.5f));
  ValueId one = g.add_constant("one", Tensor::scalar_f32(1.0f));
  ValueId inv_sqrt2 = g.add_constant("inv_sqrt2", Tensor::scalar_f32(0.70710678f));
  ValueId shape = g.add_constant("shape", Tensor::from_vector<int64_t>(DType::I64, {2}, {-1, kD}));

  ValueId h = g.add_node(Op::Gather, "embed", {emb, ids}, 1, {{"axis", int_attr(0)}})[0];  // [B,S,D]
  ValueId q = g.add_node(Op::MatMul, "q", {h, wq}, 1)[0];
  ValueId k = g.add_node(Op::MatMul, "k", {h, wk}, 1)[0];
  ValueId v = g.add_node(Op::MatMul, "v", {h, wv}, 1)[0];
  ValueId kt = g.add_node(Op::Transpose, "kt", {k}, 1, {{"perm", ints_attr({0, 2, 1})}})[0];
  ValueId s = g.add_node(Op::MatMul, "scores", {q, kt}, 1)[0];  // [B,S,S]
  ValueId ss = g.add_node(Op::Mul, "scale", {s, inv_sqrt_d}, 1)[0];
  ValueId sm = g.add_node(Op::Where, "mask", {mask, ss, neg}, 1)[0];
  ValueId pr = g.add_node(Op::Softmax, "softmax", {sm}, 1, {{"axis", int_attr(-1)}})[0];
  ValueId ctx = g.add_node(Op::MatMul, "ctx", {pr, v}, 1)[0];
  ValueId res = g.add_node(Op::Add, "residual", {ctx, h}, 1)[0];
  ValueId ln = g.add_node(Op::LayerNormalization, "ln", {res, gamma, beta}, 1,
                          {{"axis", int_attr(-1)}, {"epsilon", float_attr(1e-5f)}})[0];
  // GELU(x) = 0.5 x (1 + erf(x / sqrt 2))
  ValueId a = g.add_node(Op::Mul, "gelu_div", {ln, inv_sqrt2}, 1)[0];
  ValueId e = g.add_node(Op::Erf, "gelu_erf", {a}, 1)[0];
  ValueId e1 = g.add_node(Op::Add, "gelu_add", {e, one}, 1)[0];
  ValueId xm = g.add_node(Op::Mul, "gelu_mul", {ln, e1}, 1)[0];
  ValueId gl = g.add_node(Op::Mul, "gelu_half", {xm, half}, 1)[0];
  ValueId y = g.add_node(Op::Reshape, "flat", {gl, shape}, 1, {}, {"y"})[0];
  g.mark_output(y);
  return g;
}

NamedTensors cnn_inputs(int64_t batch, uint32_t seed) {
  std::mt19937 rng(seed);
  return {{"x", random_tensor(DType::F32, {batch, 3, 16, 16}, rng)}};
}

NamedTensors transformer_inputs(uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int64_t> tok(0, kVocab - 1);
  Tensor ids = Tensor::empty(DType::I64, {kB, kS});
  for (int64_t i = 0; i < ids.numel(); ++i) ids.set_f64(i, static_cast<double>(tok(rng)));
  Tensor mask = Tensor::empty(DType::Bool, {kS, kS});  // causal: row i sees columns <= i
  for (int64_t i = 0; i < kS; ++i)
    for (int64_t j = 0; j < kS; ++j) mask.set_f64(i * kS + j, j <= i ? 1.0 : 0.0);
  return {{"ids", ids}, {"mask", mask}};
}

std::unique_ptr<Session> make_session(const Graph& g, const Device& device, const std::string& precision = "fp32",
                                      size_t memory_limit = 0) {
  SessionOptions o;
  o.device = device;
  o.precision = precision;
  o.memory_limit = memory_limit;
  auto s = Session::from_graph(g, o);
  EXPECT_TRUE(s.ok()) << device.to_string() << "/" << precision << ": " << s.status().to_string();
  return s.ok() ? std::move(*s) : nullptr;
}

NamedTensors run_ok(const Session& s, const NamedTensors& in) {
  auto r = s.run(in);
  EXPECT_TRUE(r.ok()) << s.device().to_string() << ": " << r.status().to_string();
  return r.ok() ? std::move(*r) : NamedTensors{};
}

double max_abs(const Tensor& t) {
  double m = 0;
  for (int64_t i = 0; i < t.numel(); ++i) m = std::max(m, std::abs(t.get_f64(i)));
  return m;
}

// Max abs error relative to the reference's scale (max |ref|, at least 1).
double scaled_max_err(const Tensor& got, const Tensor& ref) {
  double m = 0;
  for (int64_t i = 0; i < ref.numel(); ++i) m = std::max(m, std::abs(got.get_f64(i) - ref.get_f64(i)));
  return m / std::max(1.0, max_abs(ref));
}

bool all_finite(const Tensor& t) {
  for (int64_t i = 0; i < t.numel(); ++i)
    if (!std::isfinite(t.get_f64(i))) return false;
  return true;
}

// Runs `g` on cuda (at `precision`) and cpu (f32) and compares every output.
void expect_matches_cpu(const Graph& g, const NamedTensors& in, const std::string& precision) {
  auto cpu = make_session(g, "cpu");
  auto gpu = make_session(g, "cuda", precision);
  ASSERT_TRUE(cpu && gpu);
  NamedTensors want = run_ok(*cpu, in);
  NamedTensors got = run_ok(*gpu, in);
  ASSERT_EQ(got.size(), want.size());
  for (size_t o = 0; o < want.size(); ++o) {
    const Tensor& r = want[o].second;
    const Tensor& t = got[o].second;
    EXPECT_EQ(got[o].first, want[o].first);
    ASSERT_EQ(t.dtype(), r.dtype()) << want[o].first;  // f32 boundary kept at every precision
    ASSERT_EQ(t.shape(), r.shape()) << want[o].first;
    ASSERT_TRUE(t.is_cpu()) << want[o].first;
    ASSERT_GT(max_abs(r), 0.0) << "reference output " << want[o].first << " is all zeros: the test would be weak";
    EXPECT_TRUE(all_finite(t)) << want[o].first;
    std::printf("  cuda %s %s: max err/scale %.3g, relative L2 %.3g\n", precision.c_str(), want[o].first.c_str(),
                scaled_max_err(t, r), rel_l2(t, r));
    if (precision == "fp32")
      EXPECT_LE(scaled_max_err(t, r), 1e-4) << want[o].first;
    else
      EXPECT_LE(rel_l2(t, r), 1e-2) << want[o].first << " at " << precision;
  }
}

class CudaSession : public ::testing::TestWithParam<std::string> {};

TEST_P(CudaSession, CnnMatchesCpu) {
  GPUOPT_REQUIRE_CUDA();
  expect_matches_cpu(make_cnn(1), cnn_inputs(3, 2), GetParam());
}

TEST_P(CudaSession, TransformerBlockMatchesCpu) {
  GPUOPT_REQUIRE_CUDA();
  expect_matches_cpu(make_transformer(3), transformer_inputs(4), GetParam());
}

// Not a CUDA test (runs without a device): the same graphs converted to fp16/bf16 and run on the
// CPU reference meet the bound, so the bound the CUDA tests apply is attainable by the precision
// itself and a CUDA failure points at the backend.
TEST_P(CudaSession, ReducedPrecisionBoundHoldsOnCpuReference) {
  if (GetParam() == "fp32") GTEST_SKIP() << "only for fp16/bf16";
  for (int which = 0; which < 2; ++which) {
    const Graph g = which == 0 ? make_cnn(1) : make_transformer(3);
    const NamedTensors in = which == 0 ? cnn_inputs(3, 2) : transformer_inputs(4);
    auto ref = make_session(g, "cpu");
    auto low = make_session(g, "cpu", GetParam());
    ASSERT_TRUE(ref && low);
    NamedTensors want = run_ok(*ref, in), got = run_ok(*low, in);
    ASSERT_EQ(got.size(), want.size());
    for (size_t o = 0; o < want.size(); ++o) {
      const double err = rel_l2(got[o].second, want[o].second);
      std::printf("  cpu %s %s %s: relative L2 %.3g\n", GetParam().c_str(), which ? "transformer" : "cnn",
                  want[o].first.c_str(), err);
      EXPECT_LE(err, 1e-2) << (which ? "transformer " : "cnn ") << want[o].first;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Precisions, CudaSession, ::testing::Values("fp32", "fp16", "bf16"),
                         [](const auto& info) { return info.param; });

// Det has no CUDA kernel: it runs on the CPU backend between two CUDA nodes (copies at both
// boundaries) and the result still matches the CPU reference.
TEST(CudaSessionFallback, OpWithoutCudaKernelRunsOnCpu) {
  GPUOPT_REQUIRE_CUDA();
  const Graph g = testing::relu_det_double(5);

  // The test is only meaningful if Det really is a fallback node and its neighbours are not.
  ASSERT_EQ(cuda::cuda_op(Op::Det, g.opset), nullptr) << "Det now has a CUDA kernel: pick another fallback op";
  ASSERT_NE(cuda::cuda_op(Op::Relu, g.opset), nullptr);
  ASSERT_NE(cuda::cuda_op(Op::Mul, g.opset), nullptr);
  auto gpu = make_session(g, "cuda");
  auto cpu = make_session(g, "cpu");
  ASSERT_TRUE(gpu && cpu);
  std::mt19937 irng(6);
  NamedTensors in = {{"x", random_tensor(DType::F32, {5, 3, 3}, irng)}};
  NamedTensors a = run_ok(*gpu, in), b = run_ok(*cpu, in);
  ASSERT_EQ(a.size(), 1u);
  ASSERT_EQ(b.size(), 1u);
  ASSERT_EQ(a[0].second.shape(), b[0].second.shape());
  ASSERT_GT(max_abs(b[0].second), 0.0);
  EXPECT_LE(scaled_max_err(a[0].second, b[0].second), 1e-5);
}

// --memory-limit: a batch whose intermediates exceed the limit fails with kOutOfMemory naming
// a tensor and its bytes; the same session then runs a smaller batch; a second session with a
// higher limit runs the big batch and matches the CPU.
TEST(CudaSessionMemory, OutOfMemoryIsAStatusAndSessionStaysUsable) {
  GPUOPT_REQUIRE_CUDA();
  const Graph g = make_cnn(7);
  // Constants are ~25 KB. Per image the conv output is 8*16*16*4 = 8 KiB, so batch 512 needs
  // at least 4 MiB for one tensor while batch 2 needs well under 100 KiB.
  constexpr size_t kLimit = 1u << 20;
  auto small = make_session(g, "cuda", "fp32", kLimit);
  ASSERT_TRUE(small);
  auto big_in = cnn_inputs(512, 8);
  auto r = small->run(big_in);
  ASSERT_FALSE(r.ok()) << "batch 512 fit in a 1 MiB limit: the limit is not enforced";
  EXPECT_EQ(r.status().code(), StatusCode::kOutOfMemory) << r.status().to_string();
  const std::string msg = r.status().to_string();
  EXPECT_NE(msg.find("out of memory allocating '"), std::string::npos) << msg;  // names the tensor
  EXPECT_NE(msg.find("requested"), std::string::npos) << msg;                   // and the bytes
  EXPECT_NE(msg.find("limit"), std::string::npos) << msg;

  // Same session, smaller batch: runs and matches the CPU (twice, so freed memory is reused).
  auto cpu = make_session(g, "cpu");
  ASSERT_TRUE(cpu);
  for (int rep = 0; rep < 2; ++rep) {
    auto small_in = cnn_inputs(2, 9 + rep);
    NamedTensors got = run_ok(*small, small_in);
    NamedTensors want = run_ok(*cpu, small_in);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_LE(scaled_max_err(got[0].second, want[0].second), 1e-4);
  }
  // And the failure repeats cleanly (nothing leaked into the budget by the failed run).
  auto again = small->run(big_in);
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.status().code(), StatusCode::kOutOfMemory);

  auto roomy = make_session(g, "cuda", "fp32", size_t{256} << 20);
  ASSERT_TRUE(roomy);
  NamedTensors got = run_ok(*roomy, big_in);
  NamedTensors want = run_ok(*cpu, big_in);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_LE(scaled_max_err(got[0].second, want[0].second), 1e-4);
}

// Session::run is thread-safe: two threads run the same CUDA session on different inputs and
// each gets the CPU's answer for its own input.
TEST(CudaSessionThreads, ConcurrentRunsOfOneSessionAreCorrect) {
  GPUOPT_REQUIRE_CUDA();
  const Graph g = make_cnn(11);
  auto gpu = make_session(g, "cuda");
  auto cpu = make_session(g, "cpu");
  ASSERT_TRUE(gpu && cpu);
  constexpr int kThreads = 2, kIters = 20;
  std::vector<NamedTensors> inputs, want;
  for (int t = 0; t < kThreads; ++t) {
    inputs.push_back(cnn_inputs(4 + t, 100 + t));  // different batch sizes too
    want.push_back(run_ok(*cpu, inputs.back()));
  }
  std::vector<int> failures(kThreads, 0);
  std::vector<std::string> first_error(kThreads);
  std::vector<std::thread> pool;
  for (int t = 0; t < kThreads; ++t)
    pool.emplace_back([&, t] {
      for (int i = 0; i < kIters; ++i) {
        auto r = gpu->run(inputs[t]);
        if (!r.ok()) {
          if (failures[t]++ == 0) first_error[t] = r.status().to_string();
          continue;
        }
        const Tensor& y = (*r)[0].second;
        if (y.shape() != want[t][0].second.shape() || scaled_max_err(y, want[t][0].second) > 1e-4) {
          if (failures[t]++ == 0) first_error[t] = "wrong result at iteration " + std::to_string(i);
        }
      }
    });
  for (auto& th : pool) th.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(failures[t], 0) << "thread " << t << ": " << first_error[t];
}

}  // namespace
}  // namespace gpuopt
