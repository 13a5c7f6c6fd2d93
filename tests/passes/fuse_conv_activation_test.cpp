// Conv -> [Add] -> Relu fusion into FusedConv, checked on the CPU reference: the fused graph
// has the nodes it should and computes what the unfused graph computes (the Conv, Add and Relu
// kernels are the oracle); chains whose intermediates something else can see are left alone.
#include "backends/backend.h"
#include "passes/passes.h"

#include "cnn_graphs.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <random>

namespace gpuopt {
namespace {

using test::expect_same_outputs;
using test::random_tensor;

AttributeMap conv_attrs(int64_t stride = 1) {
  AttributeMap a;
  a["pads"].kind = Attribute::Kind::kInts;
  a["pads"].ints = {1, 1, 1, 1};
  a["strides"].kind = Attribute::Kind::kInts;
  a["strides"].ints = {stride, stride};
  return a;
}

int count(const Graph& g, const std::string& op) {
  int c = 0;
  for (const Node& n : g.nodes()) c += n.op_type == op;
  return c;
}

const Node* find(const Graph& g, const std::string& op) {
  for (const Node& n : g.nodes())
    if (n.op_type == op) return &n;
  return nullptr;
}

void finish(Graph& g) {
  ASSERT_TRUE(g.topo_sort().ok());
  ASSERT_TRUE(g.infer_shapes().ok());
}

// x[2,4,9,7] -> conv1(4->4, bias) -> relu -> a;  a -> conv2(4->4, no bias) -> Add(., a) -> relu -> y
// (a ResNet basic block's residual path, the Add's operands in either order).
Graph residual_block(std::mt19937& rng, bool z_first, DType dt = DType::F32) {
  Graph g;
  g.opset = 17;
  ValueId x = g.add_input("x", dt, {2, 4, 9, 7});
  ValueId w1 = g.add_constant("w1", random_tensor({4, 4, 3, 3}, rng, -0.5f, 0.5f, dt));
  ValueId b1 = g.add_constant("b1", random_tensor({4}, rng, -0.3f, 0.3f, dt));
  ValueId w2 = g.add_constant("w2", random_tensor({4, 4, 3, 3}, rng, -0.5f, 0.5f, dt));
  ValueId c1 = g.add_node(Op::Conv, "conv1", {x, w1, b1}, 1, conv_attrs())[0];
  ValueId a = g.add_node(Op::Relu, "relu1", {c1}, 1)[0];
  ValueId c2 = g.add_node(Op::Conv, "conv2", {a, w2}, 1, conv_attrs())[0];
  ValueId s = g.add_node(Op::Add, "add", z_first ? std::vector<ValueId>{a, c2} : std::vector<ValueId>{c2, a}, 1)[0];
  ValueId y = g.add_node(Op::Relu, "relu2", {s}, 1, {}, {"y"})[0];
  g.mark_output(y);
  finish(g);
  return g;
}

TEST(FuseConvActivation, ResidualBlockBecomesTwoFusedConvs) {
  for (bool z_first : {false, true}) {
    std::mt19937 rng(11);
    Graph ref = residual_block(rng, z_first);
    Graph fused = ref;
    auto st = fuse_conv_activation(&fused);
    ASSERT_TRUE(st.ok()) << st.status().to_string();
    EXPECT_EQ(st->removed, 3);  // relu1, add, relu2 folded into their convs
    finish(fused);
    EXPECT_EQ(count(fused, "FusedConv"), 2);
    EXPECT_EQ(fused.nodes().size(), 2u);
    for (const Node& n : fused.nodes()) {
      EXPECT_EQ(n.domain, "com.microsoft");
      EXPECT_EQ(n.attr_s("activation", ""), "Relu");
      EXPECT_EQ(n.attr_ints("kernel_shape"), (std::vector<int64_t>{3, 3}));  // spelled out from the weight
    }
    // conv2 has no bias: Z sits at input 3 after an absent B.
    const Node& second = fused.nodes()[1];
    ASSERT_EQ(second.inputs.size(), 4u);
    EXPECT_EQ(second.inputs[2], kNoValue);
    EXPECT_EQ(second.inputs[3], fused.nodes()[0].outputs[0]);
    EXPECT_EQ(fused.value(fused.outputs()[0]).name, "y");
    std::mt19937 in_rng(3);
    expect_same_outputs(ref, fused, random_tensor({2, 4, 9, 7}, in_rng, -2, 2), 1e-6);
  }
}

TEST(FuseConvActivation, HalfPrecisionMatchesWithinF16Tolerance) {
  std::mt19937 rng(12);
  Graph ref = residual_block(rng, false, DType::F16);
  Graph fused = ref;
  ASSERT_TRUE(fuse_conv_activation(&fused).ok());
  finish(fused);
  EXPECT_EQ(count(fused, "FusedConv"), 2);
  std::mt19937 in_rng(4);
  // The unfused graph rounds to f16 after the conv and after the add; the fused one once.
  expect_same_outputs(ref, fused, random_tensor({2, 4, 9, 7}, in_rng, -2, 2, DType::F16), 4e-3);
}

TEST(FuseConvActivation, ConvAddWithoutReluFusesWithIdentity) {
  std::mt19937 rng(13);
  Graph g;
  ValueId x = g.add_input("x", DType::F32, {1, 3, 8, 8});
  ValueId w = g.add_constant("w", random_tensor({3, 3, 3, 3}, rng, -0.5f, 0.5f));
  ValueId c = g.add_node(Op::Conv, "conv", {x, w}, 1, conv_attrs())[0];
  ValueId y = g.add_node(Op::Add, "add", {c, x}, 1, {}, {"y"})[0];
  g.mark_output(y);
  finish(g);
  Graph fused = g;
  auto st = fuse_conv_activation(&fused);
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->removed, 1);
  finish(fused);
  const Node* f = find(fused, "FusedConv");
  ASSERT_NE(f, nullptr);
  EXPECT_FALSE(f->has_attr("activation"));  // identity, as ONNX Runtime writes it
  std::mt19937 in_rng(5);
  expect_same_outputs(g, fused, random_tensor({1, 3, 8, 8}, in_rng, -2, 2), 1e-6);
}

TEST(FuseConvActivation, AddOutputReadTwiceKeepsTheRelu) {
  std::mt19937 rng(14);
  Graph g;
  ValueId x = g.add_input("x", DType::F32, {1, 3, 8, 8});
  ValueId w = g.add_constant("w", random_tensor({3, 3, 3, 3}, rng, -0.5f, 0.5f));
  ValueId c = g.add_node(Op::Conv, "conv", {x, w}, 1, conv_attrs())[0];
  ValueId s = g.add_node(Op::Add, "add", {c, x}, 1)[0];
  ValueId y = g.add_node(Op::Relu, "relu", {s}, 1, {}, {"y"})[0];
  ValueId t = g.add_node(Op::Neg, "neg", {s}, 1, {}, {"t"})[0];
  g.mark_output(y);
  g.mark_output(t);
  finish(g);
  Graph fused = g;
  ASSERT_TRUE(fuse_conv_activation(&fused).ok());
  finish(fused);
  EXPECT_EQ(count(fused, "FusedConv"), 1);
  EXPECT_EQ(count(fused, "Relu"), 1);
  EXPECT_EQ(count(fused, "Add"), 0);
  EXPECT_FALSE(find(fused, "FusedConv")->has_attr("activation"));
  std::mt19937 in_rng(6);
  expect_same_outputs(g, fused, random_tensor({1, 3, 8, 8}, in_rng, -2, 2), 1e-6);
}

TEST(FuseConvActivation, LeavesChainsWhoseIntermediatesAreSeen) {
  std::mt19937 rng(15);
  auto base = [&](Graph& g, ValueId* x, ValueId* c) {
    *x = g.add_input("x", DType::F32, {1, 3, 8, 8});
    ValueId w = g.add_constant("w", random_tensor({3, 3, 3, 3}, rng, -0.5f, 0.5f));
    *c = g.add_node(Op::Conv, "conv", {*x, w}, 1, conv_attrs())[0];
  };
  {  // the Conv output is a graph output
    Graph g;
    ValueId x, c;
    base(g, &x, &c);
    g.mark_output(g.add_node(Op::Relu, "relu", {c}, 1)[0]);
    g.mark_output(c);
    finish(g);
    auto st = fuse_conv_activation(&g);
    ASSERT_TRUE(st.ok());
    EXPECT_EQ(st->removed, 0);
    EXPECT_EQ(count(g, "Conv"), 1);
  }
  {  // the Conv output read by two nodes
    Graph g;
    ValueId x, c;
    base(g, &x, &c);
    g.mark_output(g.add_node(Op::Relu, "relu", {c}, 1)[0]);
    g.mark_output(g.add_node(Op::Neg, "neg", {c}, 1)[0]);
    finish(g);
    auto st = fuse_conv_activation(&g);
    ASSERT_TRUE(st.ok());
    EXPECT_EQ(st->removed, 0);
  }
  {  // Add that broadcasts (z is [1,3,1,1]): not an output-shaped z
    Graph g;
    ValueId x, c;
    base(g, &x, &c);
    ValueId z = g.add_constant("z", random_tensor({1, 3, 1, 1}, rng, -1, 1));
    g.mark_output(g.add_node(Op::Relu, "relu", {g.add_node(Op::Add, "add", {c, z}, 1)[0]}, 1)[0]);
    finish(g);
    auto st = fuse_conv_activation(&g);
    ASSERT_TRUE(st.ok());
    EXPECT_EQ(st->removed, 0);
    EXPECT_EQ(count(g, "Add"), 1);
  }
  {  // Add(c, c): no other operand to take as z
    Graph g;
    ValueId x, c;
    base(g, &x, &c);
    g.mark_output(g.add_node(Op::Add, "add", {c, c}, 1)[0]);
    finish(g);
    auto st = fuse_conv_activation(&g);
    ASSERT_TRUE(st.ok());
    EXPECT_EQ(st->removed, 0);
  }
  {  // a z whose shape is not known: skipped rather than guessed
    Graph g;
    ValueId x, c;
    base(g, &x, &c);
    ValueId z = g.add_input("z", DType::F32, {1, 3, kUnknownDim, 8});
    g.mark_output(g.add_node(Op::Add, "add", {c, z}, 1)[0]);
    finish(g);
    auto st = fuse_conv_activation(&g);
    ASSERT_TRUE(st.ok());
    EXPECT_EQ(st->removed, 0);
  }
}

TEST(FuseConvActivation, DefaultPassesFuseUnlessFusionIsDisabled) {
  std::mt19937 rng(16);
  Graph g = residual_block(rng, false);
  Graph on = g;
  ASSERT_TRUE(run_default_passes(&on).ok());
  EXPECT_EQ(count(on, "FusedConv"), 2);
  setenv("GPUOPT_DISABLE_FUSION", "1", 1);
  Graph off = g;
  const Status st = run_default_passes(&off);
  unsetenv("GPUOPT_DISABLE_FUSION");
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(count(off, "FusedConv"), 0);
  EXPECT_EQ(count(off, "Conv"), 2);
  EXPECT_EQ(count(off, "Relu"), 2);
}

TEST(FusedConvOp, ZOfAnotherShapeIsOneClearError) {
  std::mt19937 rng(17);
  Graph g;
  ValueId x = g.add_input("x", DType::F32, {1, 3, 8, 8});
  ValueId w = g.add_constant("w", random_tensor({5, 3, 3, 3}, rng, -0.5f, 0.5f));
  ValueId z = g.add_input("z", DType::F32, {1, 3, 8, 8});  // the output has 5 channels
  g.add_node(Op::FusedConv, "fc", {x, w, kNoValue, z}, 1, conv_attrs());
  g.mark_output(g.nodes().back().outputs[0]);
  ASSERT_TRUE(g.topo_sort().ok());
  const Status st = g.infer_shapes();
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("Z has shape [1,3,8,8] but the convolution output is [1,5,8,8]"), std::string::npos)
      << st.message();
}

