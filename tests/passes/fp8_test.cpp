// The fp8 rewrite (passes/fp8.h) on a small transformer-like graph after the default passes:
// which GEMMs become Fp8Gemm (and which stay float, with the reason), and the rewritten graph's
// CPU reference against the f32 graph's: e4m3 keeps 3 mantissa bits, so the outputs differ by a
// few percent in relative L2, and not by nothing (the rewrite must change the numerics).
#include "pass_test_util.h"
#include "passes/fp8.h"
#include "passes/passes.h"

#include <map>

namespace gpuopt::testing {
namespace {

double rel_l2(const Tensor& a, const Tensor& b) {
  double num = 0, den = 0;
  for (int64_t i = 0; i < b.numel(); ++i) {
    const double d = a.get_f64(i) - b.get_f64(i);
    num += d * d;
    den += b.get_f64(i) * b.get_f64(i);
  }
  return std::sqrt(num / den);
}

// x [2, 8, 64] -> MatMul W1 [64, 128] + b1 -> Gelu -> MatMul W2 [128, 64] + b2 -> + x -> Relu-FFN
// (MatMul W3 [64, 64] + b3 -> Relu) -> MatMul W4 [64, out_n] -> y. out_n = 24 is no multiple of 16.
Graph block(int64_t out_n, std::mt19937& rng) {
  Graph g;
  g.opset = 17;
  const ValueId x = g.add_input("x", DType::F32, {2, 8, 64});
  auto linear = [&](ValueId in, int64_t k, int64_t n, const std::string& name, bool bias) {
    ValueId y = g.add_node(Op::MatMul, name, {in, g.add_constant(name + ".w", uniform({k, n}, rng, -0.2f, 0.2f))}, 1)[0];
    if (bias) y = g.add_node(Op::Add, name + ".add", {y, g.add_constant(name + ".b", uniform({n}, rng))}, 1)[0];
    return y;
  };
  ValueId h = g.add_node(Op::Gelu, "gelu", {linear(x, 64, 128, "fc1", true)}, 1)[0];
  h = g.add_node(Op::Add, "residual", {linear(h, 128, 64, "fc2", true), x}, 1)[0];
  h = g.add_node(Op::Relu, "relu", {linear(h, 64, 64, "fc3", true)}, 1)[0];
  g.mark_output(linear(h, 64, out_n, "head", false));
  return g;
}

// Every activation the rewrite asks for, with its max |x| over a run of `g` on `x`.
std::map<std::string, double> calibrate(const Graph& g, const Tensor& x) {
  Graph c = g;
  const auto names = fp8_activation_tensors(c);
  for (const auto& name : names)
    if (auto v = c.find_value(name); v && !c.value(*v).is_graph_output && !c.value(*v).is_graph_input) c.mark_output(*v);
  const auto outs = run_cpu(c, {x});
  std::map<std::string, double> amax;
  for (size_t o = 0; o < c.outputs().size() && o < outs.size(); ++o) {
    double m = 0;
    for (int64_t i = 0; i < outs[o].numel(); ++i) m = std::max(m, std::abs(outs[o].get_f64(i)));
    amax[c.value(c.outputs()[o]).name] = m;
  }
  double m = 0;
  for (int64_t i = 0; i < x.numel(); ++i) m = std::max(m, std::abs(x.get_f64(i)));
  amax["x"] = m;
  return amax;
}

TEST(Fp8Rewrite, TransformerBlock) {
  std::mt19937 rng(7);
  Graph g = block(24, rng);
  finish(g);
  const Tensor x = uniform({2, 8, 64}, rng, -3, 3);
  const auto want = run_cpu(g, {x});
  Graph f = g;
  ASSERT_TRUE(run_default_passes(&f).ok());
  EXPECT_EQ(fp8_activation_tensors(f).size(), 3u);  // fc1, fc2, fc3: the head's N = 24 does not qualify
  auto st = rewrite_fp8(&f, calibrate(f, x));
  ASSERT_TRUE(st.ok()) << st.status().to_string();
  EXPECT_EQ(st->rewritten, 3);
  ASSERT_EQ(st->kept.size(), 1u);
  EXPECT_NE(st->kept[0].find("N = 24 must be multiples of 16"), std::string::npos) << st->kept[0];
  EXPECT_EQ(count(f, "Fp8Gemm"), 3);
  EXPECT_EQ(count(f, "FusedGemm") + count(f, "Gelu") + count(f, "Relu"), 0);  // in the Fp8Gemms' epilogues
  int relu = 0, gelu = 0, bias = 0;
  for (const Node& n : f.nodes())
    if (n.op_type == "Fp8Gemm") {
      relu += n.attr_s("activation", "") == "Relu";
      gelu += n.attr_s("activation", "") == "Gelu" && n.attr_s("approximate", "") == "none";
      bias += n.inputs.size() > 2;
      EXPECT_GT(n.attr_f("a_scale", 0), 0);
    }
  EXPECT_EQ(relu, 1);
  EXPECT_EQ(gelu, 1);
  EXPECT_EQ(bias, 3);
  // fc1 (+ Gelu) feeds fc2 through Reshapes only: it writes fc2's e4m3 input.
  EXPECT_EQ(st->chained, 1);
  int e4m3_out = 0, e4m3_in = 0;
  for (const Node& n : f.nodes())
    if (n.op_type == "Fp8Gemm") {
      e4m3_out += f.value(n.outputs[0]).info.dtype == DType::U8;
      e4m3_in += f.value(n.inputs[0]).info.dtype == DType::U8;
    }
  EXPECT_EQ(e4m3_out, 1);
  EXPECT_EQ(e4m3_in, 1);
  const auto got = run_cpu(f, {x});
  ASSERT_EQ(got.size(), 1u);
  ASSERT_EQ(got[0].shape(), want[0].shape());
  const double err = rel_l2(got[0], want[0]);
  EXPECT_LT(err, 0.05) << "fp8 vs f32 relative L2";
  EXPECT_GT(err, 1e-4) << "the GEMMs must really run in e4m3";
  // Unchained: the same numbers up to x / s against x * (1 / s) at fc2's input.
  Graph u = g;
  ASSERT_TRUE(run_default_passes(&u).ok());
  auto su = rewrite_fp8(&u, calibrate(u, x), /*chain=*/false);
  ASSERT_TRUE(su.ok());
  EXPECT_EQ(su->chained, 0);
  EXPECT_LT(rel_l2(run_cpu(u, {x})[0], got[0]), 1e-4);
  // The session pipeline at fp8 runs it (CPU: the float rest in f32).
  Graph s = f;
  ASSERT_TRUE(run_session_passes(&s, Device::cpu(), "fp8", true).ok());
  EXPECT_EQ(count(s, "Fp8Gemm"), 3);
}

// x -> Q, K, V projections (each with a bias) -> sum: one e4m3 copy of x, made by the first and
// read by the other two; the outputs are those of the unshared rewrite exactly (the same codes).
TEST(Fp8Rewrite, SiblingsShareOneQuantizedInput) {
  std::mt19937 rng(4);
  Graph g;
  g.opset = 17;
  const ValueId x = g.add_input("x", DType::F32, {6, 64});
  std::vector<ValueId> ys;
  for (const char* p : {"q", "k", "v"}) {
    const ValueId y = g.add_node(Op::MatMul, p, {x, g.add_constant(std::string(p) + ".w", uniform({64, 32}, rng))}, 1)[0];
    ys.push_back(g.add_node(Op::Add, std::string(p) + ".b", {y, g.add_constant(std::string(p) + ".bias", uniform({32}, rng))}, 1)[0]);
  }
  g.mark_output(g.add_node(Op::Add, "sum2", {g.add_node(Op::Add, "sum1", {ys[0], ys[1]}, 1)[0], ys[2]}, 1)[0]);
  finish(g);
  ASSERT_TRUE(run_default_passes(&g).ok());
  const Tensor xv = uniform({6, 64}, rng, -2, 2);
  Graph s = g, u = g;
  auto ss = rewrite_fp8(&s, calibrate(s, xv));
  auto su = rewrite_fp8(&u, calibrate(u, xv), /*chain=*/false);
  ASSERT_TRUE(ss.ok() && su.ok());
  EXPECT_EQ(ss->rewritten, 3);
  EXPECT_EQ(ss->shared, 2);
  EXPECT_EQ(su->shared, 0);
  int two_outputs = 0, u8_inputs = 0;
  for (const Node& n : s.nodes())
    if (n.op_type == "Fp8Gemm") {
      two_outputs += n.outputs.size() == 2;
      u8_inputs += s.value(n.inputs[0]).info.dtype == DType::U8;
    }
  EXPECT_EQ(two_outputs, 1);
  EXPECT_EQ(u8_inputs, 2);
  const auto a = run_cpu(s, {xv}), b = run_cpu(u, {xv});
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(max_rel_err(a, b), 0.0);
}

TEST(Fp8Rewrite, UncalibratedAndUnalignedStayFloat) {
  std::mt19937 rng(9);
  Graph g = block(32, rng);
  finish(g);
  ASSERT_TRUE(run_default_passes(&g).ok());
  const auto names = fp8_activation_tensors(g);
  ASSERT_EQ(names.size(), 4u);
  std::map<std::string, double> amax;
  for (size_t i = 1; i < names.size(); ++i) amax[names[i]] = 2.0;  // the first has none
  auto st = rewrite_fp8(&g, amax);
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->rewritten, 3);
  ASSERT_EQ(st->kept.size(), 1u);
  EXPECT_NE(st->kept[0].find("no calibrated amax"), std::string::npos) << st->kept[0];
  EXPECT_EQ(fp8_scale(448.0 * 3), 3.0f);
  EXPECT_EQ(fp8_scale(0), 1.0f);
}

TEST(Fp8Rewrite, PipelineRefusesAGraphWithoutFp8Gemm) {
  std::mt19937 rng(1);
  Graph g = block(32, rng);
  finish(g);
  const Status st = run_session_passes(&g, Device::cpu(), "fp8", true);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("no Fp8Gemm nodes"), std::string::npos) << st.to_string();
}

