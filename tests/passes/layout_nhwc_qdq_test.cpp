// layout_nhwc on a QDQ CNN (what `gpuopt quantize` writes, as `--precision int8` compiles it for
// the GPU: default passes, fp16, layout) on the CPU reference: per-tensor QuantizeLinear /
// DequantizeLinear are elementwise, so every conv of the model is channels-last in one region
// with Transposes only at its edges, and the outputs equal the NCHW graph's; a per-channel
// QuantizeLinear of an activation (its axis is an NCHW axis) stays outside the region.
#include "passes/passes.h"
#include "passes/precision.h"

#include "cnn_graphs.h"

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

Graph half(Graph g) {
  EXPECT_TRUE(run_default_passes(&g, FusionSwitches{}).ok());
  EXPECT_TRUE(convert_precision(&g, DType::F16).ok());
  return g;
}

// QDQ recipe of gpuopt quantize: activations per tensor (i8, zero point 0), conv weights int8
// with a per-output-channel DequantizeLinear (axis 0), f32 biases.
struct QdqBuilder : Builder {
  ValueId qdq(ValueId x, float scale, bool per_channel = false, int64_t c = 0) {
    const std::string n = "qdq" + std::to_string(next++);
    ValueId s, z;
    AttributeMap a;
    if (per_channel) {
      Tensor st = Tensor::empty(DType::F32, {c});
      for (int64_t i = 0; i < c; ++i) st.set_f64(i, scale * (1.0 + 0.25 * static_cast<double>(i % 4)));
      s = g.add_constant(n + ".s", st);
      z = g.add_constant(n + ".z", Tensor::zeros(DType::I8, {c}));
      a["axis"].i = 1;  // an Attribute is an int by default
    } else {
      s = g.add_constant(n + ".s", Tensor::scalar_f32(scale));
      z = g.add_constant(n + ".z", Tensor::zeros(DType::I8, {}));
    }
    const ValueId q = g.add_node(Op::QuantizeLinear, n + "/q", {x, s, z}, 1, a)[0];
    return g.add_node(Op::DequantizeLinear, n + "/dq", {q, s, z}, 1, a)[0];
  }
  // DQ(Q(x)) -> Conv <- DQ(W int8, per channel) [+ bias].
  ValueId qconv(ValueId x, float xs, int64_t cin, int64_t cout, int64_t k, int64_t pad, int64_t stride) {
    const std::string n = "qconv" + std::to_string(next++);
    Tensor wq = Tensor::empty(DType::I8, {cout, cin, k, k});
    std::uniform_int_distribution<int> u(-127, 127);
    for (int64_t i = 0; i < wq.numel(); ++i) wq.data<int8_t>()[i] = static_cast<int8_t>(u(rng));
    const float r = 1.0f / std::sqrt(static_cast<float>(cin * k * k)) / 127.0f * 1.7f;
    AttributeMap ax;
    ax["axis"].i = 0;
    const ValueId wd =
        g.add_node(Op::DequantizeLinear, n + "/dqw",
                   {g.add_constant(n + ".wq", wq), g.add_constant(n + ".ws", random_tensor({cout}, rng, 0.5f * r, r)),
                    g.add_constant(n + ".wz", Tensor::zeros(DType::I8, {cout}))},
                   1, ax)[0];
    return g.add_node(Op::Conv, n,
                      {qdq(x, xs), wd, g.add_constant(n + ".b", random_tensor({cout}, rng, -0.2f, 0.2f))}, 1,
                      test::conv_attrs(k, pad, stride))[0];
  }
};

// Stem conv, max pool, a residual block whose Add has both inputs quantized (as the recipe
// quantizes an Add that feeds a conv or pool), a downsampling conv, the pooled head.
Graph qdq_resnet(bool per_channel_activation = false) {
  QdqBuilder b;
  const int64_t c = 8;
  ValueId x = b.g.add_input("x", DType::F32, {kFirstSymbolDim, 3, 20, 20});
  ValueId s = b.relu(b.qconv(x, 0.02f, 3, c, 5, 2, 2));
  AttributeMap mp{{"kernel_shape", ints({3, 3})}, {"pads", ints({1, 1, 1, 1})}, {"strides", ints({2, 2})}};
  s = b.op(Op::MaxPool, {b.qdq(s, 0.02f)}, mp);
  ValueId r = b.qconv(b.relu(b.qconv(s, 0.02f, c, c, 3, 1, 1)), 0.02f, c, c, 3, 1, 1);
  s = b.relu(b.op(Op::Add, {b.qdq(r, 0.03f), b.qdq(s, 0.02f, per_channel_activation, c)}));
  s = b.relu(b.qconv(s, 0.03f, c, 2 * c, 3, 1, 2));
  b.output(b.head(b.qdq(s, 0.03f), 2 * c, 5));
  return b.done();
}

