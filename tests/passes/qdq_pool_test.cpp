// pool_before_qdq: MaxPool(DQ(Q(x))) -> DQ(Q(MaxPool(x))). The rewrite is exact, so the CPU
// reference must give the same bits before and after it, on values spread over many quantization
// steps, with ties, saturation and padded windows; round trips that are not one (two scales, a
// second reader, the pool's Indices output) stay as they are.
#include "pass_test_util.h"
#include "qdq_builder.h"

namespace gpuopt {
namespace {

using testing::count;
using testing::expect_same_bits;
using testing::finish;
using testing::run_cpu;
using testing::uniform;

AttributeMap pool_attrs(int64_t k, int64_t stride, int64_t pad, bool ceil = false) {
  AttributeMap a;
  a["kernel_shape"].kind = Attribute::Kind::kInts;
  a["kernel_shape"].ints = {k, k};
  a["strides"].kind = Attribute::Kind::kInts;
  a["strides"].ints = {stride, stride};
  a["pads"].kind = Attribute::Kind::kInts;
  a["pads"].ints = {pad, pad, pad, pad};
  a["ceil_mode"].i = ceil ? 1 : 0;
  return a;
}

struct Case {
  bool dq_other_scale = false;  // the DQ's scale differs from the Q's: no round trip
  bool second_reader = false;   // the DQ output is read by a Relu too
  bool indices = false;         // the MaxPool writes Indices as well
  bool ceil = false;
};

// x [2, 8, 9, 9] -> Q(0.05) -> DQ -> MaxPool 3x3/2 pad 1 -> Q(0.07) -> DQ -> y (and its extras).
Graph pool_graph(const Case& c) {
  test::QBuilder b;
  Graph& g = b.g;
  g.opset = 17;
  ValueId x = g.add_input("x", DType::F32, {2, 8, 9, 9});
  ValueId q = b.quantize(x, 0.05f, 3);
  ValueId dq;
  if (c.dq_other_scale) {
    const Node& qn = g.nodes().back();
    dq = g.add_node(Op::DequantizeLinear, "dq_other", {q, g.add_constant("s_other", Tensor::scalar_f32(0.06f)), qn.inputs[2]},
                    1)[0];
  } else {
    dq = b.dequantize(q);
  }
  auto pooled = g.add_node(Op::MaxPool, "pool", {dq}, c.indices ? 2 : 1, pool_attrs(3, 2, 1, c.ceil));
  ValueId y = b.dequantize(b.quantize(pooled[0], 0.07f));
  g.mark_output(y);
  if (c.second_reader) g.mark_output(g.add_node(Op::Relu, "relu", {dq}, 1)[0]);
  if (c.indices) g.mark_output(pooled[1]);
  finish(g);
  return g;
}

std::vector<Tensor> inputs() {
  std::mt19937 rng(5);
  Tensor x = uniform({2, 8, 9, 9}, rng, -8.f, 8.f);  // beyond the int8 range at 0.05: saturates
  for (int64_t i = 0; i < x.numel(); i += 7) x.set_f64(i, 0.05 * static_cast<double>(i % 40) + 0.025);  // ties
  return {x};
}

TEST(QdqPool, PoolsBeforeTheRoundTripWithTheSameBits) {
  for (bool ceil : {false, true}) {
    Graph ref = pool_graph({.ceil = ceil});
    Graph g = ref;
    auto st = pool_before_qdq(&g);
    ASSERT_TRUE(st.ok()) << st.status().to_string();
    EXPECT_EQ(st->rewritten, 1);
    // The MaxPool now reads the graph input itself and its output goes through the round trip.
    const Node* pool = nullptr;
    for (const Node& n : g.nodes())
      if (n.op_type == "MaxPool") pool = &n;
    ASSERT_NE(pool, nullptr);
    EXPECT_EQ(g.value(pool->inputs[0]).name, "x");
    EXPECT_EQ(count(g, "QuantizeLinear"), 2);
    EXPECT_EQ(count(g, "DequantizeLinear"), 2);
    EXPECT_EQ(g.value(g.outputs()[0]).info.shape, ref.value(ref.outputs()[0]).info.shape);
    const auto in = inputs();
    const auto want = run_cpu(ref, in), got = run_cpu(g, in);
    ASSERT_FALSE(got.empty());
    expect_same_bits(got, want);
  }
}

TEST(QdqPool, LeavesWhatIsNotOneRoundTripIntoOnePool) {
  for (const Case& c : {Case{.dq_other_scale = true}, Case{.second_reader = true}, Case{.indices = true}}) {
    Graph g = pool_graph(c);
    auto st = pool_before_qdq(&g);
    ASSERT_TRUE(st.ok()) << st.status().to_string();
    EXPECT_EQ(st->rewritten, 0);
  }
}

// In the GPU session's int8 pipeline (run here without a GPU: passes only), ResNet's stem as
// gpuopt quantize writes it: the MaxPool ends up reading the stem conv's float output, not a
// DequantizeLinear; with GPUOPT_DISABLE_FUSION=qdq_pool it reads the dequantized tensor.
TEST(QdqPool, TheInt8GpuPipelinePoolsTheStemBeforeItsRoundTrip) {
  auto stem = [] {
    test::QBuilder b;
    Graph& g = b.g;
    g.opset = 17;
    ValueId x = g.add_input("x", DType::F32, {2, 16, 16, 16});
    ValueId c0 = g.add_node(Op::Relu, "relu0", {b.conv(b.quantize(x, 0.02f), 16, 32, 3, 1, 1, true)}, 1)[0];
    ValueId p = g.add_node(Op::MaxPool, "pool", {b.dequantize(b.quantize(c0, 0.03f))}, 1, pool_attrs(3, 2, 1))[0];
    ValueId y = b.conv(b.quantize(p, 0.035f), 32, 32, 1, 0, 1, true);
    g.mark_output(y);
    finish(g);
    return std::move(b.g);
  };
  auto pool_reads = [](const Graph& g) {
    for (const Node& n : g.nodes())
      if (n.op_type.find("MaxPool") != std::string::npos) {
        const int32_t p = g.value(n.inputs[0]).producer;
        return p < 0 ? std::string("input") : g.nodes()[static_cast<size_t>(p)].op_type;
      }
    return std::string("no pool");
  };
  for (const char* off : {"", "qdq_pool"}) {
    Graph g = stem();
    setenv("GPUOPT_DISABLE_FUSION", off, 1);
    const Status st = run_session_passes(&g, "cuda", "int8", true);
    unsetenv("GPUOPT_DISABLE_FUSION");
    ASSERT_TRUE(st.ok()) << st.to_string();
    if (*off) EXPECT_EQ(pool_reads(g), "DequantizeLinear");
    else EXPECT_NE(pool_reads(g), "DequantizeLinear") << "the pool should read the conv's float output";
    EXPECT_GE(count(g, "Int8Conv"), 1) << "the conv after the pool is still an int8 conv";
  }
}

}  // namespace
}  // namespace gpuopt
