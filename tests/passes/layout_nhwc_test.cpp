// layout_nhwc on the CPU reference: small ResNet- and MobileNetV2-shaped graphs go through the
// session's pipeline (default passes, fp16, layout) and must compute what the NCHW graph
// computes, with their convs, pools and elementwise ops channels-last and Transposes only at
// the region's edges; convs the cuDNN kernels cannot take (asymmetric pads, 1-D) stay NCHW, and
// a region value that is a graph output keeps its NCHW shape there.
#include "passes/passes.h"
#include "passes/precision.h"

#include "cnn_graphs.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <random>

namespace gpuopt {
namespace {

using test::Builder;
using test::conv_attrs;
using test::expect_same_outputs;
using test::ints;
using test::mini_mobilenet;
using test::mini_resnet;
using test::random_tensor;

int count(const Graph& g, const std::string& op) {
  int c = 0;
  for (const Node& n : g.nodes()) c += n.op_type == op;
  return c;
}

// The fp16 graph the session would compile without the layout pass.
Graph half(Graph g) {
  EXPECT_TRUE(run_default_passes(&g, FusionSwitches{}).ok());
  EXPECT_TRUE(convert_precision(&g, DType::F16).ok());
  return g;
}

// No Transpose reads a Transpose; every conv/pool of the given NCHW kinds is gone.
void expect_clean_edges(const Graph& g) {
  for (const Node& n : g.nodes()) {
    if (n.op_type != "Transpose") continue;
    const int32_t p = g.value(n.inputs[0]).producer;
    EXPECT_FALSE(p >= 0 && g.nodes()[static_cast<size_t>(p)].op_type == "Transpose")
        << "back-to-back transposes at " << n.name;
  }
}

TEST(LayoutNhwc, ResNetRegionIsChannelsLastWithTwoTransposes) {
  const Graph ref = half(mini_resnet());
  const int convs = count(ref, "FusedConv") + count(ref, "Conv");
  ASSERT_EQ(convs, 6);
  Graph g = ref;
  auto st = layout_nhwc(&g);
  ASSERT_TRUE(st.ok()) << st.status().to_string();
  EXPECT_EQ(count(g, "NhwcFusedConv"), convs);
  EXPECT_EQ(count(g, "FusedConv") + count(g, "Conv") + count(g, "MaxPool") + count(g, "GlobalAveragePool"), 0);
  EXPECT_EQ(count(g, "NhwcMaxPool"), 1);
  EXPECT_EQ(count(g, "ReduceMean"), 1);
  // In: after the fp16 Cast of the input; out: the pooled [N,1,1,C] before Flatten.
  EXPECT_EQ(count(g, "Transpose"), 2);
  EXPECT_EQ(st->added, 2);
  expect_clean_edges(g);
  for (const Node& n : g.nodes()) {
    if (n.op_type == "NhwcFusedConv") {
      EXPECT_EQ(n.domain, "ai.gpuopt");
      const Shape& w = g.value(n.inputs[1]).info.shape;
      ASSERT_EQ(w.size(), 4u);
      EXPECT_EQ(w[1], n.attr_ints("kernel_shape")[0]) << "W is [M, kH, kW, C/group] at " << n.name;
    }
    if (n.op_type == "Transpose" && g.value(n.inputs[0]).info.shape[1] == 3) {
      EXPECT_EQ(g.value(n.inputs[0]).info.dtype, DType::F16) << "the entry transpose moves the fp16 tensor";
    }
  }
  std::mt19937 rng(5);
  for (int64_t batch : {1, 3}) expect_same_outputs(ref, g, random_tensor({batch, 3, 20, 20}, rng, -2, 2), 2e-3);
}

TEST(LayoutNhwc, MobileNetDepthwiseAndRelu6StayInTheRegion) {
  const Graph ref = half(mini_mobilenet());
  Graph g = ref;
  ASSERT_TRUE(layout_nhwc(&g).ok());
  EXPECT_EQ(count(g, "NhwcFusedConv"), 6);
  EXPECT_EQ(count(g, "Conv"), 0);
  EXPECT_EQ(count(g, "Clip"), 4);
  EXPECT_EQ(count(g, "Transpose"), 2);
  int depthwise = 0;
  for (const Node& n : g.nodes())
    if (n.op_type == "NhwcFusedConv" && n.attr_i("group", 1) > 1) {
      ++depthwise;
      EXPECT_EQ(g.value(n.inputs[1]).info.shape[3], 1) << "depthwise W is [C, kH, kW, 1]";
    }
  EXPECT_EQ(depthwise, 2);
  expect_clean_edges(g);
  std::mt19937 rng(6);
  expect_same_outputs(ref, g, random_tensor({2, 3, 16, 16}, rng, -2, 2), 2e-3);
}

// conv A -> conv B (asymmetric pads) -> conv C: B stays NCHW between two regions.
TEST(LayoutNhwc, AsymmetricPadsSplitTheRegion) {
  Builder b;
  ValueId x = b.g.add_input("x", DType::F32, {2, 4, 9, 9});
  ValueId a = b.relu(b.conv(x, 4, 8, 3, 1, 1));
  AttributeMap asym = conv_attrs(3, 1, 1);
  asym["pads"] = ints({0, 1, 2, 1});
  ValueId bb = b.g.add_node(
      Op::Conv, "asym", {a, b.g.add_constant("asym.w", random_tensor({8, 8, 3, 3}, b.rng, -0.3f, 0.3f))}, 1, asym)[0];
  b.output(b.relu(b.conv(bb, 8, 4, 3, 1, 1)));
  const Graph ref = half(b.done());
  Graph g = ref;
  ASSERT_TRUE(layout_nhwc(&g).ok());
  EXPECT_EQ(count(g, "NhwcFusedConv"), 2);
  ASSERT_EQ(count(g, "Conv"), 1);
  for (const Node& n : g.nodes())
    if (n.op_type == "Conv") {
      EXPECT_EQ(n.name, "asym");
      EXPECT_EQ(g.nodes()[static_cast<size_t>(g.value(n.inputs[0]).producer)].op_type, "Transpose");
    }
  EXPECT_EQ(count(g, "Transpose"), 4);  // in/out around each region
  expect_clean_edges(g);
  std::mt19937 rng(7);
  expect_same_outputs(ref, g, random_tensor({2, 4, 9, 9}, rng, -2, 2), 2e-3);
}

TEST(LayoutNhwc, OneDimensionalConvGoesThroughTwoDAndFloat32IsLeftAlone) {
  Builder b;
  ValueId x = b.g.add_input("x", DType::F32, {2, 4, 15});
  AttributeMap a{{"kernel_shape", ints({3})}, {"pads", ints({1, 1})}};
  b.output(b.relu(b.g.add_node(Op::Conv, "c1d",
                               {x, b.g.add_constant("w", random_tensor({6, 4, 3}, b.rng, -0.5f, 0.5f))}, 1, a)[0]));
  const Graph model = b.done();
  // Without the conv1d pass the rank-3 conv is not a 2-D one: the layout pass leaves it alone.
  Graph one_d = model;
  ASSERT_TRUE(run_default_passes(&one_d, FusionSwitches::parse("conv1d")).ok());
  ASSERT_TRUE(convert_precision(&one_d, DType::F16).ok());
  const size_t before = one_d.nodes().size();
  ASSERT_TRUE(layout_nhwc(&one_d).ok());
  EXPECT_EQ(one_d.nodes().size(), before);
  EXPECT_EQ(count(one_d, "Transpose"), 0);
  // With it (the default) the conv is 2-D of unit height and goes channels-last like any other,
  // giving the reference's outputs.
  const Graph ref = half(model);
  Graph as_2d = ref;
  ASSERT_TRUE(layout_nhwc(&as_2d).ok());
  EXPECT_EQ(count(as_2d, "NhwcFusedConv"), 1);
  std::mt19937 rng(5);
  expect_same_outputs(ref, as_2d, random_tensor({2, 4, 15}, rng, -2, 2), 2e-3);
  // f32 convs are not tensor-core convs: nothing changes without the precision conversion.
  Graph f32 = mini_resnet();
  ASSERT_TRUE(run_default_passes(&f32, FusionSwitches{}).ok());
  const size_t n32 = f32.nodes().size();
  ASSERT_TRUE(layout_nhwc(&f32).ok());
  EXPECT_EQ(f32.nodes().size(), n32);
  EXPECT_EQ(count(f32, "NhwcFusedConv"), 0);
}

// A conv output that is also a graph output keeps its name, NCHW shape and values there.
TEST(LayoutNhwc, RegionValueThatIsAGraphOutputStaysNchw) {
  Builder b;
  ValueId x = b.g.add_input("x", DType::F32, {2, 4, 8, 8});
  ValueId c1 = b.relu(b.conv(x, 4, 8, 3, 1, 1));
  b.g.value(c1).name = "features";
  b.output(c1);
  b.output(b.conv(c1, 8, 8, 3, 1, 2));
  const Graph ref = half(b.done());
  Graph g = ref;
  ASSERT_TRUE(layout_nhwc(&g).ok());
  EXPECT_EQ(count(g, "NhwcFusedConv"), 2);
  // Each output is an fp32 Cast of a Transpose back to NCHW.
  for (ValueId out : g.outputs()) {
    const Node& cast = g.nodes()[static_cast<size_t>(g.value(out).producer)];
    ASSERT_EQ(cast.op_type, "Cast");
    EXPECT_EQ(g.nodes()[static_cast<size_t>(g.value(cast.inputs[0]).producer)].op_type, "Transpose");
  }
  EXPECT_EQ(g.value(g.outputs()[0]).info.shape, (Shape{2, 8, 8, 8}));
  EXPECT_EQ(g.value(g.outputs()[1]).info.shape, (Shape{2, 8, 4, 4}));
  std::mt19937 rng(8);
  expect_same_outputs(ref, g, random_tensor({2, 4, 8, 8}, rng, -2, 2), 2e-3);
}

// The model's own NHWC input (Transpose to NCHW first) and NHWC output (Transpose at the end,
// then a Relu): the pass cancels both instead of adding the inverse next to them.
TEST(LayoutNhwc, ModelTransposesAreCancelledNotStacked) {
  Builder b;
  ValueId x = b.g.add_input("x", DType::F32, {2, 9, 9, 4});
  AttributeMap to_nchw{{"perm", ints({0, 3, 1, 2})}}, to_nhwc{{"perm", ints({0, 2, 3, 1})}};
  ValueId t = b.op(Op::Transpose, {x}, to_nchw);
  ValueId c = b.relu(b.conv(t, 4, 8, 3, 1, 1));
  c = b.conv(c, 8, 8, 1, 0, 1);
  b.output(b.relu(b.op(Op::Transpose, {c}, to_nhwc)));
  const Graph ref = half(b.done());
  Graph g = ref;
  auto st = layout_nhwc(&g);
  ASSERT_TRUE(st.ok()) << st.status().to_string();
  EXPECT_EQ(count(g, "NhwcFusedConv"), 2);
  EXPECT_EQ(count(g, "Transpose"), 0);
  EXPECT_EQ(st->added, 0);
  EXPECT_EQ(st->removed, 2);  // the model's two Transposes
  std::mt19937 rng(9);
  expect_same_outputs(ref, g, random_tensor({2, 9, 9, 4}, rng, -2, 2), 2e-3);
}

// A ConvNeXt block: depthwise conv, the model's permute to channels-last, a per-channel op in
// NHWC, the permute back, the layer scale (a [C, 1, 1] constant) and the residual Add. The
// permutes cancel against the region's and the layer-scale Mul joins it, so the only
// Transposes left are the graph's edges.
TEST(LayoutNhwc, ConvNextBlockKeepsNoTransposeInside) {
  Builder b;
  ValueId x = b.g.add_input("x", DType::F32, {2, 8, 9, 9});
  AttributeMap to_nchw{{"perm", ints({0, 3, 1, 2})}}, to_nhwc{{"perm", ints({0, 2, 3, 1})}};
  ValueId y0 = b.relu(b.conv(x, 8, 8, 3, 1, 1));
  ValueId t = b.op(Op::Transpose, {b.conv(y0, 8, 8, 7, 3, 1, 8)}, to_nhwc);
  ValueId mlp = b.relu(b.op(Op::Mul, {t, b.g.add_constant("ln.g", random_tensor({8}, b.rng, 0.5f, 1.5f))}));
  ValueId back = b.op(Op::Transpose, {mlp}, to_nchw);
  ValueId scaled = b.op(Op::Mul, {back, b.g.add_constant("gamma", random_tensor({8, 1, 1}, b.rng, -1, 1))});
  b.output(b.conv(b.op(Op::Add, {scaled, y0}), 8, 4, 1, 0, 1));
  const Graph ref = half(b.done());
  Graph g = ref;
  auto st = layout_nhwc(&g);
  ASSERT_TRUE(st.ok()) << st.status().to_string();
  EXPECT_EQ(count(g, "NhwcFusedConv"), 3);
  EXPECT_EQ(count(g, "Transpose"), 2);  // x in, the output back
  expect_clean_edges(g);
  std::mt19937 rng(11);
  expect_same_outputs(ref, g, random_tensor({2, 8, 9, 9}, rng, -2, 2), 2e-3);
}

TEST(LayoutNhwc, SessionPassesRunItForCudaHalfOnlyAndTheSwitchTurnsItOff) {
  auto nhwc_convs = [](const char* device, const char* precision, const char* off) {
    if (off) setenv("GPUOPT_DISABLE_FUSION", off, 1);
    Graph g = mini_resnet();
    const Status st = run_session_passes(&g, device, precision, true);
    unsetenv("GPUOPT_DISABLE_FUSION");
    EXPECT_TRUE(st.ok()) << st.to_string();
    return count(g, "NhwcFusedConv");
  };
  EXPECT_EQ(nhwc_convs("cuda", "fp16", nullptr), 6);
  EXPECT_EQ(nhwc_convs("cuda:0", "bf16", nullptr), 6);
  EXPECT_EQ(nhwc_convs("cuda", "fp32", nullptr), 0);
  EXPECT_EQ(nhwc_convs("cpu", "fp16", nullptr), 0);
  EXPECT_EQ(nhwc_convs("cuda", "fp16", "nhwc"), 0);
  EXPECT_EQ(nhwc_convs("cuda", "fp16", "1"), 0);
  EXPECT_EQ(nhwc_convs("cuda", "fp16", "conv"), 6);  // unfused Convs go channels-last as well
}

TEST(FusionSwitches, ParsesOneOrAList) {
  EXPECT_FALSE(FusionSwitches::parse("1").enabled("conv"));
  EXPECT_FALSE(FusionSwitches::parse("all").enabled("nhwc"));
  EXPECT_TRUE(FusionSwitches::parse("0").enabled("conv"));
  EXPECT_TRUE(FusionSwitches::parse("").enabled("nhwc"));
  const FusionSwitches sw = FusionSwitches::parse(" matmul_bias , nhwc");
  EXPECT_FALSE(sw.enabled("nhwc"));
  EXPECT_FALSE(sw.enabled("matmul_bias"));
  EXPECT_TRUE(sw.enabled("conv"));
  EXPECT_FALSE(FusionSwitches::parse("conv,nhwc").enabled("conv"));
}

}  // namespace
}  // namespace gpuopt
