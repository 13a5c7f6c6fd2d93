// GELU written element by element becomes one Gelu node, checked on the CPU reference: the fused
// graph computes what the unfused graph computes, for the Erf and Tanh forms, x^3 as Pow or as
// x * x * x, and each of the three orders of the outer products. Chains with a wrong constant or
// an intermediate something else reads stay as they are.
#include "pass_test_util.h"
#include "passes/passes.h"

namespace gpuopt {
namespace {

using testing::count;
using testing::finish;
using testing::max_rel_err;
using testing::run_cpu;
using testing::uniform;

ValueId scalar(Graph& g, const std::string& name, double v) {
  return g.add_constant(name, Tensor::from_vector<float>(DType::F32, {}, {static_cast<float>(v)}));
}

enum class Outer { kXtThenHalf, kTHalfThenX, kXHalfThenT };

// y = gelu(x) written out; `leak` also outputs the Add(t, 1) intermediate; `half` is the 0.5.
Graph gelu_graph(bool tanh_form, bool pow_cube, Outer outer, bool leak = false, double half = 0.5) {
  Graph g;
  g.opset = 17;
  ValueId x = g.add_input("x", DType::F32, {g.symbol_dim("N"), 7, 33});
  ValueId t;
  if (!tanh_form) {
    ValueId u = g.add_node(Op::Div, "div", {x, scalar(g, "sqrt2", 1.4142135623730951)}, 1)[0];
    t = g.add_node(Op::Erf, "erf", {u}, 1)[0];
  } else {
    ValueId cube = pow_cube ? g.add_node(Op::Pow, "pow", {x, scalar(g, "three", 3.0)}, 1)[0]
                            : g.add_node(Op::Mul, "cube", {g.add_node(Op::Mul, "sq", {x, x}, 1)[0], x}, 1)[0];
    ValueId c = g.add_node(Op::Mul, "c", {scalar(g, "k", 0.044715), cube}, 1)[0];
    ValueId inner = g.add_node(Op::Add, "inner", {x, c}, 1)[0];
    ValueId u = g.add_node(Op::Mul, "scale", {inner, scalar(g, "s2pi", 0.7978845608028654)}, 1)[0];
    t = g.add_node(Op::Tanh, "tanh", {u}, 1)[0];
  }
  ValueId one = g.add_node(Op::Add, "one", {t, scalar(g, "one_c", 1.0)}, 1)[0];
  ValueId y;
  if (outer == Outer::kXtThenHalf) {
    y = g.add_node(Op::Mul, "m2", {g.add_node(Op::Mul, "m1", {x, one}, 1)[0], scalar(g, "half", half)}, 1, {}, {"y"})[0];
  } else if (outer == Outer::kTHalfThenX) {
    y = g.add_node(Op::Mul, "m2", {g.add_node(Op::Mul, "m1", {one, scalar(g, "half", half)}, 1)[0], x}, 1, {}, {"y"})[0];
  } else {
    y = g.add_node(Op::Mul, "m2", {g.add_node(Op::Mul, "m1", {x, scalar(g, "half", half)}, 1)[0], one}, 1, {}, {"y"})[0];
  }
  g.mark_output(y);
  if (leak) g.mark_output(one);
  finish(g);
  return g;
}

TEST(FuseGelu, EveryFormBecomesOneGeluAndMatchesTheUnfusedGraph) {
  for (bool tanh_form : {false, true})
    for (bool pow_cube : {true, false})
      for (Outer outer : {Outer::kXtThenHalf, Outer::kTHalfThenX, Outer::kXHalfThenT}) {
        if (!tanh_form && !pow_cube) continue;  // the cube is only in the tanh form
        const Graph ref = gelu_graph(tanh_form, pow_cube, outer);
        Graph fused = ref;
        auto st = fuse_gelu(&fused);
        ASSERT_TRUE(st.ok()) << st.status().to_string();
        finish(fused);
        EXPECT_EQ(count(fused, "Gelu"), 1) << tanh_form << pow_cube << static_cast<int>(outer);
        EXPECT_EQ(fused.nodes().size(), 1u);
        EXPECT_EQ(fused.nodes()[0].attr_s("approximate", "none"), tanh_form ? "tanh" : "none");
        EXPECT_EQ(fused.value(fused.outputs()[0]).name, "y");
        std::mt19937 rng(3);
        const Tensor x = uniform({4, 7, 33}, rng, -5, 5);
        EXPECT_LE(max_rel_err(run_cpu(fused, {x}), run_cpu(ref, {x})), 1e-6);
      }
}

TEST(FuseGelu, LeavesChainsThatDoNotComputeGeluOrThatOthersRead) {
  for (Graph g : {gelu_graph(false, true, Outer::kXtThenHalf, /*leak=*/true),
                  gelu_graph(false, true, Outer::kXtThenHalf, false, /*half=*/0.6),
                  gelu_graph(true, true, Outer::kXHalfThenT, false, /*half=*/0.4)}) {
    const size_t before = g.nodes().size();
    auto st = fuse_gelu(&g);
    ASSERT_TRUE(st.ok());
    EXPECT_EQ(st->removed, 0);
    EXPECT_EQ(g.nodes().size(), before);
    EXPECT_EQ(count(g, "Gelu"), 0);
  }
}

}  // namespace
}  // namespace gpuopt
