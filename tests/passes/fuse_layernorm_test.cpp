// LayerNorm written op by op becomes one LayerNormalization, checked on the CPU reference against
// the unfused graph: opset 17 (ReduceMean axes attribute) and 18 (axes input), Pow or Mul for the
// square, with and without gamma/beta, a residual reading x; and the graphs that must stay: a mean
// over another axis, the centred value read elsewhere, a computed epsilon.
#include "pass_test_util.h"
#include "passes/passes.h"

namespace gpuopt {
namespace {

using testing::count;
using testing::finish;
using testing::max_rel_err;
using testing::run_cpu;
using testing::uniform;

struct Form {
  int opset = 17;
  bool mul_square = false;  // Mul(d, d) instead of Pow(d, 2)
  bool gamma = true, beta = true;
  int64_t axis = -1;        // both ReduceMeans
  bool leak_centred = false;
  bool computed_eps = false;
};

Graph decomposed(const Form& f) {
  std::mt19937 rng(4);
  Graph g;
  g.opset = f.opset;
  ValueId x = g.add_input("x", DType::F32, {g.symbol_dim("N"), 6, 20});
  auto mean = [&](ValueId v, const char* name) {
    if (f.opset >= 18) {
      ValueId axes = g.add_constant(std::string(name) + "/axes", Tensor::from_vector<int64_t>(DType::I64, {1}, {f.axis}));
      return g.add_node(Op::ReduceMean, name, {v, axes}, 1, {{"keepdims", int_attr(1)}})[0];
    }
    return g.add_node(Op::ReduceMean, name, {v}, 1, {{"axes", ints_attr({f.axis})}, {"keepdims", int_attr(1)}})[0];
  };
  auto scalar = [&](const char* name, float v) {
    return g.add_constant(name, Tensor::from_vector<float>(DType::F32, {}, {v}));
  };
  ValueId m = mean(x, "mean");
  ValueId d = g.add_node(Op::Sub, "centre", {x, m}, 1)[0];
  ValueId sq = f.mul_square ? g.add_node(Op::Mul, "square", {d, d}, 1)[0]
                            : g.add_node(Op::Pow, "square", {d, scalar("two", 2.f)}, 1)[0];
  ValueId var = mean(sq, "var");
  ValueId eps = f.computed_eps ? g.add_node(Op::Abs, "eps_abs", {scalar("eps", -1e-5f)}, 1)[0] : scalar("eps", 1e-5f);
  ValueId ve = g.add_node(Op::Add, "var_eps", {var, eps}, 1)[0];
  ValueId sd = g.add_node(Op::Sqrt, "std", {ve}, 1)[0];
  ValueId y = g.add_node(Op::Div, "normed", {d, sd}, 1)[0];
  if (f.gamma) y = g.add_node(Op::Mul, "gamma", {y, g.add_constant("g", uniform({20}, rng, 0.5, 1.5))}, 1)[0];
  if (f.beta) y = g.add_node(Op::Add, "beta", {g.add_constant("b", uniform({1, 1, 20}, rng)), y}, 1)[0];
  ValueId out = g.add_node(Op::Add, "residual", {y, x}, 1, {}, {"y"})[0];  // x read outside too
  g.mark_output(out);
  if (f.leak_centred) g.mark_output(d);
  finish(g);
  return g;
}

TEST(FuseLayerNorm, EachDecomposedFormBecomesOneLayerNormalization) {
  std::vector<Form> forms(5);
  forms[1].opset = 18;
  forms[2].mul_square = true;
  forms[3].beta = false;
  forms[4].gamma = forms[4].beta = false;
  for (size_t i = 0; i < forms.size(); ++i) {
    SCOPED_TRACE(i);
    Graph ref = decomposed(forms[i]);
    Graph fused = ref;
    auto st = fuse_layernorm(&fused);
    ASSERT_TRUE(st.ok()) << st.status().to_string();
    finish(fused);
    EXPECT_EQ(count(fused, "LayerNormalization"), 1);
    EXPECT_EQ(count(fused, "ReduceMean"), 0);
    EXPECT_EQ(count(fused, "Sqrt"), 0);
    EXPECT_EQ(count(fused, "Add"), 1);  // the residual
    std::mt19937 rng(8);
    const std::vector<Tensor> in{uniform({3, 6, 20}, rng, -4, 4)};
    EXPECT_LT(max_rel_err(run_cpu(fused, in), run_cpu(ref, in)), 1e-5);
  }
}

TEST(FuseLayerNorm, LeavesOtherAxesReadIntermediatesAndComputedEpsilon) {
  std::vector<Form> forms(3);
  forms[0].axis = 1;
  forms[1].leak_centred = true;
  forms[2].computed_eps = true;
  for (size_t i = 0; i < forms.size(); ++i) {
    SCOPED_TRACE(i);
    Graph g = decomposed(forms[i]);
    auto st = fuse_layernorm(&g);
    ASSERT_TRUE(st.ok());
    EXPECT_EQ(st->removed, 0);
    EXPECT_EQ(count(g, "LayerNormalization"), 0);
  }
}

}  // namespace
}  // namespace gpuopt
