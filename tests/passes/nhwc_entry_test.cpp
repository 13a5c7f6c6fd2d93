// nhwc_entry (pack_nhwc_entries) on the CPU reference: after layout_nhwc, the fp16 input's Cast
// and the region's entry Transpose become one ToNhwc; an RGB input read only by the stem conv is
// padded to 4 channels there, with zero weights added to the conv. The rewritten graph must
// compute exactly what the layout pass's graph computes (the oracle: the Cast, Transpose and
// 3-channel conv kernels), and an entry that something other than a conv reads is not padded.
#include "passes/passes.h"
#include "passes/precision.h"

#include "cnn_graphs.h"
#include "pass_test_util.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <random>

namespace gpuopt {
namespace {

using test::Builder;
using test::mini_mobilenet;
using test::mini_resnet;
using test::random_tensor;
using testing::count;

// The fp16 channels-last graph the CUDA session compiles before this pass.
Graph nhwc(Graph g) {
  EXPECT_TRUE(run_default_passes(&g, FusionSwitches{}).ok());
  EXPECT_TRUE(convert_precision(&g, DType::F16).ok());
  EXPECT_TRUE(layout_nhwc(&g).ok());
  return g;
}

// Both graphs' outputs, bit for bit.
void expect_same_bits(const Graph& a, const Graph& b, const Tensor& x) {
  const std::vector<Tensor> want = test::run_cpu(a, {x});
  const std::vector<Tensor> got = test::run_cpu(b, {x});
  ASSERT_EQ(got.size(), want.size());
  for (size_t o = 0; o < want.size(); ++o) {
    ASSERT_EQ(got[o].shape(), want[o].shape());
    double max_ref = 0;
    for (int64_t i = 0; i < want[o].numel(); ++i) {
      ASSERT_EQ(got[o].get_f64(i), want[o].get_f64(i)) << "output " << o << " element " << i;
      max_ref = std::max(max_ref, std::abs(want[o].get_f64(i)));
    }
    EXPECT_GT(max_ref, 0.1);
  }
}

const Node* find(const Graph& g, const std::string& op) {
  for (const Node& n : g.nodes())
    if (n.op_type == op) return &n;
  return nullptr;
}

TEST(NhwcEntry, ResNetStemInputIsOnePassPaddedToFourChannels) {
  const Graph ref = nhwc(mini_resnet());
  ASSERT_EQ(count(ref, "Transpose"), 2);  // the input's entry and the pooled exit
  Graph g = ref;
  auto st = pack_nhwc_entries(&g);
  ASSERT_TRUE(st.ok()) << st.status().to_string();
  EXPECT_EQ(st->rewritten, 1);
  EXPECT_EQ(count(g, "Cast"), count(ref, "Cast") - 1);  // the output's Cast back to f32 stays
  EXPECT_EQ(count(g, "Transpose"), 1);
  const Node* t = find(g, "ToNhwc");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->domain, "ai.gpuopt");
  EXPECT_EQ(g.value(t->inputs[0]).info.dtype, DType::F32) << "reads the model's f32 input";
  const ValueInfo& y = g.value(t->outputs[0]).info;
  EXPECT_EQ(y.dtype, DType::F16);
  ASSERT_EQ(y.shape.size(), 4u);
  EXPECT_EQ(y.shape[3], 4);
  // The stem conv reads it with a 4-channel W whose fourth channel is zero.
  for (const Node& n : g.nodes()) {
    if (n.op_type != "NhwcFusedConv" || n.inputs[0] != t->outputs[0]) continue;
    const Tensor& w = *g.value(n.inputs[1]).constant;
    ASSERT_EQ(w.dim(3), 4);
    for (int64_t i = 3; i < w.numel(); i += 4) EXPECT_EQ(w.get_f64(i), 0.0);
  }
  std::mt19937 rng(3);
  for (int64_t batch : {1, 3}) expect_same_bits(ref, g, random_tensor({batch, 3, 20, 20}, rng, -2, 2));
}

TEST(NhwcEntry, EntryReadByMoreThanAConvIsPackedNotPadded) {
  // x -> MaxPool -> conv (C=3): the pool reads the entry in the region, and a zero channel would
  // change its output; only the Cast and the Transpose become one.
  Builder b;
  const ValueId x = b.g.add_input("x", DType::F32, {kFirstSymbolDim, 3, 9, 9});
  AttributeMap pool{{"kernel_shape", test::ints({2, 2})}, {"strides", test::ints({1, 1})}};
  b.output(b.conv(b.op(Op::MaxPool, {x}, pool), 3, 5, 3, 1, 1));
  const Graph ref = nhwc(b.done());
  ASSERT_EQ(count(ref, "NhwcFusedConv"), 1);
  Graph g = ref;
  auto st = pack_nhwc_entries(&g);
  ASSERT_TRUE(st.ok()) << st.status().to_string();
  EXPECT_EQ(st->rewritten, 1);
  EXPECT_EQ(count(g, "Cast"), count(ref, "Cast") - 1);
  const Node* t = find(g, "ToNhwc");
  ASSERT_NE(t, nullptr);
  EXPECT_FALSE(t->has_attr("channels"));
  EXPECT_EQ(g.value(t->outputs[0]).info.shape[3], 3);
  std::mt19937 rng(4);
  expect_same_bits(ref, g, random_tensor({2, 3, 9, 9}, rng, -2, 2));
}

TEST(NhwcEntry, CastWithAnotherReaderStaysAndTheStemIsPadded) {
  // The fp16 input is also read outside the region (x * 0.5 stays NCHW): the Cast stays, the
  // entry (read by the conv alone) is padded.
  Builder b;
  const ValueId x = b.g.add_input("x", DType::F32, {kFirstSymbolDim, 3, 9, 9});
  const ValueId c = b.conv(x, 3, 3, 3, 1, 1);
  const ValueId half = b.g.add_constant("half", Tensor::scalar_f32(0.5f));
  b.output(b.relu(b.op(Op::Add, {c, b.op(Op::Mul, {x, half})})));
  const Graph ref = nhwc(b.done());
  Graph g = ref;
  auto st = pack_nhwc_entries(&g);
  ASSERT_TRUE(st.ok()) << st.status().to_string();
  EXPECT_EQ(st->rewritten, 1);
  EXPECT_EQ(count(g, "Cast"), count(ref, "Cast"));
  const Node* t = find(g, "ToNhwc");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(g.value(t->inputs[0]).info.dtype, DType::F16) << "reads the Cast's output";
  EXPECT_EQ(g.value(t->outputs[0]).info.shape[3], 4);
  std::mt19937 rng(6);
  expect_same_bits(ref, g, random_tensor({2, 3, 9, 9}, rng, -2, 2));
}

TEST(NhwcEntry, QuantizedInputRoundTripIsTakenIn) {
  // x -> QuantizeLinear -> DequantizeLinear -> conv (C=3): a QDQ model's quantized input. After
  // fp16 the Cast, Q, DQ and the entry Transpose become one ToNhwc with the scale and zero point.
  Builder b;
  const ValueId x = b.g.add_input("x", DType::F32, {kFirstSymbolDim, 3, 11, 13});
  const ValueId s = b.g.add_constant("s", Tensor::scalar_f32(0.02f));
  Tensor zp = Tensor::zeros(DType::I8, {});
  zp.set_f64(0, 3);
  const ValueId z = b.g.add_constant("z", zp);
  const ValueId dq = b.op(Op::DequantizeLinear, {b.op(Op::QuantizeLinear, {x, s, z}), s, z});
  b.output(b.relu(b.conv(dq, 3, 8, 3, 1, 2)));
  const Graph ref = nhwc(b.done());
  ASSERT_EQ(count(ref, "QuantizeLinear"), 1);
  Graph g = ref;
  auto st = pack_nhwc_entries(&g);
  ASSERT_TRUE(st.ok()) << st.status().to_string();
  EXPECT_EQ(st->rewritten, 1);
  EXPECT_EQ(count(g, "QuantizeLinear") + count(g, "DequantizeLinear"), 0);
  EXPECT_EQ(count(g, "Cast"), count(ref, "Cast") - 1);
  const Node* t = find(g, "ToNhwc");
  ASSERT_NE(t, nullptr);
  ASSERT_EQ(t->inputs.size(), 3u);
  EXPECT_EQ(g.value(t->inputs[0]).info.dtype, DType::F32);
  EXPECT_EQ(g.value(t->outputs[0]).info.shape[3], 4);
  // Values past the int8 range saturate; the same bits as Cast, Q, DQ and the Transpose.
  std::mt19937 rng(8);
  expect_same_bits(ref, g, random_tensor({2, 3, 11, 13}, rng, -4, 4));
}

TEST(NhwcEntry, SessionPipelineOnCudaOnlyAndSwitchable) {
  auto ops = [](const char* device, const char* off) {
    Graph g = mini_mobilenet();
    if (off) setenv("GPUOPT_DISABLE_FUSION", off, 1);
    const Status st = run_session_passes(&g, device, "fp16", true);
    unsetenv("GPUOPT_DISABLE_FUSION");
    EXPECT_TRUE(st.ok()) << st.to_string();
    return std::pair<int, int>{count(g, "ToNhwc"), count(g, "Cast")};
  };
  EXPECT_EQ(ops("cuda", nullptr), (std::pair<int, int>{1, 1}));  // the output's Cast back to f32 stays
  EXPECT_EQ(ops("cuda", "nhwc_entry"), (std::pair<int, int>{0, 2}));
  EXPECT_EQ(ops("cpu", nullptr).first, 0);  // the CPU reference runs the model's layout
}

}  // namespace
}  // namespace gpuopt
