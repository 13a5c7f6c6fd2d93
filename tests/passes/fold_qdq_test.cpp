// fold_qdq: QDQ pairs around MatMul/Gemm (+ bias Add, + Relu) become one Int8Gemm whose CPU
// kernel (exact int64 accumulation) matches the unfolded QDQ graph's reference kernels.
#include "pass_test_util.h"
#include "passes/passes.h"

namespace gpuopt::testing {
namespace {

Attribute int_attr1(int64_t v) {
  Attribute a;
  a.kind = Attribute::Kind::kInt;
  a.i = v;
  return a;
}

// x [2, 5, K] f32 -> Q/DQ (scale sx) -> MatMul(W = DQ(wq [K, N], sw [N], axis 1)) [-> Add b] [-> Relu] -> y.
// gemm: x [6, K] and Gemm(transB = 1, W [N, K], axis 0, C = b).
// identity_bias: the bias reaches the Add/Gemm through two Identity nodes (torch's legacy
// exporter's form for an initializer several parameters share).
Graph qdq_linear(int64_t k, int64_t n, bool bias, bool relu, bool gemm, std::mt19937& rng, bool identity_bias = false) {
  Graph g;
  g.opset = 17;
  const ValueId x = g.add_input("x", DType::F32, gemm ? Shape{6, k} : Shape{2, 5, k});
  const ValueId sx = g.add_constant("sx", Tensor::scalar_f32(0.02f));
  const ValueId zx = g.add_constant("zx", Tensor::zeros(DType::I8, {}));
  const ValueId xq = g.add_node(Op::QuantizeLinear, "q", {x, sx, zx}, 1)[0];
  const ValueId xd = g.add_node(Op::DequantizeLinear, "dq", {xq, sx, zx}, 1)[0];
  Tensor wq = Tensor::empty(DType::I8, gemm ? Shape{n, k} : Shape{k, n});
  std::uniform_int_distribution<int> u(-127, 127);
  for (int64_t i = 0; i < wq.numel(); ++i) wq.data<int8_t>()[i] = static_cast<int8_t>(u(rng));
  Tensor sw = uniform({n}, rng, 0.001f, 0.01f);
  const ValueId wv = g.add_constant("wq", wq);
  const ValueId swv = g.add_constant("sw", sw);
  const ValueId zw = g.add_constant("zw", Tensor::zeros(DType::I8, {n}));
  AttributeMap ax;
  ax["axis"] = int_attr1(gemm ? 0 : 1);
  const ValueId wd = g.add_node(Op::DequantizeLinear, "dqw", {wv, swv, zw}, 1, ax)[0];
  ValueId b = g.add_constant("b", uniform({n}, rng));
  if (identity_bias) {
    b = g.add_node(Op::Identity, "shared_b", {b}, 1)[0];
    b = g.add_node(Op::Identity, "shared_b2", {b}, 1)[0];
  }
  ValueId y;
  if (gemm) {
    AttributeMap at;
    at["transB"] = int_attr1(1);
    std::vector<ValueId> in{xd, wd};
    if (bias) in.push_back(b);
    y = g.add_node(Op::Gemm, "gemm", in, 1, at)[0];
  } else {
    y = g.add_node(Op::MatMul, "mm", {xd, wd}, 1)[0];
    if (bias) y = g.add_node(Op::Add, "add", {y, b}, 1)[0];
  }
  if (relu) y = g.add_node(Op::Relu, "relu", {y}, 1)[0];
  g.mark_output(y);
  return g;
}

void check(bool bias, bool relu, bool gemm, bool identity_bias = false) {
  std::mt19937 rng(11);
  const int64_t k = 24, n = 12;
  Graph g = qdq_linear(k, n, bias, relu, gemm, rng, identity_bias);
  finish(g);
  Graph f = g;
  auto st = fold_qdq(&f);
  ASSERT_TRUE(st.ok()) << st.status().to_string();
  EXPECT_EQ(st->rewritten, 1);
  ASSERT_TRUE(remove_dead_nodes(&f).ok());
  finish(f);
  EXPECT_EQ(count(f, "Int8Gemm"), 1);
  EXPECT_EQ(count(f, "MatMul") + count(f, "Gemm") + count(f, "Add") + count(f, "Relu") + count(f, "Identity"), 0);
  EXPECT_EQ(count(f, "DequantizeLinear"), 0);  // both DQs are dead once folded
  EXPECT_EQ(count(f, "QuantizeLinear"), 1);    // x is still quantized on the way in
  const Tensor x = uniform(gemm ? Shape{6, k} : Shape{2, 5, k}, rng, -2, 2);
  const auto want = run_cpu(g, {x});
  const auto got = run_cpu(f, {x});
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].shape(), want[0].shape());
  EXPECT_LT(max_rel_err(got, want), 1e-5);
  if (relu) {
    double mn = 0;
    for (int64_t i = 0; i < got[0].numel(); ++i) mn = std::min(mn, got[0].get_f64(i));
    EXPECT_EQ(mn, 0.0);
  }
}

TEST(FoldQdq, MatMul) { check(false, false, false); }
TEST(FoldQdq, MatMulBiasRelu) { check(true, true, false); }
TEST(FoldQdq, MatMulBias) { check(true, false, false); }
TEST(FoldQdq, GemmTransBBias) { check(true, false, true); }
TEST(FoldQdq, GemmRelu) { check(false, true, true); }
TEST(FoldQdq, MatMulBiasBehindIdentities) { check(true, false, false, /*identity_bias=*/true); }
TEST(FoldQdq, GemmBiasBehindIdentities) { check(true, true, true, /*identity_bias=*/true); }

TEST(FoldQdq, LeavesNonZeroZeroPointsAlone) {
  std::mt19937 rng(3);
  Graph g = qdq_linear(8, 4, false, false, false, rng);
  for (Value& v : g.values())
    if (v.name == "zx") v.constant = Tensor::from_vector<int>(DType::I8, {}, {3});
  finish(g);
  auto st = fold_qdq(&g);
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->rewritten, 0);
  EXPECT_EQ(count(g, "Int8Gemm"), 0);
}

}  // namespace
}  // namespace gpuopt::testing

namespace gpuopt::testing {
namespace {

// The session pipeline at int8: a QDQ graph runs (CPU: exact QDQ semantics, no fold), a float
// graph is refused with a message that says how to quantize it.
TEST(PrecisionInt8, SessionPipeline) {
  std::mt19937 rng(5);
  Graph q = qdq_linear(8, 4, true, false, false, rng);
  finish(q);
  Graph plain;
  plain.opset = 17;
  const ValueId x = plain.add_input("x", DType::F32, {2, 3});
  plain.mark_output(plain.add_node(Op::Relu, "relu", {x}, 1)[0]);
  finish(plain);
  Graph qq = q;
  EXPECT_TRUE(run_session_passes(&qq, "cpu", "int8", true).ok());
  EXPECT_EQ(count(qq, "Int8Gemm"), 0);  // the CPU keeps the QDQ nodes: the oracle
  const Status st = run_session_passes(&plain, "cpu", "int8", true);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("no QuantizeLinear/DequantizeLinear"), std::string::npos) << st.to_string();
  EXPECT_NE(st.message().find("gpuopt quantize"), std::string::npos);
  EXPECT_FALSE(run_session_passes(&q, "cpu", "fp8", true).ok());
}

}  // namespace
}  // namespace gpuopt::testing
