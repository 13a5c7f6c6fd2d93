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

// x[N, 4] -> Shape -> Reshape(x, shape) -> MatMul W[4, 3]: once N is bound, Shape folds away.
Graph reshape_matmul() {
  Graph g;
  const int64_t n = g.symbol_dim("N");
  ValueId x = g.add_input("x", DType::F32, {n, 4});
  ValueId w = g.add_constant("W", Tensor::from_vector(DType::F32, {4, 3}, std::vector<float>(12, 0.5f)));
  ValueId shape = g.add_node(Op::Shape, "shape", {x}, 1)[0];
  ValueId r = g.add_node(Op::Reshape, "reshape", {x, shape}, 1)[0];
  g.mark_output(g.add_node(Op::MatMul, "mm", {r, w}, 1)[0]);
  return g;
}

TEST(Compile, PlacementAndCostsAtBoundShapes) {
  EngineOptions o;
  o.optimize = false;  // keep the three nodes as written
  o.device = kCpuReference;
  auto ref = compile(reshape_matmul(), o);
  ASSERT_TRUE(ref.ok()) << ref.status().to_string();
  const Placement on_ref = ref->placement();
  EXPECT_EQ(on_ref.error, "");
  EXPECT_EQ(on_ref.source, "backend");
  ASSERT_EQ(on_ref.place.size(), 3u);
  for (NodePlace p : on_ref.place) EXPECT_EQ(p, NodePlace::kDevice) << "the reference runs every node";
  // The fast CPU backend: the MatMul on its own kernel, Shape and Reshape on the reference.
  o.device = Device::cpu();
  auto c = compile(reshape_matmul(), o);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  ASSERT_EQ(c->graph->nodes().size(), 3u);
  const Placement on_fast = c->placement();
  ASSERT_EQ(on_fast.place.size(), 3u);
  EXPECT_EQ(on_fast.place[0], NodePlace::kCpuFallback);
  EXPECT_EQ(on_fast.place[1], NodePlace::kCpuFallback);
  EXPECT_EQ(on_fast.place[2], NodePlace::kDevice);
  auto at = c->at_shapes({}, /*batch=*/5);  // "N" is the leading dynamic dim: the batch
  ASSERT_TRUE(at.ok()) << at.status().to_string();
  ASSERT_EQ(at->costs.size(), 3u);
  EXPECT_TRUE(at->costs[0].folded) << "Shape of x[5, 4] is a constant once N is bound";
  const NodeCost& mm = at->costs[2];
  EXPECT_FALSE(mm.folded);
  EXPECT_TRUE(mm.concrete);
  EXPECT_DOUBLE_EQ(mm.flops, 2.0 * 5 * 4 * 3);                 // a multiply and an add per term
  EXPECT_DOUBLE_EQ(mm.bytes, 4.0 * (5 * 4 + 4 * 3 + 5 * 3));  // x, W read; y written
  EXPECT_EQ(mm.shapes, "f32[5,4] x f32[4,3] -> f32[5,3]");
  // The memory plan of that run: the reshaped x is a view of the input and y the output, both
  // outside the arena; only Shape's two int64s are planned, one 256-byte aligned buffer.
  ASSERT_EQ(at->plan.buffers.size(), 1u);
  EXPECT_EQ(at->plan.buffers[0].value, c->graph->nodes()[0].outputs[0]);
  EXPECT_EQ(at->plan.arena_bytes, 256u);
  EXPECT_EQ(at->plan_rules, "cpu executor");
  // A symbol the model lacks is named with those it has.
  auto bad = c->at_shapes({{"M", 2}}, 0);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "the model has no symbolic dim 'M' (symbols: N)");
}

TEST(Compile, AnalyzeWithoutTheDeviceKeepsTheGraphAndSaysWhy) {
  EngineOptions o;
  o.device = Device{DeviceKind::kCuda, 99};  // no host has a hundredth CUDA device
  auto a = analyze(linear_relu(), o);
  ASSERT_TRUE(a.ok()) << a.status().to_string();
  EXPECT_EQ(a->backend, nullptr);
  EXPECT_EQ(a->exe, nullptr);
  EXPECT_EQ(a->graph->nodes().size(), 1u) << "the passes ran";
  EXPECT_FALSE(a->backend_error.ok());
  // CUDA builds decide from the op table; others have no placement and say why.
  const Placement p = a->placement();
  if (p.error.empty()) {
    EXPECT_EQ(p.source, "op table");
    EXPECT_EQ(p.place.size(), 1u);
  } else {
    EXPECT_TRUE(p.place.empty());
    EXPECT_EQ(p.error, a->backend_error.to_string());
  }
  EXPECT_FALSE(compile(linear_relu(), o).ok()) << "compile needs the device";
}

}  // namespace
}  // namespace gpuopt
