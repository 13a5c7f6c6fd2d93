// fuse_se_mean on the CPU reference: squeeze-excitation blocks (depthwise conv -> SiLU -> spatial
// mean -> 1x1 convs -> Sigmoid -> gate Mul) in both exporters' forms of the mean
// (GlobalAveragePool; ReduceMean over [-1, -2] with keepdims, as an attribute and as an input)
// go through the session's passes (default passes, fp16, layout_nhwc) and then se_mean: the mean
// becomes the depthwise NhwcFusedConv's second output and the graph computes what it computed
// before. Negative cases: a mean over other axes, without keepdims, after a dense conv, in bf16
// (where the mean stays f32 behind a Cast); a conv output with a third reader still fuses. The
// exported EfficientNet blocks (tests/data/exported) fuse all four of their means either way.
#include "onnx/importer.h"
#include "passes/passes.h"
#include "passes/precision.h"
#include "passes/se_mean.h"

#include "cnn_graphs.h"
#include "pass_test_util.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <random>

namespace gpuopt {
namespace {

using test::Builder;
using test::expect_same_outputs;
using test::ints;
using test::random_tensor;

int count(const Graph& g, const std::string& op) {
  int c = 0;
  for (const Node& n : g.nodes()) c += n.op_type == op;
  return c;
}

// NhwcFusedConv nodes that write the mean as a second output.
int with_mean(const Graph& g) {
  int c = 0;
  for (const Node& n : g.nodes()) c += n.op_type == "NhwcFusedConv" && n.outputs.size() == 2;
  return c;
}

ValueId silu(Builder& b, ValueId v) {
  return b.op(Op::Mul, {v, b.op(Op::Sigmoid, {v})});
}

enum class MeanForm { kGap, kAxesAttr, kAxesInput, kChannelAxis, kNoKeepdims };

ValueId mean_of(Builder& b, ValueId d, MeanForm form) {
  if (form == MeanForm::kGap) return b.op(Op::GlobalAveragePool, {d});
  AttributeMap a;
  a["keepdims"].kind = Attribute::Kind::kInt;
  a["keepdims"].i = form == MeanForm::kNoKeepdims ? 0 : 1;
  if (form == MeanForm::kAxesInput) {
    Tensor axes = Tensor::empty(DType::I64, {2});
    axes.data<int64_t>()[0] = -1;
    axes.data<int64_t>()[1] = -2;
    return b.op(Op::ReduceMean, {d, b.g.add_constant("axes" + std::to_string(b.next), std::move(axes))}, a);
  }
  a["axes"] = form == MeanForm::kChannelAxis ? ints({1}) : ints({-1, -2});
  return b.op(Op::ReduceMean, {d}, a);
}

// x [N, 8, 12, 12] -> stem conv + SiLU -> depthwise 3x3 (`group` 16, or 1 for a dense conv) +
// SiLU = d -> SE on d (mean, 1x1 16->4, SiLU, 1x1 4->16, Sigmoid, d * gate) -> 1x1 projection.
// A mean that cannot feed the SE's 1x1 conv (channel axis, no keepdims) is a graph output of its
// own and the gate is the plain Sigmoid of d.
Graph se_block(MeanForm form, int64_t group = 16, bool d_is_output = false) {
  Builder b;
  if (form == MeanForm::kAxesInput) b.g.opset = 18;
  ValueId x = b.g.add_input("x", DType::F32, {kFirstSymbolDim, 8, 12, 12});
  ValueId s = silu(b, b.conv(x, 8, 16, 3, 1, 1));
  ValueId d = silu(b, b.conv(s, 16, 16, 3, 1, 1, group));
  ValueId m = mean_of(b, d, form);
  ValueId gate;
  if (form == MeanForm::kChannelAxis || form == MeanForm::kNoKeepdims) {
    b.output(m);
    gate = b.op(Op::Sigmoid, {d});
  } else {
    gate = b.op(Op::Sigmoid, {b.conv(silu(b, b.conv(m, 16, 4, 1, 0, 1)), 4, 16, 1, 0, 1)});
  }
  if (d_is_output) b.output(d);
  b.output(b.conv(b.op(Op::Mul, {d, gate}), 16, 8, 1, 0, 1));
  return b.done();
}

// The session's passes up to and including layout_nhwc, without se_mean.
Graph channels_last(Graph g, DType dt = DType::F16) {
  EXPECT_TRUE(run_default_passes(&g, FusionSwitches{}).ok());
  EXPECT_TRUE(convert_precision(&g, dt).ok());
  auto st = layout_nhwc(&g);
  EXPECT_TRUE(st.ok()) << st.status().to_string();
  return g;
}

void expect_fused(MeanForm form) {
  const Graph ref = channels_last(se_block(form));
  // Both exporters' means join the channels-last region: no Transpose but the graph's edges.
  EXPECT_EQ(count(ref, "Transpose"), 2);
  ASSERT_EQ(count(ref, "ReduceMean"), 1);
  Graph g = ref;
  auto st = fuse_se_mean(&g);
  ASSERT_TRUE(st.ok()) << st.status().to_string();
  EXPECT_EQ(st->rewritten, 1);
  EXPECT_EQ(count(g, "ReduceMean"), 0);
  ASSERT_EQ(with_mean(g), 1);
  for (const Node& n : g.nodes())
    if (n.outputs.size() == 2) {
      EXPECT_EQ(n.attr_i("group", 1), 16);
      EXPECT_EQ(g.value(n.outputs[1]).info.shape, (Shape{kFirstSymbolDim, 1, 1, 16}));
      EXPECT_EQ(g.value(n.outputs[1]).info.dtype, DType::F16);
    }
  std::mt19937 rng(21);
  for (int64_t batch : {1, 3}) expect_same_outputs(ref, g, random_tensor({batch, 8, 12, 12}, rng, -2, 2), 1e-3);
}

TEST(SeMean, GlobalAveragePoolMovesIntoTheDepthwiseConv) {
  expect_fused(MeanForm::kGap);
}

TEST(SeMean, DynamoReduceMeanAxesAttributeMovesIn) {
  expect_fused(MeanForm::kAxesAttr);
}

TEST(SeMean, DynamoReduceMeanAxesInputMovesIn) {
  expect_fused(MeanForm::kAxesInput);
}

// MobileNetV3's form: HardSwish after the depthwise conv, Relu inside the SE, a HardSigmoid gate.
TEST(SeMean, MobileNetV3FormMovesIn) {
  Builder b;
  ValueId x = b.g.add_input("x", DType::F32, {kFirstSymbolDim, 8, 11, 13});
  ValueId s = b.relu(b.conv(x, 8, 24, 1, 0, 1));
  ValueId d = b.op(Op::HardSwish, {b.conv(s, 24, 24, 5, 2, 2, 24)});  // depthwise 5x5 s2
  AttributeMap hs;
  hs["alpha"].kind = Attribute::Kind::kFloat;
  hs["alpha"].f = 1.0f / 6.0f;
  ValueId m = b.op(Op::GlobalAveragePool, {d});
  ValueId gate = b.op(Op::HardSigmoid, {b.conv(b.relu(b.conv(m, 24, 8, 1, 0, 1)), 8, 24, 1, 0, 1)}, hs);
  b.output(b.conv(b.op(Op::Mul, {d, gate}), 24, 16, 1, 0, 1));
  const Graph ref = channels_last(b.done());
  Graph g = ref;
  ASSERT_TRUE(fuse_se_mean(&g).ok());
  EXPECT_EQ(with_mean(g), 1);
  EXPECT_EQ(count(g, "ReduceMean"), 0);
  for (const Node& n : g.nodes()) {
    if (n.outputs.size() == 2) {
      EXPECT_EQ(n.attr_s("activation", ""), "HardSwish");
    }
  }
  std::mt19937 rng(25);
  for (int64_t batch : {1, 4}) expect_same_outputs(ref, g, random_tensor({batch, 8, 11, 13}, rng, -2, 2), 1e-3);
}

// Nothing fuses; the graph (and what it computes) is left as it was.
void expect_untouched(const Graph& ref) {
  Graph g = ref;
  auto st = fuse_se_mean(&g);
  ASSERT_TRUE(st.ok()) << st.status().to_string();
  EXPECT_EQ(st->rewritten, 0);
  EXPECT_EQ(with_mean(g), 0);
  EXPECT_EQ(g.nodes().size(), ref.nodes().size());
}

TEST(SeMean, OtherAxesNoKeepdimsDenseConvsAndBf16AreLeftAlone) {
  for (MeanForm form : {MeanForm::kChannelAxis, MeanForm::kNoKeepdims}) {
    SCOPED_TRACE(static_cast<int>(form));
    expect_untouched(channels_last(se_block(form)));
  }
  // A mean after a dense conv: the CUDA kernel would be cuDNN's plus a second pass, no gain.
  const Graph dense = channels_last(se_block(MeanForm::kGap, 1));
  EXPECT_EQ(count(dense, "ReduceMean"), 1);
  expect_untouched(dense);
  // bf16 keeps the mean in f32 (precision.h): a Cast stands between the conv and the mean.
  expect_untouched(channels_last(se_block(MeanForm::kGap), DType::BF16));
}

// The depthwise output is also a graph output (a third reader, beside the mean and the gate).
TEST(SeMean, ConvOutputWithAThirdReaderStillFuses) {
  const Graph ref = channels_last(se_block(MeanForm::kGap, 16, true));
  Graph g = ref;
  ASSERT_TRUE(fuse_se_mean(&g).ok());
  EXPECT_EQ(with_mean(g), 1);
  EXPECT_EQ(g.outputs().size(), 2u);
  std::mt19937 rng(22);
  expect_same_outputs(ref, g, random_tensor({2, 8, 12, 12}, rng, -2, 2), 1e-3);
}

// What run_session_passes does: se_mean after the layout pass for CUDA fp16, off by its name
// (and with the layout pass), never on the CPU.
TEST(SeMean, SessionPassesRunItAndTheSwitchTurnsItOff) {
  auto fused = [](const char* device, const char* off) {
    Graph g = se_block(MeanForm::kGap);
    const Status st = gpuopt::testing::session_passes(&g, device, off);
    EXPECT_TRUE(st.ok()) << st.to_string();
    return with_mean(g);
  };
  EXPECT_EQ(fused("cuda", nullptr), 1);
  EXPECT_EQ(fused("cuda", "se_mean"), 0);
  EXPECT_EQ(fused("cuda", "nhwc"), 0);
  EXPECT_EQ(fused("cpu", nullptr), 0);
  EXPECT_TRUE(FusionSwitches::parse("se_mean").validate().ok());
}

// test::mini_efficientnet (the graph tests/cuda/se_session_test.cpp runs on the GPU): both SE
// means, after a depthwise 3x3 s1 and a 5x5 s2, move in; the logits are the same to the bit.
TEST(SeMean, MiniEfficientNetBothBlocksFuse) {
  const Graph model = test::mini_efficientnet(12, 29);
  Graph ref = model, g = model;
  const Status a = gpuopt::testing::session_passes(&ref, "cuda", "se_mean");
  ASSERT_TRUE(a.ok()) << a.to_string();
  ASSERT_TRUE(run_session_passes(&g, "cuda", "fp16", true).ok());
  EXPECT_EQ(with_mean(ref), 0);
  EXPECT_EQ(with_mean(g), 2);
  EXPECT_EQ(count(g, "ReduceMean"), 1);  // the classifier's pool
  std::mt19937 rng(24);
  const Tensor x = random_tensor({3, 3, 29, 29}, rng, -2, 2);
  const std::vector<Tensor> want = test::run_cpu(ref, {x}), got = test::run_cpu(g, {x});
  ASSERT_EQ(want.size(), 1u);
  ASSERT_EQ(got.size(), 1u);
  ASSERT_EQ(got[0].shape(), want[0].shape());
  for (int64_t i = 0; i < want[0].numel(); ++i) ASSERT_EQ(got[0].get_f64(i), want[0].get_f64(i)) << i;
}

// The exporters' EfficientNet blocks (torchvision, 32x32): three squeeze-excitation means each,
// GlobalAveragePool (legacy) or ReduceMean over [-1, -2] (dynamo), all three into the depthwise
// convs; the classifier's pool after the last (1x1) conv stays a ReduceMean.
TEST(SeMean, ExportedEfficientNetBlocksFuseEveryMean) {
  for (const char* exporter : {"legacy", "dynamo"}) {
    SCOPED_TRACE(exporter);
    const std::string path =
        std::string(GPUOPT_SOURCE_DIR) + "/tests/data/exported/efficientnet_tiny_tv_" + exporter + ".onnx";
    auto loaded = load_onnx_model(path);
    ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
    Graph ref = *loaded;
    const Status a = gpuopt::testing::session_passes(&ref, "cuda", "se_mean");
    ASSERT_TRUE(a.ok()) << a.to_string();
    Graph g = *loaded;
    ASSERT_TRUE(run_session_passes(&g, "cuda", "fp16", true).ok());
    EXPECT_EQ(count(ref, "ReduceMean"), 4);
    // Into the region (the input's Cast and entry as one ToNhwc, nhwc_entry) and out of it once.
    EXPECT_EQ(count(ref, "ToNhwc"), 1);
    EXPECT_EQ(count(ref, "Transpose"), 1) << "the means are inside the channels-last region";
    EXPECT_EQ(with_mean(g), 3);
    EXPECT_EQ(count(g, "ReduceMean"), 1);
    // The reference computes the mean from Y as stored, in double, as ReduceMean does: the same
    // logits to the bit.
    std::mt19937 rng(23);
    const Tensor x = random_tensor({2, 3, 32, 32}, rng, -2, 2);
    const std::vector<Tensor> want = test::run_cpu(ref, {x}), got = test::run_cpu(g, {x});
    ASSERT_EQ(want.size(), 1u);
    ASSERT_EQ(got.size(), 1u);
    ASSERT_EQ(got[0].shape(), want[0].shape());
    double err = 0, peak = 0;
    for (int64_t i = 0; i < want[0].numel(); ++i) {
      err = std::max(err, std::abs(got[0].get_f64(i) - want[0].get_f64(i)));
      peak = std::max(peak, std::abs(want[0].get_f64(i)));
    }
    EXPECT_GT(peak, 0.0);
    EXPECT_EQ(err, 0.0);
  }
}

}  // namespace
}  // namespace gpuopt
