// Attention written node by node becomes one ONNX Attention node, checked on the CPU reference
// (the unfused graph's MatMul/Softmax/... kernels are the oracle): torch's SDPA export (scale on
// Q and K^T, additive mask, NaN guard; rows whose every key is masked give 0), the GPT-2 form
// (scores Div, causal Where, mask Add), torch MultiheadAttention's 3-D form, and no scale at all.
// Chains whose softmax is not over the keys, or whose scores something else reads, stay.
#include "pass_test_util.h"
#include "passes/match.h"
#include "passes/passes.h"

#include <limits>

namespace gpuopt {
namespace {

using testing::count;
using testing::finish;
using testing::max_rel_err;
using testing::run_cpu;
using testing::uniform;

constexpr int64_t kB = 2, kH = 3, kS = 9, kD = 8;

ValueId scalar(Graph& g, const std::string& name, float v) {
  return g.add_constant(name, Tensor::from_vector<float>(DType::F32, {}, {v}));
}
ValueId i64s(Graph& g, const std::string& name, std::vector<int64_t> v) {
  const int64_t n = static_cast<int64_t>(v.size());
  return g.add_constant(name, Tensor::from_vector<int64_t>(DType::I64, {n}, std::move(v)));
}
Attribute perm(std::vector<int64_t> p) { return ints_attr(std::move(p)); }

enum class Form { kSdpa, kGpt2, kMha3d, kNoScale };

struct Built {
  Graph g;
  std::vector<Tensor> inputs;
};

// q, k, v inputs [B, S, H*D] split into heads as BERT does (Reshape, Transpose); `leak` marks the
// scores a graph output; `axis` is the Softmax axis.
Built attention_graph(Form form, bool leak = false, int64_t axis = -1) {
  Built b;
  Graph& g = b.g;
  g.opset = 17;
  std::mt19937 rng(11);
  ValueId xq = g.add_input("q", DType::F32, {kB, kS, kH * kD});
  ValueId xk = g.add_input("k", DType::F32, {kB, kS, kH * kD});
  ValueId xv = g.add_input("v", DType::F32, {kB, kS, kH * kD});
  for (int i = 0; i < 3; ++i) b.inputs.push_back(uniform({kB, kS, kH * kD}, rng, -2, 2));
  ValueId heads = i64s(g, "heads", {kB, kS, kH, kD});
  auto split = [&](ValueId x, const std::string& n, std::vector<int64_t> p) {
    ValueId r = g.add_node(Op::Reshape, n + "/reshape", {x, heads}, 1)[0];
    return g.add_node(Op::Transpose, n + "/transpose", {r}, 1, {{"perm", perm(std::move(p))}})[0];
  };
  ValueId q = split(xq, "q", {0, 2, 1, 3}), v = split(xv, "v", {0, 2, 1, 3});
  ValueId kt = split(xk, "k", {0, 2, 3, 1});
  if (form == Form::kMha3d) {  // [B*H, S, D] as torch's MultiheadAttention
    ValueId flat = i64s(g, "flat", {kB * kH, kS, kD}), flat_t = i64s(g, "flat_t", {kB * kH, kD, kS});
    q = g.add_node(Op::Reshape, "q3", {q, flat}, 1)[0];
    v = g.add_node(Op::Reshape, "v3", {v, flat}, 1)[0];
    kt = g.add_node(Op::Reshape, "kt3", {kt, flat_t}, 1)[0];
    q = g.add_node(Op::Mul, "qs", {q, scalar(g, "c", 0.35f)}, 1)[0];
  }
  if (form == Form::kSdpa) {
    q = g.add_node(Op::Mul, "qs", {q, scalar(g, "cq", 0.59f)}, 1)[0];
    kt = g.add_node(Op::Mul, "ks", {kt, scalar(g, "ck", 0.59f)}, 1)[0];
  }
  ValueId s = g.add_node(Op::MatMul, "scores", {q, kt}, 1)[0];
  ValueId scores = s;
  if (form == Form::kGpt2) {
    s = g.add_node(Op::Div, "div", {s, scalar(g, "sqrt_d", 2.83f)}, 1)[0];
    Tensor tri = Tensor::empty(DType::Bool, {kS, kS});
    for (int64_t i = 0; i < kS; ++i)
      for (int64_t j = 0; j < kS; ++j) tri.set_f64(i * kS + j, j <= i);
    ValueId cond = g.add_constant("causal", tri);
    s = g.add_node(Op::Where, "causal_where", {cond, s, scalar(g, "fill", std::numeric_limits<float>::lowest())}, 1)[0];
  }
  if (form == Form::kSdpa || form == Form::kGpt2) {
    // Additive [B,1,1,S] mask: batch 1 masks its last 3 keys; in the SDPA form batch 0 masks all.
    ValueId m = g.add_input("mask", DType::F32, {kB, 1, 1, kS});
    Tensor mask = Tensor::empty(DType::F32, {kB, 1, 1, kS});
    for (int64_t j = 0; j < kS; ++j) {
      mask.set_f64(j, form == Form::kSdpa ? -std::numeric_limits<double>::infinity() : 0.0);
      mask.set_f64(kS + j, j >= kS - 3 ? -std::numeric_limits<double>::infinity() : 0.0);
    }
    b.inputs.push_back(mask);
    s = g.add_node(Op::Add, "mask_add", {s, m}, 1)[0];
  }
  ValueId p = g.add_node(Op::Softmax, "softmax", {s}, 1, {{"axis", int_attr(axis)}})[0];
  if (form == Form::kSdpa) {
    ValueId nan = g.add_node(Op::IsNaN, "isnan", {p}, 1)[0];
    p = g.add_node(Op::Where, "guard", {nan, scalar(g, "zero", 0.f), p}, 1)[0];
  }
  ValueId y;
  if (form == Form::kSdpa || form == Form::kGpt2) {  // heads merged back: [B, S, H*D]
    ValueId c = g.add_node(Op::MatMul, "context", {p, v}, 1)[0];
    ValueId t = g.add_node(Op::Transpose, "merge/transpose", {c}, 1, {{"perm", perm({0, 2, 1, 3})}})[0];
    y = g.add_node(Op::Reshape, "merge/reshape", {t, i64s(g, "merged", {kB, kS, kH * kD})}, 1, {}, {"y"})[0];
  } else {
    y = g.add_node(Op::MatMul, "context", {p, v}, 1, {}, {"y"})[0];
  }
  g.mark_output(y);
  if (leak) g.mark_output(scores);
  finish(g);
  return b;
}

TEST(FuseAttention, EachExporterFormBecomesOneAttentionAndMatchesTheUnfusedGraph) {
  for (Form form : {Form::kSdpa, Form::kGpt2, Form::kMha3d, Form::kNoScale}) {
    const Built ref = attention_graph(form);
    Graph fused = ref.g;
    auto st = fuse_attention(&fused);
    ASSERT_TRUE(st.ok()) << st.status().to_string();
    finish(fused);
    EXPECT_EQ(count(fused, "Attention"), 1) << static_cast<int>(form);
    EXPECT_EQ(count(fused, "Softmax"), 0);
    EXPECT_EQ(count(fused, "MatMul"), 0);
    EXPECT_EQ(fused.value(fused.outputs()[0]).name, "y");
    if (form == Form::kSdpa || form == Form::kGpt2) {  // head splits read in place: 3-D form, no Transposes
      EXPECT_EQ(count(fused, "Transpose"), 0) << static_cast<int>(form);
      EXPECT_EQ(count(fused, "Reshape"), 0) << static_cast<int>(form);
    }
    const auto want = run_cpu(ref.g, ref.inputs), got = run_cpu(fused, ref.inputs);
    EXPECT_LE(max_rel_err(got, want), 1e-5) << static_cast<int>(form);
    if (form == Form::kSdpa) {  // batch 0: every key masked, the guard's zeros
      ASSERT_FALSE(got.empty());
      EXPECT_EQ(got[0].get_f64(0), 0.0);
      EXPECT_EQ(count(fused, "IsNaN"), 0);  // the guard is the fused node's nan_to_zero
      EXPECT_EQ(count(fused, "Where"), 0);
      for (const Node& n : fused.nodes())
        if (n.op_type == "Attention") { EXPECT_EQ(n.attr_i("nan_to_zero", 0), 1); }
    }
  }
}

TEST(FuseAttention, LeavesScoresOthersReadAndSoftmaxOverAnotherAxis) {
  for (Built b : {attention_graph(Form::kSdpa, /*leak=*/true), attention_graph(Form::kGpt2, false, /*axis=*/2)}) {
    auto st = fuse_attention(&b.g);
    ASSERT_TRUE(st.ok());
    EXPECT_EQ(st->removed, 0);
    EXPECT_EQ(count(b.g, "Attention"), 0);
    EXPECT_EQ(count(b.g, "Softmax"), 1);
  }
}


// The legacy exporter's BERT: batch and sequence symbolic, each Reshape target computed at run
// time from Shape. Older transformers write the splits as Concat(Shape(x)[0:2], [H, D]), newer
// ones view(*input_shape, -1, D), i.e. Concat(Shape(x)[0:2], [-1, D]); the merge is
// Concat(Unsqueeze(Shape(x)[0]), Unsqueeze(Shape(x)[1]), [H*D] or [-1]). Shape inference carries
// the computed targets' dims (ValueInfo::dims_value), so the head splits are recognised and go.
TEST(FuseAttention, HeadSplitsWithTargetsComputedFromShapesBecomeTheThreeDForm) {
 for (const bool infer : {false, true}) {
  SCOPED_TRACE(infer ? "targets with -1" : "targets with H and D");
  Graph g;
  g.opset = 17;
  const int64_t batch = g.symbol_dim("batch"), seq = g.symbol_dim("sequence");
  std::mt19937 rng(5);
  std::vector<Tensor> inputs;
  ValueId x[3];
  for (int i = 0; i < 3; ++i) {
    x[i] = g.add_input(std::string("qkv").substr(static_cast<size_t>(i), 1), DType::F32, {batch, seq, kH * kD});
    inputs.push_back(uniform({kB, kS, kH * kD}, rng, -2, 2));
  }
  auto shape_dim = [&](ValueId v, int64_t i, const std::string& n) {  // Unsqueeze(Gather(Shape(v), i))
    ValueId s = g.add_node(Op::Shape, n + "/shape", {v}, 1)[0];
    ValueId d = g.add_node(Op::Gather, n + "/gather", {s, g.add_constant(n + "/i", Tensor::scalar_i64(i))}, 1)[0];
    return g.add_node(Op::Unsqueeze, n + "/unsqueeze", {d, i64s(g, n + "/axes", {0})}, 1)[0];
  };
  auto split = [&](ValueId v, const std::string& n, std::vector<int64_t> p) {
    ValueId s = g.add_node(Op::Shape, n + "/shape", {v}, 1)[0];
    ValueId bs = g.add_node(Op::Slice, n + "/slice", {s, i64s(g, n + "/s0", {0}), i64s(g, n + "/s1", {2})}, 1)[0];
    ValueId hd = i64s(g, n + "/hd", {infer ? -1 : kH, kD});
    ValueId target = g.add_node(Op::Concat, n + "/target", {bs, hd}, 1, {{"axis", int_attr(0)}})[0];
    ValueId r = g.add_node(Op::Reshape, n + "/reshape", {v, target}, 1)[0];
    return g.add_node(Op::Transpose, n + "/transpose", {r}, 1, {{"perm", perm(std::move(p))}})[0];
  };
  ValueId q = split(x[0], "q", {0, 2, 1, 3}), kt = split(x[1], "k", {0, 2, 3, 1}), v = split(x[2], "v", {0, 2, 1, 3});
  ValueId s = g.add_node(Op::MatMul, "scores", {q, kt}, 1)[0];
  s = g.add_node(Op::Div, "div", {s, scalar(g, "sqrt_d", 2.83f)}, 1)[0];
  ValueId p = g.add_node(Op::Softmax, "softmax", {s}, 1, {{"axis", int_attr(-1)}})[0];
  ValueId c = g.add_node(Op::MatMul, "context", {p, v}, 1)[0];
  ValueId t = g.add_node(Op::Transpose, "merge/transpose", {c}, 1, {{"perm", perm({0, 2, 1, 3})}})[0];
  ValueId merged = g.add_node(Op::Concat, "merge/target",
                              {shape_dim(x[0], 0, "mb"), shape_dim(x[0], 1, "ms"), i64s(g, "hd", {infer ? -1 : kH * kD})}, 1,
                              {{"axis", int_attr(0)}})[0];
  ValueId y = g.add_node(Op::Reshape, "merge/reshape", {t, merged}, 1, {}, {"y"})[0];
  g.mark_output(y);
  finish(g);
  // What shape inference now knows: the split [batch, sequence, H, D], the merge [batch, sequence, H*D].
  for (const Node& n : g.nodes())
    if (n.name == "q/reshape") {
      EXPECT_EQ(g.value(n.outputs[0]).info.shape, (Shape{batch, seq, kH, kD}));
    }
  EXPECT_EQ(g.value(y).info.shape, (Shape{batch, seq, kH * kD}));

  Graph fused = g;
  auto st = fuse_attention(&fused);
  ASSERT_TRUE(st.ok()) << st.status().to_string();
  finish(fused);
  EXPECT_EQ(count(fused, "Attention"), 1);
  EXPECT_EQ(count(fused, "Transpose"), 0);
  EXPECT_EQ(count(fused, "Reshape"), 0);
  const Node* attn = nullptr;
  for (const Node& n : fused.nodes())
    if (n.op_type == "Attention") attn = &n;
  ASSERT_NE(attn, nullptr);
  EXPECT_EQ(attn->attr_i("q_num_heads", 0), kH);
  const auto want = run_cpu(g, inputs), got = run_cpu(fused, inputs);
  EXPECT_LE(max_rel_err(got, want), 1e-5);
 }
}

// A computed target: a -1 is inferred from the other dims (symbols cancel); a part shape inference
// does not know (here a Shape of an input with an unknown dim) leaves the dims unknown, and a
// constant below -1 is not taken for a symbol.
TEST(FuseAttention, ComputedTargetsInferMinusOneAndGuessNothing) {
  Graph g;
  g.opset = 17;
  const int64_t batch = g.symbol_dim("batch");
  ValueId xv = g.add_input("x", DType::F32, {batch, kS, kH * kD});
  ValueId s = g.add_node(Op::Shape, "shape", {xv}, 1)[0];
  ValueId b = g.add_node(Op::Slice, "slice", {s, i64s(g, "s0", {0}), i64s(g, "s1", {1})}, 1)[0];
  ValueId t = g.add_node(Op::Concat, "target", {b, i64s(g, "rest", {-1, kD})}, 1, {{"axis", int_attr(0)}})[0];
  ValueId r = g.add_node(Op::Reshape, "reshape", {xv, t}, 1, {}, {"y"})[0];
  ValueId t2 = g.add_node(Op::Concat, "bad_target", {b, i64s(g, "bad", {-3, kD})}, 1, {{"axis", int_attr(0)}})[0];
  g.mark_output(r);
  g.mark_output(t2);
  finish(g);
  EXPECT_EQ(g.value(t).info.dims_value, (std::vector<int64_t>{batch, -1, kD}));
  EXPECT_EQ(g.value(r).info.shape, (Shape{batch, kS * kH, kD}));
  EXPECT_FALSE(g.value(t2).info.dims_value.has_value());
  // And a Shape of a partly unknown input has no shape value.
  Graph h;
  h.opset = 17;
  ValueId hx = h.add_input("x", DType::F32, {kUnknownDim, 4});
  ValueId hs = h.add_node(Op::Shape, "shape", {hx}, 1, {}, {"s"})[0];
  h.mark_output(hs);
  finish(h);
  EXPECT_FALSE(h.value(hs).info.dims_value.has_value());
}

}  // namespace
}  // namespace gpuopt
