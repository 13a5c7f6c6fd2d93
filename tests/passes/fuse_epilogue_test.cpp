// The epilogue fusions on the CPU reference (the unfused graph's kernels are the oracle):
// Gemm -> [Reshape] -> Relu|Gelu into FusedGemm, Add -> LayerNormalization into
// SkipLayerNormalization (with and without the sum kept), and the patterns that must stay:
// intermediates read elsewhere, broadcast addends, a LayerNorm over another axis or with its
// statistics read.
#include "pass_test_util.h"
#include "passes/passes.h"

namespace gpuopt {
namespace {

using testing::count;
using testing::finish;
using testing::max_rel_err;
using testing::run_cpu;
using testing::uniform;

// x [N, (3,) 24] -> MatMul W [24, 16] -> Add b -> act -> y; `leak` also outputs the pre-activation.
Graph linear_act(std::mt19937& rng, bool three_d, const std::string& act, const std::string& approx, bool leak) {
  Graph g;
  g.opset = 20;
  Shape xs = three_d ? Shape{g.symbol_dim("N"), 3, 24} : Shape{g.symbol_dim("N"), 24};
  ValueId x = g.add_input("x", DType::F32, xs);
  ValueId w = g.add_constant("w", uniform({24, 16}, rng));
  ValueId b = g.add_constant("b", uniform({16}, rng));
  ValueId mm = g.add_node(Op::MatMul, "mm", {x, w}, 1)[0];
  ValueId h = g.add_node(Op::Add, "bias", {mm, b}, 1, {}, {"h"})[0];
  AttributeMap attrs;
  if (!approx.empty()) attrs["approximate"] = string_attr(approx);
  ValueId y = g.add_node(act == "Relu" ? Op::Relu : Op::Gelu, "act", {h}, 1, attrs, {"y"})[0];
  g.mark_output(y);
  if (leak) g.mark_output(h);
  finish(g);
  return g;
}

TEST(FuseGemmActivation, ReluAndBothGelusRideInTheGemmAndMatchTheUnfusedGraph) {
  for (bool three_d : {false, true})
    for (auto [act, approx] : {std::pair<std::string, std::string>{"Relu", ""}, {"Gelu", "none"}, {"Gelu", "tanh"}}) {
      SCOPED_TRACE(act + " " + approx + (three_d ? " 3-D" : " 2-D"));
      std::mt19937 rng(3);
      Graph ref = linear_act(rng, three_d, act, approx, false);
      Graph fused = ref;
      ASSERT_TRUE(fuse_matmul_bias(&fused).ok());
      auto st = fuse_gemm_activation(&fused);
      ASSERT_TRUE(st.ok()) << st.status().to_string();
      EXPECT_EQ(st->removed, 1);
      finish(fused);
      EXPECT_EQ(count(fused, "FusedGemm"), 1);
      EXPECT_EQ(count(fused, act), 0);
      for (const Node& n : fused.nodes())
        if (n.op_type == "FusedGemm") {
          EXPECT_EQ(n.domain, "com.microsoft");
          EXPECT_EQ(n.attr_s("activation", ""), act);
          if (act == "Gelu") { EXPECT_EQ(n.attr_s("approximate", ""), approx); }
        }
      std::mt19937 in_rng(5);
      const Tensor x = uniform(three_d ? Shape{4, 3, 24} : Shape{5, 24}, in_rng, -2, 2);
      const auto want = run_cpu(ref, {x}), got = run_cpu(fused, {x});
      EXPECT_LT(max_rel_err(got, want), 1e-6);
      ASSERT_FALSE(got.empty());
      EXPECT_EQ(fused.value(fused.outputs()[0]).name, "y");
    }
}

TEST(FuseGemmActivation, LeavesAGemmWhoseOutputIsAlsoRead) {
  std::mt19937 rng(3);
  Graph g = linear_act(rng, true, "Gelu", "none", /*leak=*/true);
  ASSERT_TRUE(fuse_matmul_bias(&g).ok());
  auto st = fuse_gemm_activation(&g);
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->removed, 0);
  EXPECT_EQ(count(g, "FusedGemm"), 0);
  EXPECT_EQ(count(g, "Gelu"), 1);
}

TEST(FuseGemmActivation, LeavesAnActivationAfterAPlainMatMul) {
  std::mt19937 rng(3);
  Graph g = linear_act(rng, true, "Relu", "", false);  // no fuse_matmul_bias: MatMul + Add stay
  auto st = fuse_gemm_activation(&g);
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->removed, 0);
}

struct SkipLnOptions {
  bool keep_sum = false;       // a second reader of the sum (pre-LN residual stream)
  bool broadcast_b = false;    // b is [16], broadcast by the Add: not fused
  int64_t axis = -1;           // LayerNormalization's axis
  bool read_mean = false;      // LayerNormalization's Mean output is a graph output: not fused
  bool no_bias = false;
};

