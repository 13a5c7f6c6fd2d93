// fold_qdq's conv fold (GPUOPT_INT8_CONV): DequantizeLinear -> Conv <- DequantizeLinear(W)
// [+ bias] [-> Relu] [-> QuantizeLinear] becomes one Int8Conv (and a QDQ residual add one
// Int8Add), whose CPU kernel (exact int64
// accumulation, the scales in double) is checked against the unfolded QDQ graph on the CPU
// reference: float outputs to f32 rounding; int8 outputs exactly except where the float conv's
// rounding moves v / y_scale across a half, by one step then (counted: at most 1% of them).
#include "passes/passes.h"

#include "cnn_graphs.h"
#include "qdq_builder.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <random>

namespace gpuopt {
namespace {

using test::QBuilder;
using test::expect_same_outputs;
using test::random_tensor;

int count(const Graph& g, const std::string& op) {
  int c = 0;
  for (const Node& n : g.nodes()) c += n.op_type == op;
  return c;
}

// Outputs of two graphs on the CPU reference; int8 ones within one step, at most 1% off at all.
void expect_int8_close(const Graph& ref, const Graph& got_g, const Tensor& x) {
  const std::vector<Tensor> want = test::run_cpu(ref, {x});
  const std::vector<Tensor> got = test::run_cpu(got_g, {x});
  ASSERT_EQ(got.size(), want.size());
  for (size_t o = 0; o < want.size(); ++o) {
    ASSERT_EQ(got[o].dtype(), DType::I8);
    ASSERT_EQ(got[o].shape(), want[o].shape());
    int64_t off = 0, nonzero = 0;
    for (int64_t i = 0; i < want[o].numel(); ++i) {
      const int64_t d = std::abs(got[o].get_i64(i) - want[o].get_i64(i));
      EXPECT_LE(d, 1) << "element " << i;
      off += d != 0;
      nonzero += want[o].get_i64(i) != 0;
    }
    EXPECT_LE(off * 100, want[o].numel()) << off << " of " << want[o].numel() << " differ by one step";
    EXPECT_GT(nonzero * 4, want[o].numel());  // a real signal, not a saturated or all-zero output
  }
}

Graph folded(const Graph& g, int want_convs) {
  Graph f = g;
  auto st = fold_qdq(&f, /*convs=*/true);
  EXPECT_TRUE(st.ok()) << st.status().to_string();
  EXPECT_EQ(st->rewritten - count(f, "Int8Add"), want_convs);
  EXPECT_TRUE(remove_dead_nodes(&f).ok());
  EXPECT_TRUE(f.topo_sort().ok());
  EXPECT_TRUE(f.infer_shapes().ok());
  EXPECT_EQ(count(f, "Int8Conv"), want_convs);
  return f;
}

// x -> Q -> [DQ -> Conv (+b) -> Relu] -> Q: one Int8Conv writing int8 (the Q absorbed).
TEST(FoldQdqConv, ConvBiasReluQuantize) {
  for (int64_t stride : {1, 2}) {
    QBuilder b;
    const ValueId x = b.g.add_input("x", DType::F32, {kFirstSymbolDim, 16, 9, 9});
    const ValueId y = b.quantize(b.relu(b.conv(b.quantize(x, 0.02f), 16, 32, 3, 1, stride, true)), 0.03f);
    b.output(y);
    const Graph g = b.done();
    const Graph f = folded(g, 1);
    EXPECT_EQ(count(f, "Conv") + count(f, "Relu") + count(f, "DequantizeLinear"), 0);
    EXPECT_EQ(count(f, "QuantizeLinear"), 1);  // the input's
    for (const Node& n : f.nodes())
      if (n.op_type == "Int8Conv") {
        EXPECT_EQ(n.attr_s("activation", ""), "Relu");
        EXPECT_EQ(n.inputs.size(), 6u);  // with y_scale
        EXPECT_EQ(f.value(n.outputs[0]).info.dtype, DType::I8);
      }
    std::mt19937 rng(31);
    for (int64_t batch : {1, 2}) expect_int8_close(g, f, random_tensor({batch, 16, 9, 9}, rng, -2, 2));
  }
}

// Conv -> BatchNormalization -> Relu -> Q (a model not BN-folded before quantization, as the
// generated ResNets): the BN goes into the per-channel scale (gamma may be negative) and the bias.
TEST(FoldQdqConv, BatchNormFoldsIntoScaleAndBias) {
  for (bool bias : {true, false}) {
    QBuilder b;
    const ValueId x = b.g.add_input("x", DType::F32, {2, 16, 8, 8});
    const ValueId c = b.conv(b.quantize(x, 0.02f), 16, 32, 3, 1, 1, bias);
    b.output(b.quantize(b.relu(b.batchnorm(c, 32)), 0.03f));
    const Graph g = b.done();
    const Graph f = folded(g, 1);
    EXPECT_EQ(count(f, "BatchNormalization") + count(f, "Relu") + count(f, "Conv"), 0);
    std::mt19937 rng(35);
    expect_int8_close(g, f, random_tensor({2, 16, 8, 8}, rng, -2, 2));
  }
}

// The bias behind Identity nodes: torch's legacy exporter writes equal biases (all zero in a
// freshly initialised model, once BatchNorm is folded) as one initializer with an Identity per
// conv; every conv still folds, and the Identity nodes are dead afterwards.
TEST(FoldQdqConv, BiasBehindSharedIdentityFolds) {
  QBuilder b;
  const ValueId x = b.g.add_input("x", DType::F32, {2, 16, 8, 8});
  const ValueId shared = b.g.add_constant("shared_bias", Tensor::zeros(DType::F32, {32}));
  ValueId y = b.quantize(x, 0.02f);
  for (int k = 0; k < 2; ++k) {
    const ValueId c = b.conv(y, k == 0 ? 16 : 32, 32, 3, 1, 1, true);
    const ValueId id = b.g.add_node(Op::Identity, "id" + std::to_string(k), {shared}, 1)[0];
    Node& conv = b.g.nodes()[b.g.nodes().size() - 2];
    ASSERT_EQ(conv.outputs[0], c);
    conv.inputs[2] = id;
    y = b.quantize(b.relu(c), 0.03f);
  }
  b.output(y);
  const Graph g = b.done();
  const Graph f = folded(g, 2);
  EXPECT_EQ(count(f, "Conv") + count(f, "Identity"), 0);
  std::mt19937 rng(36);
  expect_int8_close(g, f, random_tensor({2, 16, 8, 8}, rng, -2, 2));
}

// No Relu, no bias, a float output (the conv's reader is not a QuantizeLinear).
TEST(FoldQdqConv, FloatOutput) {
  QBuilder b;
  const ValueId x = b.g.add_input("x", DType::F32, {2, 32, 7, 7});
  b.output(b.conv(b.quantize(x, 0.02f), 32, 16, 1, 0, 1, false));
  const Graph g = b.done();
  const Graph f = folded(g, 1);
  for (const Node& n : f.nodes())
    if (n.op_type == "Int8Conv") {
      EXPECT_EQ(f.value(n.outputs[0]).info.dtype, DType::F32);
    }
  std::mt19937 rng(32);
  expect_same_outputs(g, f, random_tensor({2, 32, 7, 7}, rng, -2, 2), 1e-5);
}

// Two quantized convs in a row: the int8 output of the first is the second's input, no Q/DQ
// pass between them; then the layout pass makes both channels-last with Transposes only at the
// region's edges, and the outputs stay those of the NCHW Int8Convs exactly.
TEST(FoldQdqConv, ChainStaysInt8AndGoesChannelsLast) {
  QBuilder b;
  const ValueId x = b.g.add_input("x", DType::F32, {kFirstSymbolDim, 16, 10, 10});
  ValueId h = b.quantize(b.relu(b.conv(b.quantize(x, 0.02f), 16, 32, 3, 1, 1, true)), 0.03f);
  h = b.relu(b.conv(h, 32, 32, 3, 1, 2, true));
  b.output(h);
  const Graph g = b.done();
  const Graph f = folded(g, 2);
  EXPECT_EQ(count(f, "QuantizeLinear"), 1);
  EXPECT_EQ(count(f, "DequantizeLinear"), 0);
  std::mt19937 rng(33);
  const Tensor x1 = random_tensor({2, 16, 10, 10}, rng, -2, 2);
  // One int8 step in the middle moves the float output by about one step times the next layer's gain.
  expect_same_outputs(g, f, x1, 3e-2);
  Graph nhwc = f;
  auto st = layout_nhwc(&nhwc);
  ASSERT_TRUE(st.ok()) << st.status().to_string();
  for (const Node& n : nhwc.nodes())
    if (n.op_type == "Int8Conv") {
      EXPECT_EQ(n.attr_i("channels_last", 0), 1) << n.name;
    }
  EXPECT_EQ(count(nhwc, "Transpose"), 2);  // into the region (the quantized input) and out
  expect_same_outputs(f, nhwc, x1, 0.0);
}

// DQ(a) -> Add <- DQ(b) -> Relu -> Q: one Int8Add writing int8; without the Q, a float output.
TEST(FoldQdqConv, ResidualAddBecomesInt8Add) {
  for (bool quantized : {true, false}) {
    QBuilder b;
    const ValueId x1 = b.g.add_input("x1", DType::F32, {kFirstSymbolDim, 16, 5, 5});
    const ValueId x2 = b.g.add_input("x2", DType::F32, {kFirstSymbolDim, 16, 5, 5});
    // Scales without a common ratio: with 0.02/0.03/0.04, v / y_scale would land on exact halves,
    // where any difference in rounding shows.
    ValueId y = b.relu(b.op(Op::Add, {b.dequantize(b.quantize(x1, 0.0213f)), b.dequantize(b.quantize(x2, 0.0317f))}));
    if (quantized) y = b.quantize(y, 0.0429f);
    b.output(y);
    const Graph g = b.done();
    const Graph f = folded(g, 0);
    EXPECT_EQ(count(f, "Int8Add"), 1);
    EXPECT_EQ(count(f, "Add") + count(f, "Relu") + count(f, "DequantizeLinear"), 0);
    std::mt19937 rng(36);
    const Tensor a = random_tensor({2, 16, 5, 5}, rng, -3, 3), c = random_tensor({2, 16, 5, 5}, rng, -3, 3);
    const std::vector<Tensor> want = test::run_cpu(g, {a, c}), got = test::run_cpu(f, {a, c});
    ASSERT_EQ(got.size(), 1u);
    ASSERT_EQ(got[0].dtype(), quantized ? DType::I8 : DType::F32);
    int64_t off = 0;
    for (int64_t i = 0; i < want[0].numel(); ++i) {
      const double d = std::abs(got[0].get_f64(i) - want[0].get_f64(i));
      EXPECT_LE(d, quantized ? 1.0 : 1e-6) << i;
      off += d != 0;
    }
    if (quantized) {
      EXPECT_LE(off * 100, want[0].numel());
    }
  }
}

// What stays on the float path: 3 input channels (the stem), grouped convs, non-zero zero points.
TEST(FoldQdqConv, LeavesUnsupportedConvsAlone) {
  {
    QBuilder b;
    const ValueId x = b.g.add_input("x", DType::F32, {1, 3, 8, 8});
    b.output(b.conv(b.quantize(x, 0.02f), 3, 16, 3, 1, 1, true));
    Graph g = b.done();
    EXPECT_EQ(fold_qdq(&g, true)->rewritten, 0);
  }
  {
    QBuilder b;
    const ValueId x = b.g.add_input("x", DType::F32, {1, 32, 8, 8});
    b.output(b.conv(b.quantize(x, 0.02f), 32, 32, 3, 1, 1, true, /*group=*/2));
    Graph g = b.done();
    EXPECT_EQ(fold_qdq(&g, true)->rewritten, 0);
  }
  {
    QBuilder b;
    const ValueId x = b.g.add_input("x", DType::F32, {1, 16, 8, 8});
    b.output(b.conv(b.quantize(x, 0.02f, /*zero=*/5), 16, 16, 3, 1, 1, true));
    Graph g = b.done();
    EXPECT_EQ(fold_qdq(&g, true)->rewritten, 0);
  }
  {  // and nothing without the switch
    QBuilder b;
    const ValueId x = b.g.add_input("x", DType::F32, {1, 16, 8, 8});
    b.output(b.conv(b.quantize(x, 0.02f), 16, 16, 3, 1, 1, true));
    Graph g = b.done();
    EXPECT_EQ(fold_qdq(&g)->rewritten, 0);
  }
}

// The session pipeline for --precision int8 on cuda with GPUOPT_INT8_CONV=1, on the CPU
// reference: a residual block (stem on the float path, two quantized convs, a quantized Add)
// has its three 16-channel convs as channels-last Int8Convs and the add taken into the last conv
// (fuse_int8_residual, on by default; the Int8Add pair with GPUOPT_DISABLE_FUSION=int8_residual,
// exactly equal; '+int8_residual', its opt-in spelling before, still accepted), and computes
// what the CPU int8 session's graph (exact QDQ semantics) computes.
TEST(FoldQdqConv, Int8CudaPipeline) {
  QBuilder b;
  const ValueId x = b.g.add_input("x", DType::F32, {kFirstSymbolDim, 3, 12, 12});
  ValueId s = b.quantize(b.relu(b.conv(b.quantize(x, 0.02f), 3, 16, 3, 1, 1, true)), 0.02f);
  ValueId r = b.quantize(b.relu(b.conv(s, 16, 16, 3, 1, 1, true)), 0.02f);
  r = b.quantize(b.conv(r, 16, 16, 3, 1, 1, true), 0.03f);
  ValueId sum = b.relu(b.op(Op::Add, {b.dequantize(r), b.dequantize(s)}));
  sum = b.quantize(sum, 0.03f);
  b.output(b.conv(sum, 16, 16, 1, 0, 1, true));
  const Graph g = b.done();
  Graph gpu = g;
  const Status st = run_session_passes(&gpu, "cuda", "int8", true);
  ASSERT_TRUE(st.ok()) << st.to_string();
  EXPECT_EQ(count(gpu, "Int8Conv"), 3);
  EXPECT_EQ(count(gpu, "Int8Add"), 0);  // the residual add, its Relu and Q: in the last conv (fuse_int8_residual)
  // The stem's input round trip (its conv has 3 channels: fp16) is inside the input's ToNhwc.
  EXPECT_EQ(count(gpu, "DequantizeLinear"), 0);
  EXPECT_EQ(count(gpu, "ToNhwc"), 1);
  int residual = 0;
  for (const Node& n : gpu.nodes())
    if (n.op_type == "Int8Conv") {
      EXPECT_EQ(n.attr_i("channels_last", 0), 1) << n.name;
      residual += n.inputs.size() > 6;
    }
  EXPECT_EQ(residual, 1);
  Graph opted = g;
  setenv("GPUOPT_DISABLE_FUSION", "+int8_residual", 1);
  const Status opted_st = run_session_passes(&opted, "cuda", "int8", true);
  unsetenv("GPUOPT_DISABLE_FUSION");
  ASSERT_TRUE(opted_st.ok()) << opted_st.to_string();
  EXPECT_EQ(count(opted, "Int8Add"), 0);
  Graph pair = g;  // the Int8Conv -> Int8Add pair
  setenv("GPUOPT_DISABLE_FUSION", "int8_residual", 1);
  const Status pair_st = run_session_passes(&pair, "cuda", "int8", true);
  unsetenv("GPUOPT_DISABLE_FUSION");
  ASSERT_TRUE(pair_st.ok()) << pair_st.to_string();
  EXPECT_EQ(count(pair, "Int8Add"), 1);
  EXPECT_EQ(count(pair, "Int8Conv"), 3);
  Graph off = g;
  setenv("GPUOPT_INT8_CONV", "0", 1);
  const Status off_st = run_session_passes(&off, "cuda", "int8", true);
  unsetenv("GPUOPT_INT8_CONV");
  ASSERT_TRUE(off_st.ok()) << off_st.to_string();
  EXPECT_EQ(count(off, "Int8Conv"), 0);  // GPUOPT_INT8_CONV=0: Q/DQ around fp16 convs
  Graph cpu = g;
  ASSERT_TRUE(run_session_passes(&cpu, "cpu", "int8", true).ok());
  std::mt19937 rng(34);
  const Tensor x1 = random_tensor({2, 3, 12, 12}, rng, -2, 2);
  expect_same_outputs(cpu, gpu, x1, 3e-2);
  expect_same_outputs(pair, gpu, x1, 0.0);  // the fused residual computes what the pair did
}

}  // namespace
}  // namespace gpuopt