// x + Relu(x) -> LayerNorm (-> SkipLayerNormalization after the default passes) -> Q, K, V
// projections [+ bias] -> their sum + the LayerNorm's output (the residual). With biases, the
// SkipLayerNormalization writes the three GEMMs' e4m3 input itself (output 4): the same codes as
// the first GEMM's shared copy, so the outputs are those of the rewrite without it exactly.
// Without biases the GEMMs cannot take an e4m3 A and nothing changes.
Graph norm_block(bool bias, std::mt19937& rng) {
  Graph g;
  g.opset = 17;
  const ValueId x = g.add_input("x", DType::F32, {2, 8, 64});
  const ValueId s = g.add_node(Op::Add, "res", {x, g.add_node(Op::Relu, "relu", {x}, 1)[0]}, 1)[0];
  const ValueId h = g.add_node(Op::LayerNormalization, "ln",
                               {s, g.add_constant("gamma", uniform({64}, rng, 0.5f, 1.5f)),
                                g.add_constant("beta", uniform({64}, rng, -0.2f, 0.2f))},
                               1, {{"axis", int_attr(-1)}, {"epsilon", float_attr(1e-5f)}})[0];
  std::vector<ValueId> ys;
  for (const char* p : {"q", "k", "v"}) {
    ValueId y = g.add_node(Op::MatMul, p, {h, g.add_constant(std::string(p) + ".w", uniform({64, 32}, rng, -0.2f, 0.2f))}, 1)[0];
    if (bias) y = g.add_node(Op::Add, std::string(p) + ".b", {y, g.add_constant(std::string(p) + ".bias", uniform({32}, rng))}, 1)[0];
    ys.push_back(y);
  }
  const ValueId sum = g.add_node(Op::Add, "sum2", {g.add_node(Op::Add, "sum1", {ys[0], ys[1]}, 1)[0], ys[2]}, 1)[0];
  g.mark_output(sum);
  g.mark_output(h);
  return g;
}