TEST(LayoutNhwcQdq, PerTensorQdqJoinsTheRegion) {
  const Graph f32 = qdq_resnet();
  const Graph ref = half(f32);
  ASSERT_EQ(count(ref, "FusedConv") + count(ref, "Conv"), 4);
  ASSERT_EQ(count(ref, "QuantizeLinear"), 8);
  for (const Node& n : ref.nodes())
    if (n.op_type == "DequantizeLinear") {
      EXPECT_EQ(ref.value(n.outputs[0]).info.dtype, DType::F16) << n.name;
    }
  Graph g = ref;
  auto st = layout_nhwc(&g);
  ASSERT_TRUE(st.ok()) << st.status().to_string();
  EXPECT_EQ(count(g, "NhwcFusedConv"), 4);
  EXPECT_EQ(count(g, "FusedConv") + count(g, "Conv") + count(g, "MaxPool"), 0);
  EXPECT_EQ(count(g, "QuantizeLinear"), 8);
  // In: the stem's dequantized input (its Q/DQ read the graph input only); out: the pooled head.
  EXPECT_EQ(count(g, "Transpose"), 2);
  EXPECT_EQ(st->added, 2);
  // Every Q/DQ but the stem's pair reads a channels-last value.
  int nhwc_qdq = 0;
  for (const Node& n : g.nodes())
    if (n.op_type == "QuantizeLinear" || n.op_type == "DequantizeLinear")
      nhwc_qdq += g.value(n.inputs[0]).name.ends_with("_nhwc");
  EXPECT_EQ(nhwc_qdq, 14);
  std::mt19937 rng(21);
  for (int64_t batch : {1, 3}) {
    const Tensor x = random_tensor({batch, 3, 20, 20}, rng, -2, 2);
    expect_same_outputs(ref, g, x, 2e-3);
    // And against the f32 QDQ model, as the CPU reference runs it (fp16 moves a few values one quantum).
    expect_same_outputs(f32, g, x, 3e-2);
  }
}

// The session's whole pipeline for --precision int8 on cuda with the convs left as Q/DQ around
// fp16 convs (GPUOPT_INT8_CONV=0; fold_qdq, folding the weights' DequantizeLinear, fp16,
// layout, nhwc_entry), run here on the CPU reference: the convs are channels-last between one ToNhwc
// and one Transpose and it
// computes what the int8 CPU session's graph computes.
TEST(LayoutNhwcQdq, Int8CudaPipelineIsOneRegion) {
  const Graph f32 = qdq_resnet();
  Graph g = f32;
  setenv("GPUOPT_INT8_CONV", "0", 1);
  const Status st = run_session_passes(&g, "cuda", "int8", true);
  unsetenv("GPUOPT_INT8_CONV");
  ASSERT_TRUE(st.ok()) << st.to_string();
  EXPECT_EQ(count(g, "NhwcFusedConv"), 4);
  // The input's entry, with its Cast and its quantize round trip inside (nhwc_entry).
  EXPECT_EQ(count(g, "ToNhwc"), 1);
  EXPECT_EQ(count(g, "Transpose"), 1);  // the exit
  // 8 less three: the pool now pools before its round trip (qdq_pool), the block's conv and Add
  // re-quantized its output at that same 0.02 (qdq_requant drops both), and the input's is in ToNhwc.
  EXPECT_EQ(count(g, "QuantizeLinear"), 5);
  Graph cpu = f32;
  ASSERT_TRUE(run_session_passes(&cpu, "cpu", "int8", true).ok());
  std::mt19937 rng(23);
  expect_same_outputs(cpu, g, random_tensor({2, 3, 20, 20}, rng, -2, 2), 3e-2);
}

TEST(LayoutNhwcQdq, PerChannelActivationQuantizeStaysNchw) {
  const Graph ref = half(qdq_resnet(/*per_channel_activation=*/true));
  Graph g = ref;
  ASSERT_TRUE(layout_nhwc(&g).ok());
  EXPECT_EQ(count(g, "NhwcFusedConv"), 4);
  int checked = 0;
  for (const Node& n : g.nodes()) {
    if ((n.op_type != "QuantizeLinear" && n.op_type != "DequantizeLinear") || n.inputs.size() < 2 ||
        g.value(n.inputs[1]).info.shape.empty())
      continue;
    EXPECT_FALSE(g.value(n.inputs[0]).name.ends_with("_nhwc")) << n.name << " reads a channels-last value";
    EXPECT_FALSE(g.value(n.outputs[0]).name.ends_with("_nhwc")) << n.name;
    ++checked;
  }
  EXPECT_EQ(checked, 2);  // the per-channel pair
  std::mt19937 rng(22);
  expect_same_outputs(ref, g, random_tensor({2, 3, 20, 20}, rng, -2, 2), 2e-3);
}

}  // namespace
}  // namespace gpuopt