TEST(FusedConvOp, UnknownActivationIsOneClearError) {
  std::mt19937 rng(18);
  Graph g;
  ValueId x = g.add_input("x", DType::F32, {1, 3, 8, 8});
  ValueId w = g.add_constant("w", random_tensor({5, 3, 3, 3}, rng, -0.5f, 0.5f));
  AttributeMap a = conv_attrs();
  a["activation"].kind = Attribute::Kind::kString;
  a["activation"].s = "Mish";
  g.add_node(Op::FusedConv, "fc", {x, w}, 1, a);
  g.mark_output(g.nodes().back().outputs[0]);
  ASSERT_TRUE(g.topo_sort().ok());
  const Status st = g.infer_shapes();
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("activation 'Mish'"), std::string::npos) << st.message();
}

// MobileNetV3's HardSwish and EfficientNet's SiLU (t * Sigmoid(t), the Mul's operands in either
// order, after a Conv or a Conv + Add) ride in the conv's epilogue: activation HardSwish / Swish.
TEST(FuseConvActivation, HardSwishAndSiluBecomeTheEpilogue) {
  for (int form = 0; form < 5; ++form) {  // HardSwish, SiLU t*s, SiLU s*t, Conv+Add+SiLU, ONNX Swish
    std::mt19937 rng(20 + form);
    Graph g;
    g.opset = 24;
    ValueId x = g.add_input("x", DType::F32, {2, 3, 8, 8});
    ValueId w = g.add_constant("w", random_tensor({3, 3, 3, 3}, rng, -0.5f, 0.5f));
    ValueId b = g.add_constant("b", random_tensor({3}, rng, -0.3f, 0.3f));
    ValueId t = g.add_node(Op::Conv, "conv", {x, w, b}, 1, conv_attrs())[0];
    if (form == 3) t = g.add_node(Op::Add, "add", {x, t}, 1)[0];
    ValueId y;
    if (form == 0) {
      y = g.add_node(Op::HardSwish, "hs", {t}, 1, {}, {"y"})[0];
    } else if (form == 4) {
      y = g.add_node(Op::Swish, "swish", {t}, 1, {}, {"y"})[0];
    } else {
      ValueId s = g.add_node(Op::Sigmoid, "sig", {t}, 1)[0];
      y = g.add_node(Op::Mul, "mul", form == 2 ? std::vector<ValueId>{s, t} : std::vector<ValueId>{t, s}, 1, {},
                     {"y"})[0];
    }
    g.mark_output(y);
    finish(g);
    Graph fused = g;
    auto st = fuse_conv_activation(&fused);
    ASSERT_TRUE(st.ok()) << st.status().to_string();
    finish(fused);
    ASSERT_EQ(fused.nodes().size(), 1u) << "form " << form;
    const Node& f = fused.nodes()[0];
    EXPECT_EQ(f.op_type, "FusedConv");
    EXPECT_EQ(f.attr_s("activation", ""), form == 0 ? "HardSwish" : "Swish") << "form " << form;
    EXPECT_EQ(f.inputs.size(), form == 3 ? 4u : 3u);
    std::mt19937 in_rng(7);
    expect_same_outputs(g, fused, random_tensor({2, 3, 8, 8}, in_rng, -3, 3), 1e-6);
  }
}

