// fuse_dw_prologue on the CPU reference: MBConv blocks (conv + SiLU or HardSwish -> depthwise
// conv) go through the session's passes (default passes, fp16, layout_nhwc, se_mean) and then
// dw_prologue: the activation leaves the producing conv and becomes the depthwise conv's
// input_activation, and the graph computes what the unfused one computes. The check is shown to
// be able to fail: the rewritten graph without the moved activation gives other outputs.
// Negative cases: the activated output read twice, read by a dense conv, a graph output, a Relu
// producer, a producer whose output is the depthwise conv's z. The exported EfficientNet blocks
// (tests/data/exported) move every expand conv's SiLU.
#include "onnx/importer.h"
#include "ops/conv/conv_activation.h"
#include "passes/fuse_dw_prologue.h"
#include "passes/passes.h"
#include "passes/precision.h"
#include "passes/se_mean.h"

#include "cnn_graphs.h"
#include "pass_test_util.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <random>

namespace gpuopt {
namespace {

using test::Builder;
using test::random_tensor;

// NhwcFusedConv nodes with a prologue activation, and those with the given one.
int with_prologue(const Graph& g, std::string_view act = "") {
  int c = 0;
  for (const Node& n : g.nodes()) {
    const std::string a = n.attr_s(kConvInputActivation, "");
    c += n.op_type == "NhwcFusedConv" && !a.empty() && (act.empty() || a == act);
  }
  return c;
}

ValueId silu(Builder& b, ValueId v) {
  return b.op(Op::Mul, {v, b.op(Op::Sigmoid, {v})});
}

ValueId hardswish(Builder& b, ValueId v) {
  return b.op(Op::HardSwish, {v});
}

// The session's passes for CUDA fp16 up to se_mean (what dw_prologue runs after).
Graph channels_last(Graph g) {
  EXPECT_TRUE(run_default_passes(&g, FusionSwitches{}).ok());
  EXPECT_TRUE(convert_precision(&g, DType::F16).ok());
  auto st = layout_nhwc(&g);
  EXPECT_TRUE(st.ok()) << st.status().to_string();
  EXPECT_TRUE(fuse_se_mean(&g).ok());
  return g;
}

// Max |a - b| over every output of two CPU runs on x, and max |a|.
std::pair<double, double> diff(const Graph& a, const Graph& b, const Tensor& x) {
  const std::vector<Tensor> want = test::run_cpu(a, {x}), got = test::run_cpu(b, {x});
  EXPECT_EQ(want.size(), got.size());
  double err = 0, peak = 0;
  for (size_t o = 0; o < want.size() && o < got.size(); ++o) {
    EXPECT_EQ(want[o].shape(), got[o].shape());
    if (want[o].shape() != got[o].shape()) return {1e30, 0};
    for (int64_t i = 0; i < want[o].numel(); ++i) {
      err = std::max(err, std::abs(got[o].get_f64(i) - want[o].get_f64(i)));
      peak = std::max(peak, std::abs(want[o].get_f64(i)));
    }
  }
  return {err, peak};
}

// g (rewritten) computes ref's outputs on x within fp16's rounding of one more intermediate; the
// same graph with its prologues taken out does not (the comparison can fail).
void expect_same(const Graph& ref, const Graph& g, const Tensor& x) {
  const auto [err, peak] = diff(ref, g, x);
  Graph broken = g;
  for (Node& n : broken.nodes()) n.attrs.erase(std::string(kConvInputActivation));
  const auto [bad, bad_peak] = diff(ref, broken, x);
  std::printf("  max |diff| %.3g of max |out| %.3g; without the prologue %.3g\n", err, peak, bad);
  EXPECT_GT(peak, 0.0);
  EXPECT_LE(err, 5e-3 * peak);
  EXPECT_GT(bad, 5e-2 * peak) << "without the prologue the outputs should differ";
}

// x [N, 8, 10, 12] -> 1x1 expand to 24 + act -> depthwise k x k (stride s) -> 1x1 projection.
Graph mbconv(bool hard, int64_t k = 3, int64_t stride = 1, int64_t pad = 1) {
  Builder b;
  ValueId x = b.g.add_input("x", DType::F32, {kFirstSymbolDim, 8, 10, 12});
  ValueId e = b.conv(x, 8, 24, 1, 0, 1);
  e = hard ? hardswish(b, e) : silu(b, e);
  ValueId d = b.relu(b.conv(e, 24, 24, k, pad, stride, 24));
  b.output(b.conv(d, 24, 8, 1, 0, 1));
  return b.done();
}

TEST(DwPrologue, SiluOfTheExpandConvMovesIntoTheDepthwiseConv) {
  for (auto [k, stride, pad] : {std::tuple{3, 1, 1}, {5, 2, 2}, {3, 2, 0}}) {
    SCOPED_TRACE(k * 10 + stride);
    const Graph ref = channels_last(mbconv(false, k, stride, pad));
    Graph g = ref;
    auto st = fuse_dw_prologue(&g);
    ASSERT_TRUE(st.ok()) << st.status().to_string();
    EXPECT_EQ(st->rewritten, 1);
    EXPECT_EQ(with_prologue(g, "Swish"), 1);
    int swish_left = 0;
    for (const Node& n : g.nodes()) swish_left += n.attr_s("activation", "") == "Swish";
    EXPECT_EQ(swish_left, 0) << "the expand conv keeps no activation";
    std::mt19937 rng(31);
    for (int64_t batch : {1, 3}) expect_same(ref, g, random_tensor({batch, 8, 10, 12}, rng, -2, 2));
  }
}

TEST(DwPrologue, HardSwishMovesIn) {
  const Graph ref = channels_last(mbconv(true));
  Graph g = ref;
  ASSERT_TRUE(fuse_dw_prologue(&g).ok());
  EXPECT_EQ(with_prologue(g, "HardSwish"), 1);
  std::mt19937 rng(32);
  expect_same(ref, g, random_tensor({2, 8, 10, 12}, rng, -4, 4));
}

// Nothing moves; the graph is left as it was.
void expect_untouched(const Graph& ref) {
  Graph g = ref;
  auto st = fuse_dw_prologue(&g);
  ASSERT_TRUE(st.ok()) << st.status().to_string();
  EXPECT_EQ(st->rewritten, 0);
  EXPECT_EQ(with_prologue(g), 0);
  for (size_t i = 0; i < g.nodes().size(); ++i)
    EXPECT_EQ(g.nodes()[i].attr_s("activation", ""), ref.nodes()[i].attr_s("activation", ""));
}

TEST(DwPrologue, TwoReadersADenseReaderAGraphOutputAndReluStay) {
  auto build = [](int form) {
    Builder b;
    ValueId x = b.g.add_input("x", DType::F32, {kFirstSymbolDim, 8, 10, 12});
    ValueId e = b.conv(x, 8, 24, 1, 0, 1);
    e = form == 3 ? b.relu(e) : silu(b, e);
    const int64_t group = form == 1 ? 1 : 24;  // 1: a dense 3x3 conv reads it
    ValueId d = b.conv(e, 24, 24, 3, 1, 1, group);
    if (form == 0) d = b.op(Op::Add, {d, e});  // 0: the activated value read twice (residual)
    if (form == 2) b.output(e);                 // 2: a graph output too
    b.output(b.conv(d, 24, 8, 1, 0, 1));
    return b.done();
  };
  for (int form = 0; form < 4; ++form) {
    SCOPED_TRACE(form);
    expect_untouched(channels_last(build(form)));
  }
}

// The activated value is the depthwise conv's z (its residual), not its X: it stays.
TEST(DwPrologue, ActivatedValueAsTheResidualStays) {
  Builder b;
  ValueId x = b.g.add_input("x", DType::F32, {kFirstSymbolDim, 24, 10, 12});
  ValueId e = silu(b, b.conv(x, 24, 24, 1, 0, 1));
  ValueId d = b.relu(b.op(Op::Add, {b.conv(x, 24, 24, 3, 1, 1, 24), e}));  // depthwise(x) + e
  b.output(d);
  const Graph ref = channels_last(b.done());
  expect_untouched(ref);
}

// An input_activation the reference does not know is refused by name at shape inference.
TEST(DwPrologue, UnknownInputActivationIsRefused) {
  Graph g = channels_last(mbconv(false));
  ASSERT_TRUE(fuse_dw_prologue(&g).ok());
  for (Node& n : g.nodes())
    if (n.has_attr(kConvInputActivation)) n.attrs[std::string(kConvInputActivation)] = string_attr("Tanh");
  const Status st = g.infer_shapes();
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("input_activation 'Tanh'"), std::string::npos) << st.message();
}

// run_session_passes: on for CUDA fp16, off by its name (and with the layout pass), never on the CPU.
TEST(DwPrologue, SessionPassesRunItAndTheSwitchTurnsItOff) {
  auto moved = [](const char* device, const char* off) {
    Graph g = mbconv(false);
    const Status st = gpuopt::testing::session_passes(&g, device, off);
    EXPECT_TRUE(st.ok()) << st.to_string();
    return with_prologue(g);
  };
  EXPECT_EQ(moved("cuda", nullptr), 1);
  EXPECT_EQ(moved("cuda", "dw_prologue"), 0);
  EXPECT_EQ(moved("cuda", "nhwc"), 0);
  EXPECT_EQ(moved("cpu", nullptr), 0);
  EXPECT_TRUE(FusionSwitches::parse("dw_prologue").validate().ok());
}

// test::mini_efficientnet: the stem's SiLU output is also the residual (two readers: stays); the
// expand conv's SiLU moves into the 5x5 s2 depthwise conv that also writes the SE mean.
TEST(DwPrologue, MiniEfficientNet) {
  const Graph model = test::mini_efficientnet(12, 29);
  Graph ref = model, g = model;
  const Status a = gpuopt::testing::session_passes(&ref, "cuda", "dw_prologue");
  ASSERT_TRUE(a.ok()) << a.to_string();
  ASSERT_TRUE(run_session_passes(&g, "cuda", "fp16", true).ok());
  EXPECT_EQ(with_prologue(ref), 0);
  EXPECT_EQ(with_prologue(g, "Swish"), 1);
  std::mt19937 rng(33);
  expect_same(ref, g, random_tensor({3, 3, 29, 29}, rng, -2, 2));
}

// The exporters' EfficientNet blocks (torchvision, 32x32): every conv + SiLU whose only reader is
// a depthwise conv (the stem and each expand conv) moves; the outputs stay those of the unfused run.
TEST(DwPrologue, ExportedEfficientNetBlocks) {
  for (const char* exporter : {"legacy", "dynamo"}) {
    SCOPED_TRACE(exporter);
    const std::string path =
        std::string(GPUOPT_SOURCE_DIR) + "/tests/data/exported/efficientnet_tiny_tv_" + exporter + ".onnx";
    auto loaded = load_onnx_model(path);
    ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
    Graph ref = *loaded;
    const Status a = gpuopt::testing::session_passes(&ref, "cuda", "dw_prologue");
    ASSERT_TRUE(a.ok()) << a.to_string();
    Graph g = *loaded;
    ASSERT_TRUE(run_session_passes(&g, "cuda", "fp16", true).ok());
    // Each depthwise conv reads a conv's SiLU output that nothing else reads.
    int depthwise = 0;
    for (const Node& n : ref.nodes())
      depthwise += n.op_type == "NhwcFusedConv" && n.attr_i("group", 1) > 1;
    EXPECT_GT(depthwise, 0);
    EXPECT_EQ(with_prologue(g, "Swish"), depthwise);
    std::mt19937 rng(34);
    expect_same(ref, g, random_tensor({2, 3, 32, 32}, rng, -2, 2));
  }
}

}  // namespace
}  // namespace gpuopt
