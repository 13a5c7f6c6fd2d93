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
      EXPECT_EQ(count(fused, "IsNaN"), 1);
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

}  // namespace
}  // namespace gpuopt
