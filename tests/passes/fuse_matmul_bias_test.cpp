// MatMul + bias Add fused into Gemm, checked on the CPU reference: the fused graph computes what
// the unfused graph computes (MatMul and Add kernels are the oracle) for 2-D, 3-D and 4-D inputs
// with a symbolic batch, bias on either side of the Add; pairs whose MatMul output something else
// reads, or whose weight is not a constant, are left alone.
#include "backends/backend.h"
#include "passes/passes.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

namespace gpuopt {
namespace {

Tensor uniform(Shape shape, std::mt19937& rng) {
  Tensor t = Tensor::empty(DType::F32, std::move(shape));
  std::uniform_real_distribution<float> u(-1, 1);
  for (int64_t i = 0; i < t.numel(); ++i) t.set_f64(i, u(rng));
  return t;
}

int count(const Graph& g, const std::string& op) {
  int c = 0;
  for (const Node& n : g.nodes()) c += n.op_type == op;
  return c;
}

std::vector<Tensor> run(const Graph& g, const Tensor& x) {
  auto e = make_cpu_backend()->compile(g, {});
  EXPECT_TRUE(e.ok()) << e.status().to_string();
  if (!e.ok()) return {};
  auto out = (*e)->run({x}, {});
  EXPECT_TRUE(out.ok()) << out.status().to_string();
  return out.ok() ? *out : std::vector<Tensor>{};
}

void finish(Graph& g) {
  ASSERT_TRUE(g.topo_sort().ok());
  ASSERT_TRUE(g.infer_shapes().ok());
}

// x [N, ..., 24] -> MatMul W [24, 10] -> Add b [10] (or b + mm) -> Relu -> y, plus a second
// output reading the MatMul directly when `leak`.
Graph linear(std::mt19937& rng, Shape x_shape, bool bias_first, bool leak = false, bool weight_is_input = false) {
  Graph g;
  g.opset = 17;
  x_shape[0] = g.symbol_dim("N");
  ValueId x = g.add_input("x", DType::F32, x_shape);
  ValueId w = weight_is_input ? g.add_input("w", DType::F32, {24, 10}) : g.add_constant("w", uniform({24, 10}, rng));
  ValueId b = g.add_constant("b", uniform({10}, rng));
  ValueId mm = g.add_node(Op::MatMul, "mm", {x, w}, 1)[0];
  ValueId a = g.add_node(Op::Add, "bias", bias_first ? std::vector<ValueId>{b, mm} : std::vector<ValueId>{mm, b}, 1, {},
                         {"h"})[0];
  ValueId y = g.add_node(Op::Relu, "relu", {a}, 1, {}, {"y"})[0];
  g.mark_output(y);
  if (leak) g.mark_output(mm);
  finish(g);
  return g;
}

TEST(FuseMatMulBias, LinearLayersBecomeGemmAndMatchTheUnfusedGraph) {
  for (const Shape& s : {Shape{5, 24}, Shape{3, 7, 24}, Shape{2, 3, 5, 24}})
    for (bool bias_first : {false, true}) {
      std::mt19937 rng(7);
      Graph ref = linear(rng, s, bias_first);
      Graph fused = ref;
      auto st = fuse_matmul_bias(&fused);
      ASSERT_TRUE(st.ok()) << st.status().to_string();
      EXPECT_EQ(st->removed, 1);
      finish(fused);
      EXPECT_EQ(count(fused, "Gemm"), 1);
      EXPECT_EQ(count(fused, "MatMul"), 0);
      EXPECT_EQ(count(fused, "Add"), 0);
      EXPECT_EQ(count(fused, "Reshape"), s.size() == 2 ? 0 : 2);  // flatten and back
      Shape in = s;
      in[0] = 4;  // a batch the graph did not see at build time
      std::mt19937 in_rng(9);
      const Tensor x = uniform(in, in_rng);
      std::vector<Tensor> want = run(ref, x), got = run(fused, x);
      ASSERT_EQ(got.size(), 1u);
      ASSERT_EQ(got[0].shape(), want[0].shape());
      double err = 0, scale = 0;
      for (int64_t i = 0; i < want[0].numel(); ++i) {
        err = std::max(err, std::abs(got[0].get_f64(i) - want[0].get_f64(i)));
        scale = std::max(scale, std::abs(want[0].get_f64(i)));
      }
      EXPECT_GT(scale, 0.1);
      EXPECT_LE(err, 1e-5 * std::max(1.0, scale)) << shape_to_string(s) << (bias_first ? " bias first" : "");
    }
}

TEST(FuseMatMulBias, LeavesPairsOthersCanSeeOrWithoutConstantWeights) {
  std::mt19937 rng(8);
  Graph leak = linear(rng, {3, 7, 24}, false, /*leak=*/true);
  auto st = fuse_matmul_bias(&leak);
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->removed, 0);  // the MatMul output is a graph output too
  Graph dyn = linear(rng, {3, 7, 24}, false, false, /*weight_is_input=*/true);
  st = fuse_matmul_bias(&dyn);
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->removed, 0);
  EXPECT_EQ(count(dyn, "MatMul"), 1);
}

}  // namespace
}  // namespace gpuopt
