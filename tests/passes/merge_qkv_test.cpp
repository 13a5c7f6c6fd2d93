// merge_qkv: an attention's Q, K and V projections of one input become one GEMM and the
// Attention node's qkv_packed form, checked on the CPU reference against the unfused graph (the
// exporter's MatMul/Softmax/... chain) and against the Attention node over three separate
// tensors; projections of different inputs, a projection something else reads, and grouped KV
// heads stay as they are. expand_attention_masks: a [B, 1, 1, S] mask two attentions read is
// expanded once for both.
#include "pass_test_util.h"
#include "passes/merge_qkv.h"
#include "passes/passes.h"

#include <limits>

namespace gpuopt {
namespace {

using testing::count;
using testing::finish;
using testing::max_rel_err;
using testing::run_cpu;
using testing::uniform;

constexpr int64_t kB = 2, kH = 3, kS = 7, kD = 8, kE = kH * kD;

ValueId scalar(Graph& g, const std::string& name, float v) {
  return g.add_constant(name, Tensor::from_vector<float>(DType::F32, {}, {v}));
}
ValueId i64s(Graph& g, const std::string& name, std::vector<int64_t> v) {
  const int64_t n = static_cast<int64_t>(v.size());
  return g.add_constant(name, Tensor::from_vector<int64_t>(DType::I64, {n}, std::move(v)));
}

struct Built {
  Graph g;
  std::vector<Tensor> inputs;
};

struct Opts {
  bool k_bias = true;        // false: K's projection is a MatMul alone
  bool k_other_input = false;  // K projects a second input
  bool q_also_output = false;  // Q's projection is a graph output too
};

// Torch's SDPA export of one self-attention layer over x [B, S, E]: three Linears (MatMul + Add),
// head splits, scales on Q and K^T, an additive [B, 1, 1, S] mask (batch 0: every key masked),
// Softmax, the NaN guard, P V, heads merged back.
Built layer(const Opts& o) {
  Built b;
  Graph& g = b.g;
  g.opset = 17;
  std::mt19937 rng(5);
  const ValueId x = g.add_input("x", DType::F32, {kB, kS, kE});
  b.inputs.push_back(uniform({kB, kS, kE}, rng, -2, 2));
  ValueId x2 = x;
  if (o.k_other_input) {
    x2 = g.add_input("x2", DType::F32, {kB, kS, kE});
    b.inputs.push_back(uniform({kB, kS, kE}, rng, -2, 2));
  }
  const ValueId mask = g.add_input("mask", DType::F32, {kB, 1, 1, kS});
  Tensor m = Tensor::empty(DType::F32, {kB, 1, 1, kS});
  for (int64_t j = 0; j < kS; ++j) {
    m.set_f64(j, -std::numeric_limits<double>::infinity());
    m.set_f64(kS + j, j >= kS - 2 ? -std::numeric_limits<double>::infinity() : 0.0);
  }
  b.inputs.push_back(m);
  auto proj = [&](const std::string& n, ValueId in, bool bias) {
    ValueId y = g.add_node(Op::MatMul, n + "/matmul", {in, g.add_constant(n + "/w", uniform({kE, kE}, rng))}, 1)[0];
    if (bias) y = g.add_node(Op::Add, n + "/add", {y, g.add_constant(n + "/b", uniform({kE}, rng))}, 1)[0];
    return y;
  };
  const ValueId q3 = proj("q", x, true), k3 = proj("k", x2, o.k_bias), v3 = proj("v", x, true);
  if (o.q_also_output) g.mark_output(q3);
  const ValueId heads = i64s(g, "heads", {kB, kS, kH, kD});
  auto split = [&](ValueId v, const std::string& n, std::vector<int64_t> p) {
    ValueId r = g.add_node(Op::Reshape, n + "/reshape", {v, heads}, 1)[0];
    return g.add_node(Op::Transpose, n + "/transpose", {r}, 1, {{"perm", ints_attr(std::move(p))}})[0];
  };
  ValueId q = split(q3, "q", {0, 2, 1, 3}), kt = split(k3, "k", {0, 2, 3, 1}), v = split(v3, "v", {0, 2, 1, 3});
  q = g.add_node(Op::Mul, "qs", {q, scalar(g, "cq", 0.59f)}, 1)[0];
  kt = g.add_node(Op::Mul, "ks", {kt, scalar(g, "ck", 0.59f)}, 1)[0];
  ValueId s = g.add_node(Op::MatMul, "scores", {q, kt}, 1)[0];
  s = g.add_node(Op::Add, "mask_add", {s, mask}, 1)[0];
  ValueId p = g.add_node(Op::Softmax, "softmax", {s}, 1, {{"axis", int_attr(-1)}})[0];
  const ValueId nan = g.add_node(Op::IsNaN, "isnan", {p}, 1)[0];
  p = g.add_node(Op::Where, "guard", {nan, scalar(g, "zero", 0.f), p}, 1)[0];
  const ValueId c = g.add_node(Op::MatMul, "context", {p, v}, 1)[0];
  const ValueId t = g.add_node(Op::Transpose, "merge/transpose", {c}, 1, {{"perm", ints_attr({0, 2, 1, 3})}})[0];
  const ValueId y = g.add_node(Op::Reshape, "merge/reshape", {t, i64s(g, "merged", {kB, kS, kE})}, 1, {}, {"y"})[0];
  g.mark_output(y);
  finish(g);
  return b;
}

const Node* attention(const Graph& g) {
  for (const Node& n : g.nodes())
    if (n.op_type == "Attention") return &n;
  return nullptr;
}

Graph optimized(const Graph& ref, const char* off) {
  Graph g = ref;
  const Status st = run_default_passes(&g, FusionSwitches::parse(off));
  EXPECT_TRUE(st.ok()) << st.to_string();
  return g;
}

TEST(MergeQkv, ThreeProjectionsOfOneInputBecomeOneGemmReadInPlace) {
  for (bool k_bias : {true, false}) {
    const Built ref = layer({.k_bias = k_bias});
    const Graph g = optimized(ref.g, "");
    const Node* a = attention(g);
    ASSERT_NE(a, nullptr);
    EXPECT_EQ(a->attr_i("qkv_packed", 0), 1);
    EXPECT_EQ(a->attr_i("nan_to_zero", 0), 1);
    EXPECT_EQ(a->inputs[1], kNoValue);
    EXPECT_EQ(a->inputs[2], kNoValue);
    const ValueInfo& packed = g.value(a->inputs[0]).info;
    ASSERT_TRUE(packed.rank_known);
    EXPECT_EQ(packed.shape, (Shape{kB, kS, 3 * kE}));
    EXPECT_EQ(count(g, "Gemm"), 1);  // the merged projection, its bias in the epilogue
    EXPECT_EQ(count(g, "MatMul"), 0);
    EXPECT_EQ(count(g, "Split"), 0);  // read in place: no copy per part
    EXPECT_EQ(count(g, "Slice"), 0);
    const auto want = run_cpu(ref.g, ref.inputs), got = run_cpu(g, ref.inputs);
    EXPECT_LE(max_rel_err(got, want), 1e-5) << "k_bias " << k_bias;
    ASSERT_FALSE(got.empty());
    EXPECT_EQ(got[0].get_f64(0), 0.0);  // batch 0: every key masked, the guard's zero
    // The switch: the same pipeline without it keeps three projections.
    const Graph off = optimized(ref.g, "merge_qkv");
    ASSERT_NE(attention(off), nullptr);
    EXPECT_EQ(attention(off)->attr_i("qkv_packed", 0), 0);
    EXPECT_EQ(count(off, "Gemm") + count(off, "MatMul"), 3);
    EXPECT_LE(max_rel_err(run_cpu(off, ref.inputs), want), 1e-5);
  }
}

TEST(MergeQkv, LeavesProjectionsOfDifferentInputsAndProjectionsOthersRead) {
  for (const Opts& o : {Opts{.k_other_input = true}, Opts{.q_also_output = true}}) {
    const Built ref = layer(o);
    const Graph g = optimized(ref.g, "");
    const Node* a = attention(g);
    ASSERT_NE(a, nullptr);
    EXPECT_EQ(a->attr_i("qkv_packed", 0), 0) << o.k_other_input;
    EXPECT_EQ(count(g, "Gemm"), 3);
    const auto want = run_cpu(ref.g, ref.inputs), got = run_cpu(g, ref.inputs);
    EXPECT_LE(max_rel_err(got, want), 1e-5);
  }
}

// Attention(3-D) over projections of x with q_heads query heads and kv_heads KV heads (widths
// q_heads * kD and kv_heads * kD), optionally causal.
Built attention_node(int64_t q_heads, int64_t kv_heads, bool causal) {
  Built b;
  Graph& g = b.g;
  g.opset = 23;
  std::mt19937 rng(9);
  const ValueId x = g.add_input("x", DType::F32, {kB, kS, kE});
  b.inputs.push_back(uniform({kB, kS, kE}, rng, -2, 2));
  auto proj = [&](const std::string& n, int64_t width) {
    const ValueId w = g.add_constant(n + "/w", uniform({kE, width}, rng));
    const ValueId y = g.add_node(Op::MatMul, n + "/matmul", {x, w}, 1)[0];
    return g.add_node(Op::Add, n + "/add", {y, g.add_constant(n + "/b", uniform({width}, rng))}, 1)[0];
  };
  const ValueId q = proj("q", q_heads * kD), k = proj("k", kv_heads * kD), v = proj("v", kv_heads * kD);
  const ValueId y = g.add_node(Op::Attention, "attention", {q, k, v}, 1,
                               {{"q_num_heads", int_attr(q_heads)},
                                {"kv_num_heads", int_attr(kv_heads)},
                                {"is_causal", int_attr(causal ? 1 : 0)}},
                               {"y"})[0];
  g.mark_output(y);
  finish(g);
  return b;
}

TEST(MergeQkv, GroupedKvHeadsStay) {
  const Built ref = attention_node(4, 2, false);
  Graph g = ref.g;
  auto st = merge_qkv(&g);
  ASSERT_TRUE(st.ok()) << st.status().to_string();
  EXPECT_EQ(st->rewritten, 0);
  EXPECT_EQ(attention(g)->attr_i("qkv_packed", 0), 0);
  EXPECT_EQ(count(g, "MatMul"), 3);
}

TEST(MergeQkv, CausalAttentionNodeMergesAndMatches) {
  const Built ref = attention_node(kH, kH, true);
  Graph g = ref.g;
  auto st = merge_qkv(&g);
  ASSERT_TRUE(st.ok()) << st.status().to_string();
  EXPECT_EQ(st->rewritten, 1);
  EXPECT_EQ(count(g, "MatMul"), 1);
  EXPECT_EQ(count(g, "Add"), 1);
  EXPECT_EQ(attention(g)->attr_i("is_causal", 0), 1);
  EXPECT_LE(max_rel_err(run_cpu(g, ref.inputs), run_cpu(ref.g, ref.inputs)), 1e-6);
}

// Three Int8Gemms (fold_qdq's form at --precision int8) of one quantized input: Q with a
// per-tensor weight scale and no bias, K and V per-column scales and biases. `k_scale`: K's
// activation scale (equal to the others' merges; different, nothing may merge).
Built int8_attention(float k_scale) {
  Built b;
  Graph& g = b.g;
  g.opset = 23;
  std::mt19937 rng(5);
  const ValueId x = g.add_input("x", DType::F32, {kB, kS, kE});
  b.inputs.push_back(uniform({kB, kS, kE}, rng, -2, 2));
  const ValueId sx = scalar(g, "sx", 0.02f);
  const ValueId xq = g.add_node(Op::QuantizeLinear, "q", {x, sx, g.add_constant("zx", Tensor::zeros(DType::I8, {}))}, 1)[0];
  auto proj = [&](const std::string& n, ValueId a_scale, bool per_column, bool bias) {
    Tensor w = Tensor::empty(DType::I8, {kE, kE});  // [N, K]
    std::uniform_int_distribution<int> u(-127, 127);
    for (int64_t i = 0; i < w.numel(); ++i) w.data<int8_t>()[i] = static_cast<int8_t>(u(rng));
    std::vector<ValueId> in{xq, g.add_constant(n + "/w", std::move(w)), a_scale,
                            g.add_constant(n + "/sw", per_column ? uniform({kE}, rng, 0.001f, 0.01f)
                                                                  : Tensor::from_vector<float>(DType::F32, {}, {0.004f}))};
    if (bias) in.push_back(g.add_constant(n + "/b", uniform({kE}, rng)));
    const ValueId y = g.add_node(Op::Int8Gemm, n + "/int8", in, 1)[0];
    g.nodes().back().op_type = "Int8Gemm";
    g.nodes().back().domain = "ai.gpuopt";
    return y;
  };
  const ValueId q = proj("q", sx, false, false);
  const ValueId k = proj("k", k_scale == 0.02f ? sx : scalar(g, "sk", k_scale), true, true);
  const ValueId v = proj("v", sx, true, true);
  const ValueId y = g.add_node(Op::Attention, "attention", {q, k, v}, 1,
                               {{"q_num_heads", int_attr(kH)}, {"kv_num_heads", int_attr(kH)}}, {"y"})[0];
  g.mark_output(y);
  finish(g);
  return b;
}

TEST(MergeQkv, ThreeInt8GemmsOfOneInputBecomeOneAndMatch) {
  const Built ref = int8_attention(0.02f);
  Graph g = ref.g;
  auto st = merge_qkv(&g);
  ASSERT_TRUE(st.ok()) << st.status().to_string();
  EXPECT_EQ(st->rewritten, 1);
  EXPECT_EQ(count(g, "Int8Gemm"), 1);
  EXPECT_EQ(attention(g)->attr_i("qkv_packed", 0), 1);
  // Each column keeps its own integer sum, scale and bias: the same values.
  EXPECT_LE(max_rel_err(run_cpu(g, ref.inputs), run_cpu(ref.g, ref.inputs)), 1e-6);
}

TEST(MergeQkv, Int8GemmsWithDifferentActivationScalesStay) {
  const Built ref = int8_attention(0.03f);
  Graph g = ref.g;
  auto st = merge_qkv(&g);
  ASSERT_TRUE(st.ok()) << st.status().to_string();
  EXPECT_EQ(st->rewritten, 0);
  EXPECT_EQ(count(g, "Int8Gemm"), 3);
}

// The qkv_packed form itself, grouped KV heads included: Attention over the packed tensor equals
// Attention over its three column ranges given separately.
TEST(AttentionQkvPacked, EqualsTheThreeColumnRangesGivenSeparately) {
  struct Case {
    int64_t hq, hkv;
    bool causal, mask, guard;
  };
  for (const Case& c : {Case{3, 3, false, true, true}, Case{4, 2, true, false, false}, Case{2, 1, false, true, false}}) {
    const int64_t w = (c.hq + 2 * c.hkv) * kD;
    std::mt19937 rng(3);
    const Tensor qkv = uniform({kB, kS, w}, rng, -2, 2);
    Tensor mask = uniform({kB, 1, 1, kS}, rng, -3, 0);
    for (int64_t j = 0; j < kS; ++j) mask.set_f64(j, -std::numeric_limits<double>::infinity());  // batch 0: all masked
    AttributeMap attrs{{"q_num_heads", int_attr(c.hq)}, {"kv_num_heads", int_attr(c.hkv)},
                       {"is_causal", int_attr(c.causal ? 1 : 0)}, {"nan_to_zero", int_attr(c.guard ? 1 : 0)}};
    Graph packed;
    packed.opset = 23;
    const ValueId x = packed.add_input("qkv", DType::F32, {kB, kS, w});
    std::vector<ValueId> ins{x, kNoValue, kNoValue};
    if (c.mask) ins.push_back(packed.add_input("mask", DType::F32, {kB, 1, 1, kS}));
    AttributeMap pa = attrs;
    pa["qkv_packed"] = int_attr(1);
    packed.mark_output(packed.add_node(Op::Attention, "attention", ins, 1, pa, {"y"})[0]);
    finish(packed);
    EXPECT_EQ(packed.value(packed.outputs()[0]).info.shape, (Shape{kB, kS, c.hq * kD}));

    Graph split;  // the same through Split on the last axis
    split.opset = 23;
    const ValueId xs = split.add_input("qkv", DType::F32, {kB, kS, w});
    const auto parts = split.add_node(Op::Split, "split", {xs, i64s(split, "sizes", {c.hq * kD, c.hkv * kD, c.hkv * kD})}, 3,
                                      {{"axis", int_attr(-1)}});
    std::vector<ValueId> sins{parts[0], parts[1], parts[2]};
    if (c.mask) sins.push_back(split.add_input("mask", DType::F32, {kB, 1, 1, kS}));
    split.mark_output(split.add_node(Op::Attention, "attention", sins, 1, attrs, {"y"})[0]);
    finish(split);
    std::vector<Tensor> inputs{qkv};
    if (c.mask) inputs.push_back(mask);
    const auto want = run_cpu(split, inputs), got = run_cpu(packed, inputs);
    EXPECT_LE(max_rel_err(got, want), 1e-7) << c.hq << "/" << c.hkv;
  }
}

TEST(AttentionQkvPacked, RefusesKAndVBesideThePackedInputAndAnIndivisibleWidth) {
  for (bool with_k : {true, false}) {
    Graph g;
    g.opset = 23;
    const ValueId x = g.add_input("qkv", DType::F32, {kB, kS, with_k ? 3 * kE : 3 * kE + 1});
    const ValueId k = with_k ? x : kNoValue;
    g.mark_output(g.add_node(Op::Attention, "att", {x, k, kNoValue}, 1,
                             {{"q_num_heads", int_attr(kH)}, {"kv_num_heads", int_attr(kH)}, {"qkv_packed", int_attr(1)}},
                             {"y"})[0]);
    ASSERT_TRUE(g.topo_sort().ok());
    const Status st = g.infer_shapes();
    ASSERT_FALSE(st.ok());
    EXPECT_NE(st.to_string().find("att"), std::string::npos) << st.to_string();
    EXPECT_NE(st.to_string().find(with_k ? "K and V must be absent" : "not divisible"), std::string::npos)
        << st.to_string();
  }
}

// Two layers of Attention(3-D) reading one additive mask of `mask_shape` (the second layer reads
// the first's output); with `extra_reader`, an Add reads the mask too.
// With `symbolic`, batch and sequence are symbols in the declared shapes (the Expand's target is
// then computed from Q's shape at run time).
Built two_layers(Shape mask_shape, bool extra_reader, bool symbolic = false) {
  Built b;
  Graph& g = b.g;
  g.opset = 23;
  std::mt19937 rng(13);
  const int64_t batch = symbolic ? g.symbol_dim("batch") : kB, seq = symbolic ? g.symbol_dim("seq") : kS;
  const ValueId x = g.add_input("x", DType::F32, {batch, seq, kE});
  Shape declared = mask_shape;
  if (symbolic) declared = {batch, 1, 1, seq};
  const ValueId m = g.add_input("mask", DType::F32, declared);
  b.inputs.push_back(uniform({kB, kS, kE}, rng, -2, 2));
  b.inputs.push_back(uniform(mask_shape, rng, -4, 0));
  const AttributeMap heads{{"q_num_heads", int_attr(kH)}, {"kv_num_heads", int_attr(kH)}};
  const ValueId y1 = g.add_node(Op::Attention, "layer1", {x, x, x, m}, 1, heads)[0];
  ValueId y2 = g.add_node(Op::Attention, "layer2", {y1, y1, x, m}, 1, heads)[0];
  if (extra_reader) y2 = g.add_node(Op::Add, "uses_mask", {y2, g.add_node(Op::ReduceSum, "sum", {m}, 1)[0]}, 1)[0];
  g.mark_output(y2);
  finish(g);
  return b;
}

TEST(ExpandAttentionMasks, OneExpandForEveryAttentionReadingTheMask) {
  for (bool symbolic : {false, true}) {
    const Built ref = two_layers({kB, 1, 1, kS}, false, symbolic);
    Graph g = ref.g;
    auto st = expand_attention_masks(&g);
    ASSERT_TRUE(st.ok()) << st.status().to_string();
    EXPECT_EQ(st->rewritten, 1);
    EXPECT_EQ(count(g, "Expand"), 1);
    EXPECT_EQ(count(g, "Shape"), symbolic ? 1 : 0);
    ValueId wide = kNoValue;
    for (const Node& n : g.nodes())
      if (n.op_type == "Expand") wide = n.outputs[0];
    const Shape want = symbolic ? Shape{g.symbol_dim("batch"), 1, g.symbol_dim("seq"), g.symbol_dim("seq")}
                                : Shape{kB, 1, kS, kS};
    EXPECT_EQ(g.value(wide).info.shape, want) << symbolic;
    for (const Node& n : g.nodes())
      if (n.op_type == "Attention") { EXPECT_EQ(n.inputs[3], wide); }
    EXPECT_LE(max_rel_err(run_cpu(g, ref.inputs), run_cpu(ref.g, ref.inputs)), 1e-7) << symbolic;
  }
}

TEST(ExpandAttentionMasks, LeavesMasksOverQueryRowsAndMasksOthersRead) {
  for (const auto& [shape, extra] : {std::pair<Shape, bool>{{kB, 1, kS, kS}, false}, {{kB, 1, 1, kS}, true}}) {
    Graph g = two_layers(shape, extra).g;
    auto st = expand_attention_masks(&g);
    ASSERT_TRUE(st.ok()) << st.status().to_string();
    EXPECT_EQ(st->rewritten, 0) << extra;
    EXPECT_EQ(count(g, "Expand"), 0);
  }
}

}  // namespace
}  // namespace gpuopt