TEST(FuseConvActivation, SiluLeftAloneWhereItsPartsAreSeen) {
  for (int form = 0; form < 4; ++form) {  // Sigmoid read twice; Mul by another tensor; Swish alpha 2; conv read thrice
    std::mt19937 rng(30 + form);
    Graph g;
    g.opset = 24;
    ValueId x = g.add_input("x", DType::F32, {1, 3, 8, 8});
    ValueId w = g.add_constant("w", random_tensor({3, 3, 3, 3}, rng, -0.5f, 0.5f));
    ValueId t = g.add_node(Op::Conv, "conv", {x, w}, 1, conv_attrs())[0];
    if (form == 2) {
      AttributeMap a;
      a["alpha"].kind = Attribute::Kind::kFloat;
      a["alpha"].f = 2.0f;
      g.mark_output(g.add_node(Op::Swish, "swish", {t}, 1, a, {"y"})[0]);
    } else {
      ValueId s = g.add_node(Op::Sigmoid, "sig", {t}, 1)[0];
      g.mark_output(g.add_node(Op::Mul, "mul", {form == 1 ? x : t, s}, 1, {}, {"y"})[0]);
      if (form == 0) g.mark_output(s);
      if (form == 3) g.mark_output(g.add_node(Op::Neg, "neg", {t}, 1, {}, {"n"})[0]);
    }
    finish(g);
    Graph fused = g;
    auto st = fuse_conv_activation(&fused);
    ASSERT_TRUE(st.ok());
    EXPECT_EQ(st->removed, 0) << "form " << form;
    EXPECT_EQ(count(fused, "Conv"), 1) << "form " << form;
  }
}

}  // namespace
}  // namespace gpuopt
