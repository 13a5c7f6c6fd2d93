// fold_gemm_scale on the CPU reference (the unfolded graph's kernels are the oracle): ConvNeXt's
// layer scale, MatMul + bias on an NHWC activation, reshaped back, permuted to NCHW and multiplied
// by a [C, 1, 1] constant, folds into the Gemm; scales that are not per output column stay.
#include "pass_test_util.h"
#include "passes/passes.h"

namespace gpuopt {
namespace {

using testing::count;
using testing::finish;
using testing::max_rel_err;
using testing::run_cpu;
using testing::uniform;

// x [2, 3, 5, 8] (NHWC) -> MatMul W [8, 6] -> Add b -> [Transpose to NCHW] -> Mul(g) -> y.
// `scale` is g's shape; `permute` puts the Transpose in; `leak` also outputs the Mul's input.
Graph layer_scale(std::mt19937& rng, Shape scale, bool permute, bool leak = false, bool scalar_first = false) {
  Graph g;
  g.opset = 17;
  ValueId x = g.add_input("x", DType::F32, {g.symbol_dim("N"), 3, 5, 8});
  ValueId w = g.add_constant("w", uniform({8, 6}, rng));
  ValueId b = g.add_constant("b", uniform({6}, rng));
  ValueId s = g.add_constant("g", uniform(std::move(scale), rng, 0.5f, 2.0f));
  ValueId h = g.add_node(Op::MatMul, "mm", {x, w}, 1)[0];
  h = g.add_node(Op::Add, "bias", {h, b}, 1)[0];
  if (permute) {
    AttributeMap perm;
    perm["perm"].kind = Attribute::Kind::kInts;
    perm["perm"].ints = {0, 3, 1, 2};
    h = g.add_node(Op::Transpose, "to_nchw", {h}, 1, perm)[0];
  }
  ValueId y = g.add_node(Op::Mul, "layer_scale", scalar_first ? std::vector<ValueId>{s, h} : std::vector<ValueId>{h, s},
                         1, {}, {"y"})[0];
  g.mark_output(y);
  if (leak) g.mark_output(h);
  finish(g);
  return g;
}

void expect_same(const Graph& ref, const Graph& folded) {
  std::mt19937 in_rng(9);
  const Tensor x = uniform({2, 3, 5, 8}, in_rng, -2, 2);
  const auto want = run_cpu(ref, {x}), got = run_cpu(folded, {x});
  ASSERT_FALSE(got.empty());
  EXPECT_LT(max_rel_err(got, want), 1e-6);
}

TEST(FoldGemmScale, ConvNextLayerScaleFoldsIntoTheGemm) {
  struct Form {
    Shape scale;
    bool permute, scalar_first;
  };
  for (const Form& f : {Form{{6, 1, 1}, true, false}, Form{{6, 1, 1}, true, true}, Form{{6}, false, false},
                        Form{{1, 1, 1, 6}, false, true}, Form{{1}, true, false}}) {
    SCOPED_TRACE(shape_to_string(f.scale) + (f.permute ? " after the permute" : ""));
    std::mt19937 rng(4);
    Graph ref = layer_scale(rng, f.scale, f.permute, false, f.scalar_first);
    Graph folded = ref;
    ASSERT_TRUE(fuse_matmul_bias(&folded).ok());
    finish(folded);
    auto st = fold_gemm_scale(&folded);
    ASSERT_TRUE(st.ok()) << st.status().to_string();
    EXPECT_EQ(st->removed, 1);
    finish(folded);
    EXPECT_EQ(count(folded, "Mul"), 0);
    EXPECT_EQ(count(folded, "Gemm"), 1);
    EXPECT_EQ(folded.value(folded.outputs()[0]).name, "y");
    expect_same(ref, folded);
  }
}

TEST(FoldGemmScale, LeavesScalesThatAreNotPerColumnAndSeenIntermediates) {
  struct Form {
    Shape scale;
    bool permute, leak;
    const char* why;
  };
  for (const Form& f : {Form{{5, 1}, false, false, "per-W scale on NHWC"}, Form{{5}, true, false, "per-W scale on NCHW"},
                        Form{{3, 5, 6}, false, false, "per-pixel scale"},
                        Form{{6, 1, 1}, true, true, "the permuted value is also an output"}}) {
    SCOPED_TRACE(f.why);
    std::mt19937 rng(5);
    Graph ref = layer_scale(rng, f.scale, f.permute, f.leak);
    Graph folded = ref;
    ASSERT_TRUE(fuse_matmul_bias(&folded).ok());
    finish(folded);
    auto st = fold_gemm_scale(&folded);
    ASSERT_TRUE(st.ok());
    EXPECT_EQ(st->removed, 0);
    EXPECT_EQ(count(folded, "Mul"), 1);
    finish(folded);
    expect_same(ref, folded);
  }
}

TEST(FoldGemmScale, SharedWeightsAreNotChanged) {
  // Two Linears share W and b; only one is scaled: the other must still see the original weights.
  std::mt19937 rng(6);
  Graph g;
  g.opset = 17;
  ValueId x = g.add_input("x", DType::F32, {2, 8});
  ValueId w = g.add_constant("w", uniform({8, 6}, rng));
  ValueId b = g.add_constant("b", uniform({6}, rng));
  ValueId s = g.add_constant("g", uniform({6}, rng, 0.5f, 2.0f));
  ValueId h1 = g.add_node(Op::Add, "b1", {g.add_node(Op::MatMul, "mm1", {x, w}, 1)[0], b}, 1)[0];
  ValueId h2 = g.add_node(Op::Add, "b2", {g.add_node(Op::MatMul, "mm2", {x, w}, 1)[0], b}, 1)[0];
  ValueId y1 = g.add_node(Op::Mul, "scale", {h1, s}, 1, {}, {"y1"})[0];
  ValueId y = g.add_node(Op::Add, "sum", {y1, h2}, 1, {}, {"y"})[0];
  g.mark_output(y);
  finish(g);
  Graph folded = g;
  ASSERT_TRUE(fuse_matmul_bias(&folded).ok());
  finish(folded);
  auto st = fold_gemm_scale(&folded);
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->removed, 1);
  finish(folded);
  std::mt19937 in_rng(10);
  const Tensor in = uniform({2, 8}, in_rng, -2, 2);
  const auto want = run_cpu(g, {in}), got = run_cpu(folded, {in});
  EXPECT_LT(max_rel_err(got, want), 1e-6);
}

}  // namespace
}  // namespace gpuopt