TEST(Fp8Rewrite, SkipLayerNormWritesTheGemmsE4m3Input) {
  std::mt19937 rng(21);
  Graph g = norm_block(true, rng);
  finish(g);
  const Tensor x = uniform({2, 8, 64}, rng, -2, 2);
  const auto want = run_cpu(g, {x});
  ASSERT_TRUE(run_default_passes(&g).ok());
  // As quant::fp8_on_graph: the MatMul + bias fusions' Reshapes of the one input merged.
  ASSERT_TRUE(eliminate_common_subexpressions(&g).ok() && remove_dead_nodes(&g).ok());
  finish(g);
  ASSERT_EQ(count(g, "SkipLayerNormalization"), 1);
  Graph n = g, plain = g;
  auto sn = rewrite_fp8(&n, calibrate(n, x));
  auto sp = rewrite_fp8(&plain, calibrate(plain, x), /*chain=*/true, /*norm=*/false);
  ASSERT_TRUE(sn.ok() && sp.ok());
  EXPECT_EQ(sn->rewritten, 3);
  EXPECT_EQ(sn->normed, 1);
  EXPECT_EQ(sn->shared, 0);  // each reads the norm's codes
  EXPECT_EQ(sp->normed, 0);
  EXPECT_EQ(sp->shared, 2);
  int u8_inputs = 0;
  for (const Node& node : n.nodes()) {
    if (node.op_type == "Fp8Gemm") u8_inputs += n.value(node.inputs[0]).info.dtype == DType::U8;
    if (node.op_type == "SkipLayerNormalization") {
      ASSERT_EQ(node.outputs.size(), 5u);
      EXPECT_EQ(n.value(node.outputs[4]).info.dtype, DType::U8);
      EXPECT_GT(node.attr_f("fp8_scale", 0), 0);
    }
  }
  EXPECT_EQ(u8_inputs, 3);
  const auto a = run_cpu(n, {x}), b = run_cpu(plain, {x});
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(max_rel_err(a, b), 0.0);
  EXPECT_GT(rel_l2(a[0], want[0]), 1e-4);  // e4m3, not f32
  EXPECT_LT(rel_l2(a[0], want[0]), 0.1);
  // The session pipeline at fp8 on CUDA (run here on the CPU reference): the float rest in fp16,
  // the codes still u8.
  Graph s = n;
  ASSERT_TRUE(run_session_passes(&s, "cuda", "fp8", true).ok());
  for (const Node& node : s.nodes())
    if (node.op_type == "SkipLayerNormalization") {
      ASSERT_EQ(node.outputs.size(), 5u);
      EXPECT_EQ(s.value(node.outputs[0]).info.dtype, DType::F16);
      EXPECT_EQ(s.value(node.outputs[4]).info.dtype, DType::U8);
    }
  const auto h = run_cpu(s, {x});
  ASSERT_EQ(h.size(), 2u);
  EXPECT_LT(rel_l2(h[0], want[0]), 0.1);
}

