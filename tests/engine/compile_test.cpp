// engine/compile.h: the typed pipeline Session::init runs — the passes it ran with their
// statistics, the optimized graph and an executable that computes the model.
#include "engine/compile.h"

#include <gtest/gtest.h>

namespace gpuopt {
namespace {

// y = relu(x @ W + B) with W = 0.5 everywhere and B = 1: MatMul+Add -> Gemm, Gemm+Relu -> FusedGemm.
Graph linear_relu() {
  Graph g;
  ValueId x = g.add_input("x", DType::F32, {2, 4});
  ValueId w = g.add_constant("W", Tensor::from_vector(DType::F32, {4, 3}, std::vector<float>(12, 0.5f)));
  ValueId b = g.add_constant("B", Tensor::from_vector(DType::F32, {3}, std::vector<float>(3, 1.0f)));
  ValueId mm = g.add_node(Op::MatMul, "mm", {x, w}, 1)[0];
  ValueId add = g.add_node(Op::Add, "add", {mm, b}, 1)[0];
  g.mark_output(g.add_node(Op::Relu, "relu", {add}, 1)[0]);
  return g;
}

TEST(Compile, KeepsThePassesItRanAndRunsTheModel) {
  EngineOptions o;
  auto c = compile(linear_relu(), o);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  int matmul_bias = -1, activation = -1;
  for (const PassRecord& p : c->passes) {
    if (p.name == "fuse_matmul_bias") matmul_bias = p.stats.removed;
    if (p.name == "fuse_gemm_activation") activation = p.stats.removed;
  }
  EXPECT_GE(matmul_bias, 1);
  EXPECT_EQ(activation, 1);  // the Relu went into the Gemm
  ASSERT_EQ(c->graph->nodes().size(), 1u);
  EXPECT_EQ(c->graph->nodes()[0].op_type, "FusedGemm");
  const Tensor x = Tensor::from_vector(DType::F32, {2, 4}, std::vector<float>{1, 2, 3, 4, -4, -3, -2, -1});
  auto y = c->exe->run({x}, {});
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  // Row sums times 0.5 plus 1, through Relu: 6 and 0 (max(-5 + 1, 0)).
  for (int64_t j = 0; j < 3; ++j) {
    EXPECT_FLOAT_EQ(static_cast<float>(y->at(0).get_f64(j)), 6.0f);
    EXPECT_FLOAT_EQ(static_cast<float>(y->at(0).get_f64(3 + j)), 0.0f);
  }
}

TEST(Compile, OptionsAreTyped) {
  auto p = parse_precision("bf16");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(*p, Precision::kBf16);
  EXPECT_EQ(precision_name(Precision::kInt8), "int8");
  auto bad = parse_precision("int4");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "precision 'int4' is not one of fp32, fp16, bf16, int8, fp8");
  EngineOptions o;
  o.optimize = false;  // the precision conversion alone
  o.precision = Precision::kFp16;
  auto c = compile(linear_relu(), o);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  ASSERT_EQ(c->passes.size(), 1u);
  EXPECT_EQ(c->passes[0].name, "convert_precision");
  int casts = 0, matmuls = 0;
  for (const Node& n : c->graph->nodes()) {
    casts += n.op_type == "Cast";
    matmuls += n.op_type == "MatMul";
  }
  EXPECT_GE(casts, 2) << "f32 in and out around the fp16 graph";
  EXPECT_EQ(matmuls, 1) << "no fusion without optimize";
}

}  // namespace
}  // namespace gpuopt
