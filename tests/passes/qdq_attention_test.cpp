// qdq_attention_in_float on a QDQ attention as gpuopt quantize writes it: the round trips in front
// of Q.K^T and P.V are bypassed, after which fuse_attention finds the attention; a MatMul with a
// quantized weight, and a round trip whose two halves use different scales, stay.
#include "pass_test_util.h"
#include "passes/passes.h"

namespace gpuopt {
namespace {

using testing::count;
using testing::finish;
using testing::max_rel_err;
using testing::run_cpu;
using testing::uniform;

AttributeMap perm(std::vector<int64_t> p) {
  AttributeMap a;
  a["perm"].kind = Attribute::Kind::kInts;
  a["perm"].ints = std::move(p);
  return a;
}

struct Qdq {
  ValueId scale, zero, other_scale;
};

Qdq qdq_constants(Graph& g) {
  Tensor z = Tensor::empty(DType::I8, {});
  z.set_f64(0, 0);
  Tensor s = Tensor::empty(DType::F32, {});
  s.set_f64(0, 0.02);
  Tensor s2 = Tensor::empty(DType::F32, {});
  s2.set_f64(0, 0.04);
  return {g.add_constant("s", std::move(s)), g.add_constant("z", std::move(z)), g.add_constant("s2", std::move(s2))};
}

ValueId round_trip(Graph& g, const Qdq& c, ValueId x, const std::string& name, bool same_scale = true) {
  ValueId q = g.add_node(Op::QuantizeLinear, name + "_q", {x, c.scale, c.zero}, 1)[0];
  return g.add_node(Op::DequantizeLinear, name + "_dq", {q, same_scale ? c.scale : c.other_scale, c.zero}, 1)[0];
}

// q, k, v [B, H, S, D] -> QDQ -> softmax(q k^T / sqrt(D)) v, the exporters' unfused attention with
// gpuopt quantize's round trips in front of both matmuls.
Graph qdq_attention(bool same_scale) {
  Graph g;
  g.opset = 17;
  const Shape s{2, 2, 5, 8};
  ValueId q = g.add_input("q", DType::F32, s), k = g.add_input("k", DType::F32, s), v = g.add_input("v", DType::F32, s);
  const Qdq c = qdq_constants(g);
  ValueId kt = g.add_node(Op::Transpose, "kt", {k}, 1, perm({0, 1, 3, 2}))[0];
  ValueId scores = g.add_node(Op::MatMul, "qk", {round_trip(g, c, q, "q", same_scale), round_trip(g, c, kt, "kt")}, 1)[0];
  Tensor inv = Tensor::empty(DType::F32, {});
  inv.set_f64(0, 1.0 / std::sqrt(8.0));
  ValueId scaled = g.add_node(Op::Mul, "scale", {scores, g.add_constant("inv", std::move(inv))}, 1)[0];
  AttributeMap ax;
  ax["axis"].kind = Attribute::Kind::kInt;
  ax["axis"].i = -1;
  ValueId p = g.add_node(Op::Softmax, "softmax", {scaled}, 1, ax)[0];
  ValueId y = g.add_node(Op::MatMul, "pv", {round_trip(g, c, p, "p"), round_trip(g, c, v, "v")}, 1, {}, {"y"})[0];
  g.mark_output(y);
  finish(g);
  return g;
}

TEST(QdqAttention, RoundTripsBeforeActivationMatMulsAreBypassedAndTheAttentionFuses) {
  Graph ref = qdq_attention(true);
  Graph g = ref;
  auto st = qdq_attention_in_float(&g);
  ASSERT_TRUE(st.ok()) << st.status().to_string();
  EXPECT_EQ(st->rewritten, 2);
  ASSERT_TRUE(remove_dead_nodes(&g).ok());
  EXPECT_EQ(count(g, "QuantizeLinear"), 0);
  EXPECT_EQ(count(g, "DequantizeLinear"), 0);
  finish(g);
  ASSERT_TRUE(fuse_attention(&g).ok());
  finish(g);
  EXPECT_EQ(count(g, "Attention"), 1);
  EXPECT_EQ(count(g, "Softmax"), 0);
  // Against the QDQ graph on the CPU reference: only the quantization of q, k^T, p and v differs
  // (steps of 0.02 on values of about 1: a few percent at most, far from a wrong attention).
  std::mt19937 rng(3);
  const std::vector<Tensor> in{uniform({2, 2, 5, 8}, rng), uniform({2, 2, 5, 8}, rng), uniform({2, 2, 5, 8}, rng)};
  const auto want = run_cpu(ref, in), got = run_cpu(g, in);
  ASSERT_FALSE(got.empty());
  const double err = max_rel_err(got, want);
  EXPECT_LT(err, 0.05);
  EXPECT_GT(err, 0.0);  // the CPU reference keeps the QDQ rounding: the two really differ
}

TEST(QdqAttention, LeavesWeightsAndRoundTripsThatAreNotOne) {
  {  // different scales on the Q and the DQ of one operand: not a round trip
    Graph g = qdq_attention(false);
    auto st = qdq_attention_in_float(&g);
    ASSERT_TRUE(st.ok());
    EXPECT_EQ(st->rewritten, 1);  // P.V only
  }
  {  // a MatMul with a quantized constant weight: fold_qdq's int8 GEMM takes it
    Graph g;
    g.opset = 17;
    std::mt19937 rng(4);
    ValueId x = g.add_input("x", DType::F32, {3, 8});
    ValueId w = g.add_constant("w", uniform({8, 4}, rng));
    const Qdq c = qdq_constants(g);
    ValueId y = g.add_node(Op::MatMul, "mm", {round_trip(g, c, x, "x"), round_trip(g, c, w, "w")}, 1, {}, {"y"})[0];
    g.mark_output(y);
    finish(g);
    auto st = qdq_attention_in_float(&g);
    ASSERT_TRUE(st.ok());
    EXPECT_EQ(st->rewritten, 0);
    EXPECT_EQ(count(g, "QuantizeLinear"), 2);
  }
}

}  // namespace
}  // namespace gpuopt
