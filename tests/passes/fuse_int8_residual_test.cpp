// fuse_int8_residual: fold_qdq's Int8Conv -> Int8Add pair at a bottleneck's end becomes one
// residual Int8Conv whose outputs on the CPU reference are byte for byte the pair's (NCHW and
// after layout_nhwc, the conv's output either addend, with and without the add's Relu and
// QuantizeLinear); and what must stay a pair: a float addend (no Int8Add), a conv output read
// elsewhere too, an add whose scale of the conv's output is not the conv's y_scale.
#include "passes/passes.h"

#include "cnn_graphs.h"
#include "qdq_builder.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>

namespace gpuopt {
namespace {

using test::QBuilder;
using test::random_tensor;

int count(const Graph& g, const std::string& op) {
  int c = 0;
  for (const Node& n : g.nodes()) c += n.op_type == op;
  return c;
}

// Byte-equal outputs of two graphs on the CPU reference, with a real signal.
void expect_identical(const Graph& ref, const Graph& got_g, const Tensor& x) {
  const std::vector<Tensor> want = test::run_cpu(ref, {x});
  const std::vector<Tensor> got = test::run_cpu(got_g, {x});
  ASSERT_EQ(got.size(), want.size());
  for (size_t o = 0; o < want.size(); ++o) {
    ASSERT_EQ(got[o].dtype(), want[o].dtype());
    ASSERT_EQ(got[o].shape(), want[o].shape());
    EXPECT_EQ(std::memcmp(got[o].raw(), want[o].raw(), got[o].nbytes()), 0) << "output " << o;
    int64_t nonzero = 0;
    for (int64_t i = 0; i < want[o].numel(); ++i) nonzero += want[o].get_f64(i) != 0;
    EXPECT_GT(nonzero * 4, want[o].numel());
  }
}

// x -> Q -> conv3x3 -> Relu -> Q -> conv3x3 -> Q(c) ; DQ(c) + DQ(x's Q) [-> Relu] [-> Q]
// (ResNet's identity bottleneck end), folded by fold_qdq into Int8Convs and an Int8Add.
struct Block {
  Graph g;       // as written
  Graph folded;  // after fold_qdq
};

Block block(bool conv_first, bool relu, bool quantize_out, float add_scale_of_c = 0.f) {
  QBuilder b;
  const ValueId x = b.g.add_input("x", DType::F32, {kFirstSymbolDim, 16, 9, 9});
  const ValueId s = b.quantize(x, 0.02f);
  ValueId r = b.quantize(b.relu(b.conv(s, 16, 16, 3, 1, 1, true)), 0.025f);
  // The conv's int8 step is about 3 output steps: the intermediate rounding matters.
  const ValueId c = b.quantize(b.conv(r, 16, 16, 3, 1, 1, true), 0.09f);
  ValueId dc = b.dequantize(c);
  if (add_scale_of_c > 0) {  // a DequantizeLinear of c with a scale other than its QuantizeLinear's
    const Node& q = b.g.nodes()[static_cast<size_t>(b.g.value(c).producer)];
    const ValueId other = b.g.add_constant("other.s", Tensor::scalar_f32(add_scale_of_c));
    dc = b.g.add_node(Op::DequantizeLinear, "dq_other", {c, other, q.inputs[2]}, 1)[0];
  }
  const ValueId ds = b.dequantize(s);
  ValueId sum = b.op(Op::Add, conv_first ? std::vector<ValueId>{dc, ds} : std::vector<ValueId>{ds, dc});
  if (relu) sum = b.relu(sum);
  if (quantize_out) sum = b.quantize(sum, 0.031f);
  b.output(sum);
  Block out{b.done(), {}};
  out.folded = out.g;
  auto st = fold_qdq(&out.folded, /*convs=*/true);
  EXPECT_TRUE(st.ok()) << st.status().to_string();
  EXPECT_TRUE(remove_dead_nodes(&out.folded).ok());
  EXPECT_TRUE(out.folded.topo_sort().ok());
  EXPECT_TRUE(out.folded.infer_shapes().ok());
  return out;
}

Graph fused(const Graph& g, int want) {
  Graph f = g;
  auto st = fuse_int8_residual(&f);
  EXPECT_TRUE(st.ok()) << st.status().to_string();
  EXPECT_EQ(st->rewritten, want);
  EXPECT_TRUE(f.infer_shapes().ok());
  return f;
}

TEST(FuseInt8Residual, PairBecomesOneConvWithTheSameBytes) {
  std::mt19937 rng(51);
  for (bool conv_first : {true, false})
    for (bool relu : {true, false})
      for (bool quantize_out : {true, false}) {
        SCOPED_TRACE(testing::Message() << "conv_first " << conv_first << " relu " << relu << " quantize " << quantize_out);
        const Block b = block(conv_first, relu, quantize_out);
        ASSERT_EQ(count(b.folded, "Int8Add"), 1);
        ASSERT_EQ(count(b.folded, "Int8Conv"), 2);
        const Graph f = fused(b.folded, 1);
        EXPECT_EQ(count(f, "Int8Add"), 0);
        EXPECT_EQ(count(f, "Int8Conv"), 2);
        for (const Node& n : f.nodes())
          if (n.op_type == "Int8Conv" && n.inputs.size() > 6) {
            EXPECT_EQ(n.attr_s("residual_activation", ""), relu ? "Relu" : "");
            EXPECT_EQ(n.inputs.size(), quantize_out ? 9u : 8u);
            EXPECT_EQ(f.value(n.outputs[0]).info.dtype, quantize_out ? DType::I8 : DType::F32);
          }
        const Tensor x = random_tensor({2, 16, 9, 9}, rng, -2, 2);
        expect_identical(b.folded, f, x);
        // Channels-last (the pass runs after layout_nhwc in the session pipeline).
        Graph nhwc = b.folded;
        ASSERT_TRUE(layout_nhwc(&nhwc).ok());
        const Graph fn = fused(nhwc, 1);
        for (const Node& n : fn.nodes())
          if (n.op_type == "Int8Conv") {
            EXPECT_EQ(n.attr_i("channels_last", 0), 1);
          }
        expect_identical(b.folded, fn, x);
      }
}

TEST(FuseInt8Residual, LeavesOtherPairsAlone) {
  {  // the add's other addend is float: fold_qdq writes no Int8Add, nothing to fuse
    QBuilder b;
    const ValueId x = b.g.add_input("x", DType::F32, {1, 16, 6, 6});
    const ValueId c = b.quantize(b.conv(b.quantize(x, 0.02f), 16, 16, 3, 1, 1, true), 0.05f);
    b.output(b.relu(b.op(Op::Add, {b.dequantize(c), x})));
    Graph g = b.done();
    ASSERT_TRUE(fold_qdq(&g, true).ok());
    ASSERT_EQ(count(g, "Int8Conv"), 1);
    const Graph f = fused(g, 0);
    EXPECT_EQ(count(f, "Add"), 1);
  }
  {  // the conv's int8 output has another reader (here a second conv)
    QBuilder b;
    const ValueId x = b.g.add_input("x", DType::F32, {1, 16, 6, 6});
    const ValueId s = b.quantize(x, 0.02f);
    const ValueId c = b.quantize(b.conv(s, 16, 16, 3, 1, 1, true), 0.05f);
    b.output(b.quantize(b.op(Op::Add, {b.dequantize(c), b.dequantize(s)}), 0.06f));
    b.output(b.conv(c, 16, 16, 1, 0, 1, true));
    Graph g = b.done();
    ASSERT_TRUE(fold_qdq(&g, true).ok());
    ASSERT_TRUE(remove_dead_nodes(&g).ok());
    ASSERT_EQ(count(g, "Int8Add"), 1);
    const Graph f = fused(g, 0);
    EXPECT_EQ(count(f, "Int8Add"), 1);
  }
  {  // the add reads c at another scale than the conv wrote it: not the pair's arithmetic
    const Block b = block(true, true, true, /*add_scale_of_c=*/0.08f);
    ASSERT_EQ(count(b.folded, "Int8Add"), 1);
    const Graph f = fused(b.folded, 0);
    EXPECT_EQ(count(f, "Int8Add"), 1);
  }
}

TEST(FuseInt8Residual, SwitchIsAKnownFusionName) {
  EXPECT_TRUE(FusionSwitches::parse("int8_residual").validate().ok());
  EXPECT_FALSE(FusionSwitches::parse("int8_residual").enabled("int8_residual"));
  // Opt-in: off unless named with '+'; '+' on a pass that is not opt-in is refused.
  EXPECT_FALSE(FusionSwitches::parse("").opted_in("int8_residual"));
  EXPECT_TRUE(FusionSwitches::parse("+int8_residual").opted_in("int8_residual"));
  EXPECT_TRUE(FusionSwitches::parse("+int8_residual").validate().ok());
  EXPECT_FALSE(FusionSwitches::parse("+int8_residual,all").opted_in("int8_residual"));
  EXPECT_FALSE(FusionSwitches::parse("+conv").validate().ok());
}

}  // namespace
}  // namespace gpuopt