// a [N, 5, 16] + b -> LayerNormalization(scale, bias) -> y [, + sum -> z]
Graph add_layernorm(std::mt19937& rng, const SkipLnOptions& o) {
  Graph g;
  g.opset = 17;
  const int64_t n = g.symbol_dim("N");
  ValueId a = g.add_input("a", DType::F32, {n, 5, 16});
  ValueId b = o.broadcast_b ? g.add_constant("b", uniform({16}, rng)) : g.add_input("b", DType::F32, {n, 5, 16});
  ValueId s = g.add_node(Op::Add, "residual", {a, b}, 1, {}, {"s"})[0];
  ValueId scale = g.add_constant("scale", uniform(o.axis == -1 ? Shape{16} : Shape{5, 16}, rng, 0.5, 1.5));
  std::vector<ValueId> ins{s, scale};
  if (!o.no_bias) ins.push_back(g.add_constant("beta", uniform(o.axis == -1 ? Shape{16} : Shape{5, 16}, rng)));
  auto outs = g.add_node(Op::LayerNormalization, "ln", ins, o.read_mean ? 2 : 1,
                         {{"axis", int_attr(o.axis)}, {"epsilon", float_attr(1e-5f)}}, {"y", "mean"});
  g.mark_output(outs[0]);
  if (o.read_mean) g.mark_output(outs[1]);
  if (o.keep_sum) g.mark_output(g.add_node(Op::Add, "next_residual", {s, outs[0]}, 1, {}, {"z"})[0]);
  finish(g);
  return g;
}

void expect_same_outputs(const Graph& ref, const Graph& fused, const std::vector<Tensor>& in) {
  const auto want = run_cpu(ref, in), got = run_cpu(fused, in);
  ASSERT_EQ(want.size(), got.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_LT(max_rel_err({got[i]}, {want[i]}), 1e-6) << "output " << i;
}

TEST(FuseSkipLayerNorm, ResidualAddAndLayerNormBecomeOneNode) {
  for (bool no_bias : {false, true}) {
    std::mt19937 rng(11);
    SkipLnOptions o;
    o.no_bias = no_bias;
    Graph ref = add_layernorm(rng, o);
    Graph fused = ref;
    auto st = fuse_skip_layernorm(&fused);
    ASSERT_TRUE(st.ok()) << st.status().to_string();
    EXPECT_EQ(st->removed, 1);
    finish(fused);
    EXPECT_EQ(count(fused, "SkipLayerNormalization"), 1);
    EXPECT_EQ(count(fused, "Add"), 0);
    EXPECT_EQ(count(fused, "LayerNormalization"), 0);
    for (const Node& n : fused.nodes())
      if (n.op_type == "SkipLayerNormalization") { EXPECT_EQ(n.outputs.size(), 1u); }  // the sum is not kept
    std::mt19937 in_rng(2);
    expect_same_outputs(ref, fused, {uniform({3, 5, 16}, in_rng, -3, 3), uniform({3, 5, 16}, in_rng, -3, 3)});
  }
}

TEST(FuseSkipLayerNorm, KeepsTheSumForItsOtherReaders) {
  std::mt19937 rng(11);
  SkipLnOptions o;
  o.keep_sum = true;
  Graph ref = add_layernorm(rng, o);
  Graph fused = ref;
  auto st = fuse_skip_layernorm(&fused);
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->removed, 1);
  finish(fused);
  EXPECT_EQ(count(fused, "SkipLayerNormalization"), 1);
  EXPECT_EQ(count(fused, "Add"), 1);  // the next residual only
  for (const Node& n : fused.nodes())
    if (n.op_type == "SkipLayerNormalization") {
      ASSERT_EQ(n.outputs.size(), 4u);
      EXPECT_EQ(fused.value(n.outputs[3]).name, "s");
    }
  std::mt19937 in_rng(2);
  expect_same_outputs(ref, fused, {uniform({2, 5, 16}, in_rng, -3, 3), uniform({2, 5, 16}, in_rng, -3, 3)});
}

TEST(FuseSkipLayerNorm, LeavesBroadcastAddendsOtherAxesAndReadStatistics) {
  for (int which = 0; which < 3; ++which) {
    SCOPED_TRACE(which);
    std::mt19937 rng(11);
    SkipLnOptions o;
    o.broadcast_b = which == 0;
    o.axis = which == 1 ? 1 : -1;
    o.read_mean = which == 2;
    Graph g = add_layernorm(rng, o);
    auto st = fuse_skip_layernorm(&g);
    ASSERT_TRUE(st.ok());
    EXPECT_EQ(st->removed, 0);
    EXPECT_EQ(count(g, "SkipLayerNormalization"), 0);
  }
}

}  // namespace
}  // namespace gpuopt
