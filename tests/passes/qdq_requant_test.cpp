// drop_requantize: Q(DQ(q)) with one scale and zero point is q. The CPU reference must give the
// same bits before and after the rewrite, on values spread over the whole int8 range (saturated
// ones too) and for nonzero zero points; a re-quantize to another scale or zero point, or a Q whose
// output is a graph output, stays. In the int8 GPU pipeline (passes only, no GPU needed), ResNet's
// pooled stem as gpuopt quantize writes it (the pool's output in its input's range) ends with the
// conv after the pool reading the pooled int8 codes directly.
#include "pass_test_util.h"
#include "qdq_builder.h"

namespace gpuopt {
namespace {

using testing::count;
using testing::expect_same_bits;
using testing::finish;
using testing::run_cpu;
using testing::uniform;

struct Case {
  float second_scale = 0.05f;  // the re-quantize's scale (0.05: the same as the first)
  int64_t zero = 3, second_zero = 3;
  bool q_is_output = false;     // the re-quantize's codes are a graph output
};

// x [2, 8, 5, 5] -> Q(0.05, zero) -> DQ -> Q(second scale, second zero) -> DQ -> Sigmoid -> y.
Graph requant_graph(const Case& c) {
  test::QBuilder b;
  Graph& g = b.g;
  g.opset = 17;
  ValueId x = g.add_input("x", DType::F32, {2, 8, 5, 5});
  ValueId dq = b.dequantize(b.quantize(x, 0.05f, c.zero));
  ValueId q2 = b.quantize(dq, c.second_scale, c.second_zero);
  g.mark_output(g.add_node(Op::Sigmoid, "sig", {b.dequantize(q2)}, 1)[0]);
  if (c.q_is_output) g.mark_output(q2);
  finish(g);
  return g;
}

std::vector<Tensor> inputs() {
  std::mt19937 rng(9);
  Tensor x = uniform({2, 8, 5, 5}, rng, -9.f, 9.f);  // beyond the int8 range at 0.05: saturates
  for (int64_t i = 0; i < x.numel(); i += 5) x.set_f64(i, 0.05 * static_cast<double>(i % 60 - 30) + 0.025);  // ties
  return {x};
}

TEST(QdqRequant, DropsTheSameScaleRequantizeWithTheSameBits) {
  for (int64_t zero : {0, 3, -20}) {
    Graph ref = requant_graph({.zero = zero, .second_zero = zero});
    Graph g = ref;
    auto st = drop_requantize(&g);
    ASSERT_TRUE(st.ok()) << st.status().to_string();
    EXPECT_EQ(st->rewritten, 1) << "zero point " << zero;
    EXPECT_EQ(count(g, "QuantizeLinear"), 1);
    const auto in = inputs();
    const auto want = run_cpu(ref, in), got = run_cpu(g, in);
    ASSERT_FALSE(got.empty());
    expect_same_bits(got, want);
  }
}

TEST(QdqRequant, KeepsARequantizeToAnotherScaleOrZeroPointOrAnOutput) {
  for (const Case& c : {Case{.second_scale = 0.07f}, Case{.zero = 3, .second_zero = 4}, Case{.q_is_output = true}}) {
    Graph g = requant_graph(c);
    auto st = drop_requantize(&g);
    ASSERT_TRUE(st.ok()) << st.status().to_string();
    EXPECT_EQ(st->rewritten, 0);
    EXPECT_EQ(count(g, "QuantizeLinear"), 2);
  }
}

AttributeMap pool_attrs() {
  AttributeMap a;
  a["kernel_shape"].kind = Attribute::Kind::kInts;
  a["kernel_shape"].ints = {3, 3};
  a["strides"].kind = Attribute::Kind::kInts;
  a["strides"].ints = {2, 2};
  a["pads"].kind = Attribute::Kind::kInts;
  a["pads"].ints = {1, 1, 1, 1};
  return a;
}

// The stem: conv -> Relu -> Q(0.03) -> DQ -> MaxPool -> Q(pool_scale) -> DQ -> conv. With the pool's
// output in its input's range (0.03) the GPU pipeline leaves one quantize behind the pool and no
// dequantize before the second conv: it reads the pooled int8 codes. With another scale (0.035,
// the pool calibrated on its own) the requantize stays; so it does with qdq_requant off.
TEST(QdqRequant, TheInt8GpuPipelineFeedsThePooledCodesToTheNextConv) {
  auto stem = [](float pool_scale) {
    test::QBuilder b;
    Graph& g = b.g;
    g.opset = 17;
    ValueId x = g.add_input("x", DType::F32, {2, 16, 16, 16});
    ValueId c0 = g.add_node(Op::Relu, "relu0", {b.conv(b.quantize(x, 0.02f), 16, 32, 3, 1, 1, true)}, 1)[0];
    ValueId p = g.add_node(Op::MaxPool, "pool", {b.dequantize(b.quantize(c0, 0.03f))}, 1, pool_attrs())[0];
    g.mark_output(b.conv(b.quantize(p, pool_scale), 32, 32, 1, 0, 1, true));
    finish(g);
    return std::move(b.g);
  };
  struct Want {
    float pool_scale;
    const char* off;
    int dequantizes;  // DequantizeLinear nodes left (the first conv reads the input's codes: none there)
  };
  for (const Want& w : {Want{0.03f, "", 0}, Want{0.03f, "qdq_requant", 1}, Want{0.035f, "", 1}}) {
    Graph g = stem(w.pool_scale);
    setenv("GPUOPT_DISABLE_FUSION", w.off, 1);
    const Status st = run_session_passes(&g, "cuda", "int8", true);
    unsetenv("GPUOPT_DISABLE_FUSION");
    ASSERT_TRUE(st.ok()) << st.to_string();
    EXPECT_EQ(count(g, "DequantizeLinear"), w.dequantizes) << "pool scale " << w.pool_scale << ", off '" << w.off << "'";
    EXPECT_GE(count(g, "Int8Conv"), 1);
  }
}

}  // namespace
}  // namespace gpuopt