TEST(Fp8Rewrite, SkipLayerNormLeftAloneForGemmsWithoutBias) {
  std::mt19937 rng(22);
  Graph g = norm_block(false, rng);
  finish(g);
  const Tensor x = uniform({2, 8, 64}, rng, -2, 2);
  ASSERT_TRUE(run_default_passes(&g).ok());
  auto st = rewrite_fp8(&g, calibrate(g, x));
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->rewritten, 3);
  EXPECT_EQ(st->normed, 0);
  for (const Node& node : g.nodes()) {
    if (node.op_type == "SkipLayerNormalization") {
      EXPECT_LE(node.outputs.size(), 4u);
    }
  }
}


// Fp8Gemms that quantize a float A themselves (a quantize pass of their own on the GPU).
int own_quantize(const Graph& g) {
  int n = 0;
  for (const Node& node : g.nodes())
    n += node.op_type == "Fp8Gemm" && g.value(node.inputs[0]).info.dtype != DType::U8;
  return n;
}

// norm_block + an output projection "o" (MatMul W [32, 64] + bias) of the Q/K/V sum: Q, K and V
// read the LayerNorm's e4m3 codes, "o" would quantize its float input itself (BERT's attention
// output projection). With lone_min_n above its N it stays float, and the result is exactly the
// rewrite that had no amax for its input (the same graph by another reason).
TEST(Fp8Rewrite, LoneGemmStaysFloat) {
  std::mt19937 rng(31);
  Graph g = norm_block(true, rng);
  const ValueId sum = g.outputs()[0];
  ValueId o = g.add_node(Op::MatMul, "o", {sum, g.add_constant("o.w", uniform({32, 64}, rng, -0.2f, 0.2f))}, 1)[0];
  o = g.add_node(Op::Add, "o.b", {o, g.add_constant("o.bias", uniform({64}, rng))}, 1)[0];
  g.mark_output(o);
  finish(g);
  const Tensor x = uniform({2, 8, 64}, rng, -2, 2);
  ASSERT_TRUE(run_default_passes(&g).ok());
  ASSERT_TRUE(eliminate_common_subexpressions(&g).ok() && remove_dead_nodes(&g).ok());
  finish(g);
  const auto amax = calibrate(g, x);
  Graph lone = g, all = g, no_amax = g;
  auto sl = rewrite_fp8(&lone, amax, true, true, kFp8LoneMinN);
  auto sa = rewrite_fp8(&all, amax);
  ASSERT_TRUE(sl.ok() && sa.ok());
  EXPECT_EQ(sa->rewritten, 4);
  EXPECT_EQ(own_quantize(all), 1);  // "o"
  EXPECT_EQ(sl->rewritten, 3);
  EXPECT_EQ(sl->normed, 1);
  EXPECT_EQ(own_quantize(lone), 0);
  ASSERT_EQ(sl->kept.size(), 1u);
  EXPECT_NE(sl->kept[0].find("node 'o'"), std::string::npos) << sl->kept[0];
  EXPECT_NE(sl->kept[0].find("quantize pass of its own for N = 64 < 2048"), std::string::npos) << sl->kept[0];
  // The same float "o" through the other door: no amax for its input.
  auto partial = amax;
  std::string o_in;
  for (const Node& node : all.nodes())
    if (node.op_type == "Fp8Gemm" && all.value(node.inputs[0]).info.dtype != DType::U8) o_in = all.value(node.inputs[0]).name;
  ASSERT_EQ(partial.erase(o_in), 1u) << o_in;
  auto sn = rewrite_fp8(&no_amax, partial);
  ASSERT_TRUE(sn.ok());
  EXPECT_EQ(sn->rewritten, 3);
  EXPECT_EQ(max_rel_err(run_cpu(lone, {x}), run_cpu(no_amax, {x})), 0.0);
  // At a threshold of 64 "o" qualifies (N = 64 is not below it).
  Graph at64 = g;
  auto s64 = rewrite_fp8(&at64, amax, true, true, 64);
  ASSERT_TRUE(s64.ok());
  EXPECT_EQ(s64->rewritten, 4);
}

