// unfold_window_attention (and fuse_attention after it): torchvision's shifted-window attention
// (scores + relative-position bias, Reshape to [B, nW, H, N, N], + shift mask, Reshape back,
// Softmax, MatMul) becomes one Attention with the windows among the heads and bias + mask as one
// constant. The oracle is the CPU reference on the graph before the pass. Graphs that look alike
// but must stay: a mask that varies over the batch, a mask computed at run time, a Softmax over
// another axis.
#include "pass_test_util.h"
#include "passes/passes.h"
#include "passes/window_attention.h"

namespace gpuopt {
namespace {

using testing::count;
using testing::finish;
using testing::max_rel_err;
using testing::run_cpu;
using testing::uniform;

constexpr int64_t kB = 2, kW = 4, kH = 2, kN = 9, kD = 4;  // 4 windows of 3x3 tokens

enum class Variant { kSwin, kMaskOverBatch, kRuntimeMask, kSoftmaxAxis2, kNoScaleNoTranspose };

struct Built {
  Graph g;
  std::vector<Tensor> inputs;
};

ValueId i64s(Graph& g, const std::string& name, std::vector<int64_t> v) {
  const int64_t n = static_cast<int64_t>(v.size());
  return g.add_constant(name, Tensor::from_vector<int64_t>(DType::I64, {n}, std::move(v)));
}

// Odd windows straddle the shift: tokens on different sides of row 1 of the 3x3 window get -100.
Tensor shift_mask(int64_t lead) {
  Tensor m = Tensor::empty(DType::F32, {lead, kW, 1, kN, kN});
  int64_t o = 0;
  for (int64_t b = 0; b < lead; ++b)
    for (int64_t w = 0; w < kW; ++w)
      for (int64_t i = 0; i < kN; ++i)
        for (int64_t j = 0; j < kN; ++j) m.set_f64(o++, (w + b) % 2 == 1 && (i / 3 < 1) != (j / 3 < 1) ? -100.0 : 0.0);
  return m;
}

Built swin_block(Variant v) {
  Built b;
  Graph& g = b.g;
  g.opset = 17;
  std::mt19937 rng(21);
  const Shape qs{kB * kW, kH, kN, kD};
  ValueId q = g.add_input("q", DType::F32, qs), k = g.add_input("k", DType::F32, qs), vv = g.add_input("v", DType::F32, qs);
  for (int i = 0; i < 3; ++i) b.inputs.push_back(uniform(qs, rng, -2, 2));
  ValueId kt;
  if (v == Variant::kNoScaleNoTranspose) {
    ValueId kt_in = g.add_input("kt", DType::F32, {kB * kW, kH, kD, kN});
    b.inputs.push_back(uniform({kB * kW, kH, kD, kN}, rng, -2, 2));
    kt = kt_in;
  } else {
    q = g.add_node(Op::Mul, "q_scale", {q, g.add_constant("scale", Tensor::from_vector<float>(DType::F32, {}, {0.5f}))}, 1)[0];
    kt = g.add_node(Op::Transpose, "k_t", {k}, 1, {{"perm", ints_attr({0, 1, 3, 2})}})[0];
  }
  ValueId s = g.add_node(Op::MatMul, "scores", {q, kt}, 1)[0];
  ValueId bias = g.add_constant("bias", uniform({1, kH, kN, kN}, rng, -3, 3));
  s = g.add_node(Op::Add, "add_bias", {s, bias}, 1)[0];
  s = g.add_node(Op::Reshape, "by_window", {s, i64s(g, "shape5", {-1, kW, kH, kN, kN})}, 1)[0];
  ValueId mask;
  if (v == Variant::kRuntimeMask) {
    mask = g.add_input("mask", DType::F32, {1, kW, 1, kN, kN});
    b.inputs.push_back(shift_mask(1));
  } else {
    mask = g.add_constant("mask", shift_mask(v == Variant::kMaskOverBatch ? kB : 1));
  }
  s = g.add_node(Op::Add, "add_mask", {mask, s}, 1)[0];  // the mask first: either side matches
  s = g.add_node(Op::Reshape, "by_batch", {s, i64s(g, "shape4", {-1, kH, kN, kN})}, 1)[0];
  ValueId p = g.add_node(Op::Softmax, "softmax", {s}, 1, {{"axis", int_attr(v == Variant::kSoftmaxAxis2 ? 2 : -1)}})[0];
  if (v == Variant::kNoScaleNoTranspose) vv = k;
  ValueId y = g.add_node(Op::MatMul, "context", {p, vv}, 1, {}, {"y"})[0];
  g.mark_output(y);
  finish(g);
  return b;
}

TEST(WindowAttention, ShiftedWindowsBecomeOneAttentionAndMatchTheUnfusedGraph) {
  for (Variant v : {Variant::kSwin, Variant::kNoScaleNoTranspose}) {
    const Built ref = swin_block(v);
    Graph g = ref.g;
    auto st = unfold_window_attention(&g);
    ASSERT_TRUE(st.ok()) << st.status().to_string();
    EXPECT_EQ(st->rewritten, 1);
    finish(g);
    // The unfolded form on its own, then fused.
    EXPECT_LT(max_rel_err(run_cpu(g, ref.inputs), run_cpu(ref.g, ref.inputs)), 1e-5);
    auto fused = fuse_attention(&g);
    ASSERT_TRUE(fused.ok()) << fused.status().to_string();
    finish(g);
    EXPECT_EQ(count(g, "Attention"), 1) << static_cast<int>(v);
    EXPECT_EQ(count(g, "Softmax"), 0);
    EXPECT_EQ(count(g, "MatMul"), 0);
    if (v == Variant::kSwin) {
      EXPECT_EQ(count(g, "Mul"), 0);        // the scale went into the Attention
      EXPECT_EQ(count(g, "Transpose"), 0);  // K^T read back as K
    }
    EXPECT_EQ(g.value(g.outputs()[0]).name, "y");
    for (const Node& n : g.nodes())
      if (n.op_type == "Attention") {
        const ValueInfo& mask = g.value(n.inputs[3]).info;
        EXPECT_EQ(mask.shape, (Shape{1, kW * kH, kN, kN}));
        EXPECT_TRUE(g.value(n.inputs[3]).constant.has_value());
      }
    EXPECT_LT(max_rel_err(run_cpu(g, ref.inputs), run_cpu(ref.g, ref.inputs)), 1e-5) << static_cast<int>(v);
  }
}

TEST(WindowAttention, LookAlikesStay) {
  for (Variant v : {Variant::kMaskOverBatch, Variant::kRuntimeMask, Variant::kSoftmaxAxis2}) {
    const Built ref = swin_block(v);
    Graph g = ref.g;
    auto st = fuse_attention(&g);
    ASSERT_TRUE(st.ok()) << st.status().to_string();
    finish(g);
    EXPECT_EQ(count(g, "Attention"), 0) << static_cast<int>(v);
    EXPECT_EQ(count(g, "Softmax"), 1);
    EXPECT_EQ(count(g, "Reshape"), 2);
    EXPECT_EQ(max_rel_err(run_cpu(g, ref.inputs), run_cpu(ref.g, ref.inputs)), 0.0);
  }
}

// torchvision's block from the packed projection: x [BW, N, 3*H*d] -> Reshape [BW, N, 3, H, d] ->
// Transpose [2,0,3,1,4] -> q, k, v = Gather 0, 1, 2 -> attention (shifted or not) -> Transpose
// [0,2,1,3] -> Reshape [BW, N, H*d]. `order` is which part each of q, k, v selects.
Built packed_block(bool shifted, std::vector<int64_t> order = {0, 1, 2}) {
  Built b;
  Graph& g = b.g;
  g.opset = 17;
  std::mt19937 rng(23);
  ValueId x = g.add_input("x", DType::F32, {kB * kW, kN, 3 * kH * kD});
  b.inputs.push_back(uniform({kB * kW, kN, 3 * kH * kD}, rng, -2, 2));
  ValueId r = g.add_node(Op::Reshape, "split", {x, i64s(g, "split_shape", {kB * kW, kN, 3, kH, kD})}, 1)[0];
  ValueId t = g.add_node(Op::Transpose, "parts", {r}, 1, {{"perm", ints_attr({2, 0, 3, 1, 4})}})[0];
  ValueId part[3];
  for (int i = 0; i < 3; ++i)
    part[i] = g.add_node(Op::Gather, "select" + std::to_string(i),
                         {t, g.add_constant("idx" + std::to_string(i), Tensor::from_vector<int64_t>(DType::I64, {}, {order[static_cast<size_t>(i)]}))},
                         1, {{"axis", int_attr(0)}})[0];
  ValueId q = g.add_node(Op::Mul, "q_scale", {part[0], g.add_constant("scale", Tensor::from_vector<float>(DType::F32, {}, {0.5f}))}, 1)[0];
  ValueId kt = g.add_node(Op::Transpose, "k_t", {part[1]}, 1, {{"perm", ints_attr({0, 1, 3, 2})}})[0];
  ValueId s = g.add_node(Op::MatMul, "scores", {q, kt}, 1)[0];
  s = g.add_node(Op::Add, "add_bias", {s, g.add_constant("bias", uniform({1, kH, kN, kN}, rng, -3, 3))}, 1)[0];
  if (shifted) {
    s = g.add_node(Op::Reshape, "by_window", {s, i64s(g, "shape5", {-1, kW, kH, kN, kN})}, 1)[0];
    s = g.add_node(Op::Add, "add_mask", {s, g.add_constant("mask", shift_mask(1))}, 1)[0];
    s = g.add_node(Op::Reshape, "by_batch", {s, i64s(g, "shape4", {-1, kH, kN, kN})}, 1)[0];
  }
  ValueId p = g.add_node(Op::Softmax, "softmax", {s}, 1, {{"axis", int_attr(-1)}})[0];
  ValueId c = g.add_node(Op::MatMul, "context", {p, part[2]}, 1)[0];
  c = g.add_node(Op::Transpose, "merge", {c}, 1, {{"perm", ints_attr({0, 2, 1, 3})}})[0];
  ValueId y = g.add_node(Op::Reshape, "merged", {c, i64s(g, "merged_shape", {kB * kW, kN, kH * kD})}, 1, {}, {"y"})[0];
  g.mark_output(y);
  finish(g);
  return b;
}

TEST(WindowAttention, UnshiftedBlocksReadThePackedProjectionInPlace) {
  const Built ref = packed_block(false);
  Graph g = ref.g;
  ASSERT_TRUE(fuse_attention(&g).ok());
  finish(g);
  EXPECT_EQ(count(g, "Attention"), 1);
  EXPECT_EQ(count(g, "Gather"), 0);
  EXPECT_EQ(count(g, "Transpose"), 0);
  for (const Node& n : g.nodes())
    if (n.op_type == "Attention") {
      EXPECT_EQ(n.attr_i("qkv_packed", 0), 1);
      EXPECT_EQ(n.attr_i("q_num_heads", 0), kH);
    }
  EXPECT_EQ(g.value(g.outputs()[0]).name, "y");
  EXPECT_LT(max_rel_err(run_cpu(g, ref.inputs), run_cpu(ref.g, ref.inputs)), 1e-5);
}

TEST(WindowAttention, ShiftedBlocksFromThePackedProjectionFuseToo) {
  const Built ref = packed_block(true);
  Graph g = ref.g;
  ASSERT_TRUE(fuse_attention(&g).ok());
  finish(g);
  EXPECT_EQ(count(g, "Attention"), 1);
  EXPECT_EQ(count(g, "Softmax"), 0);
  EXPECT_LT(max_rel_err(run_cpu(g, ref.inputs), run_cpu(ref.g, ref.inputs)), 1e-5);
}

TEST(WindowAttention, PartsInAnotherOrderAreNotReadAsPacked) {
  const Built ref = packed_block(false, {1, 0, 2});  // q is the projection's second part
  Graph g = ref.g;
  ASSERT_TRUE(fuse_attention(&g).ok());
  finish(g);
  EXPECT_EQ(count(g, "Attention"), 1);
  EXPECT_EQ(count(g, "Gather"), 3);
  for (const Node& n : g.nodes()) {
    if (n.op_type == "Attention") {
      EXPECT_EQ(n.attr_i("qkv_packed", 0), 0);
    }
  }
  EXPECT_LT(max_rel_err(run_cpu(g, ref.inputs), run_cpu(ref.g, ref.inputs)), 1e-5);
}

}  // namespace
}  // namespace gpuopt