// Without the norm copies Q, K and V share one quantized x: their N add up (3 x 32 = 96) against
// the threshold, all three kept or all three converted.
TEST(Fp8Rewrite, LoneGroupCountsTheSharedReaders) {
  std::mt19937 rng(32);
  Graph g = norm_block(true, rng);
  finish(g);
  const Tensor x = uniform({2, 8, 64}, rng, -2, 2);
  ASSERT_TRUE(run_default_passes(&g).ok());
  ASSERT_TRUE(eliminate_common_subexpressions(&g).ok() && remove_dead_nodes(&g).ok());
  finish(g);
  const auto amax = calibrate(g, x);
  Graph at96 = g, at97 = g;
  auto s96 = rewrite_fp8(&at96, amax, true, /*norm=*/false, 96);
  auto s97 = rewrite_fp8(&at97, amax, true, /*norm=*/false, 97);
  ASSERT_TRUE(s96.ok() && s97.ok());
  EXPECT_EQ(s96->rewritten, 3);
  EXPECT_EQ(s96->shared, 2);
  EXPECT_EQ(s97->rewritten, 0);
  EXPECT_EQ(s97->kept.size(), 3u);
  EXPECT_EQ(count(at97, "Fp8Gemm"), 0);
}

// block(): x -> fc1 (N = 128, + Gelu) writes fc2's e4m3 input (a chain); fc3 and the head are
// lone. At 128 fc1 converts (and fc2 with it); at 129 fc1 stays float, which leaves fc2 lone in
// the next dry round: kept too, rather than converted with a quantize pass of its own.
TEST(Fp8Rewrite, LoneRoundsFollowTheChain) {
  std::mt19937 rng(33);
  Graph g = block(32, rng);
  finish(g);
  const Tensor x = uniform({2, 8, 64}, rng, -3, 3);
  ASSERT_TRUE(run_default_passes(&g).ok());
  const auto amax = calibrate(g, x);
  Graph at128 = g, at129 = g;
  auto a = rewrite_fp8(&at128, amax, true, true, 128);
  auto b = rewrite_fp8(&at129, amax, true, true, 129);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->rewritten, 2);
  EXPECT_EQ(a->chained, 1);
  EXPECT_EQ(own_quantize(at128), 1);  // fc1 quantizes x: it is lone, but N = 128 is not below 128
  EXPECT_EQ(b->rewritten, 0);
  EXPECT_EQ(b->kept.size(), 4u);
  // Every kept GEMM gives the same numbers as the f32 graph's.
  EXPECT_LT(max_rel_err(run_cpu(at129, {x}), run_cpu(g, {x})), 1e-5);
}

}  // namespace
}  // namespace gpuopt::testing
