// fuse_int8_epilogue: an Int8Gemm (from fold_qdq) takes a following Relu/Gelu, residual Add and
// int8 QuantizeLinear into its epilogue. The oracle is the unfused QDQ graph on the CPU reference
// (exact ONNX QDQ semantics): float outputs equal to f32 rounding, int8 outputs within one step
// where the unfused graph's f32 rounding moves v / y_scale across a half (at most 1% of them).
// Negative cases: a step read by anything else, a per-channel or zero-point-shifted quantize, a
// broadcast (non-constant [N]) addend stay outside.
#include "pass_test_util.h"
#include "passes/passes.h"

#include <cstdlib>

namespace gpuopt::testing {
namespace {

struct Spec {
  std::string act;            // "", "Relu", "Gelu", "GeluTanh"
  bool residual = false;      // + r (an input of the output's shape)
  bool quantize = false;      // -> QuantizeLinear(sy) as the output (int8)
  bool broadcast_addend = false;  // + v, an input [N] (not absorbable)
  bool per_channel_q = false;     // the quantize's scale per column (not absorbable)
  bool q_zero_point = false;      // the quantize's zero point 3 (not absorbable)
  bool gemm_read_elsewhere = false;  // the GEMM's output (bias added) is also a graph output
  bool act_read_elsewhere = false;   // the activation's output is also a graph output
};

constexpr int64_t kK = 48, kN = 20;

// x [2, 5, K] -> Q -> DQ -> MatMul(DQ(W [K, N] per column)) -> Add b -> [act] -> [+ r] -> [Q].
Graph build(const Spec& s, std::mt19937& rng) {
  Graph g;
  g.opset = 20;
  const ValueId x = g.add_input("x", DType::F32, {2, 5, kK});
  const ValueId r = s.residual ? g.add_input("r", DType::F32, {2, 5, kN}) : kNoValue;
  const ValueId v = s.broadcast_addend ? g.add_input("v", DType::F32, {kN}) : kNoValue;
  const ValueId sx = g.add_constant("sx", Tensor::scalar_f32(0.02f));
  const ValueId z = g.add_constant("z", Tensor::zeros(DType::I8, {}));
  const ValueId xq = g.add_node(Op::QuantizeLinear, "q", {x, sx, z}, 1)[0];
  const ValueId xd = g.add_node(Op::DequantizeLinear, "dq", {xq, sx, z}, 1)[0];
  Tensor wq = Tensor::empty(DType::I8, {kK, kN});
  std::uniform_int_distribution<int> u(-127, 127);
  for (int64_t i = 0; i < wq.numel(); ++i) wq.data<int8_t>()[i] = static_cast<int8_t>(u(rng));
  AttributeMap ax{{"axis", int_attr(1)}};
  const ValueId wd = g.add_node(Op::DequantizeLinear, "dqw",
                                {g.add_constant("wq", wq), g.add_constant("sw", uniform({kN}, rng, 0.002f, 0.006f)),
                                 g.add_constant("zw", Tensor::zeros(DType::I8, {kN}))},
                                1, ax)[0];
  ValueId y = g.add_node(Op::MatMul, "mm", {xd, wd}, 1)[0];
  y = g.add_node(Op::Add, "bias", {y, g.add_constant("b", uniform({kN}, rng, -0.5f, 0.5f))}, 1)[0];
  if (s.gemm_read_elsewhere) g.mark_output(y);
  if (s.act == "Relu") y = g.add_node(Op::Relu, "relu", {y}, 1)[0];
  if (s.act == "Gelu") y = g.add_node(Op::Gelu, "gelu", {y}, 1)[0];
  if (s.act == "GeluTanh") y = g.add_node(Op::Gelu, "gelu", {y}, 1, {{"approximate", string_attr("tanh")}})[0];
  if (s.act_read_elsewhere) g.mark_output(y);
  if (s.residual) y = g.add_node(Op::Add, "residual", {r, y}, 1)[0];  // the residual first, as exporters write it
  if (s.broadcast_addend) y = g.add_node(Op::Add, "addend", {y, v}, 1)[0];
  if (s.quantize) {
    const ValueId sy = s.per_channel_q ? g.add_constant("sy", uniform({kN}, rng, 0.01f, 0.02f))
                                       : g.add_constant("sy", Tensor::scalar_f32(0.06f));  // v spreads ~3: ~50 steps
    const ValueId zy = s.q_zero_point   ? g.add_constant("zy", Tensor::from_vector<int>(DType::I8, {}, {3}))
                       : s.per_channel_q ? g.add_constant("zy", Tensor::zeros(DType::I8, {kN}))
                                         : z;
    AttributeMap qa;
    if (s.per_channel_q) qa["axis"] = int_attr(-1);
    y = g.add_node(Op::QuantizeLinear, "qy", {y, sy, zy}, 1, qa)[0];
  }
  g.mark_output(y);
  EXPECT_TRUE(g.topo_sort().ok() && g.infer_shapes().ok());
  return g;
}

Graph fused(const Graph& g, int want_rewritten) {
  Graph f = g;
  auto folded = fold_qdq(&f);
  EXPECT_TRUE(folded.ok() && folded->rewritten == 1);
  EXPECT_TRUE(remove_dead_nodes(&f).ok());
  EXPECT_TRUE(f.topo_sort().ok() && f.infer_shapes().ok());
  auto st = fuse_int8_epilogue(&f);
  EXPECT_TRUE(st.ok()) << st.status().to_string();
  if (st.ok()) {
    EXPECT_EQ(st->rewritten, want_rewritten);
  }
  EXPECT_TRUE(remove_dead_nodes(&f).ok());
  EXPECT_TRUE(f.topo_sort().ok() && f.infer_shapes().ok());
  return f;
}

const Node& int8_gemm(const Graph& g) {
  for (const Node& n : g.nodes())
    if (n.op_type == "Int8Gemm") return n;
  ADD_FAILURE() << "no Int8Gemm";
  return g.nodes().front();
}

std::vector<Tensor> inputs(const Spec& s, std::mt19937& rng) {
  std::vector<Tensor> in{uniform({2, 5, kK}, rng, -2, 2)};
  if (s.residual) in.push_back(uniform({2, 5, kN}, rng, -1, 1));
  if (s.broadcast_addend) in.push_back(uniform({kN}, rng, -1, 1));
  return in;
}

// Every output of the two graphs: float ones to f32 rounding, int8 ones within one step on at
// most 1% of the values (and not a saturated or all-zero signal).
void expect_equivalent(const Graph& ref, const Graph& got_g, const std::vector<Tensor>& in) {
  const auto want = run_cpu(ref, in);
  const auto got = run_cpu(got_g, in);
  ASSERT_EQ(got.size(), want.size());
  for (size_t o = 0; o < want.size(); ++o) {
    ASSERT_EQ(got[o].dtype(), want[o].dtype()) << "output " << o;
    ASSERT_EQ(got[o].shape(), want[o].shape()) << "output " << o;
    if (want[o].dtype() == DType::I8) {
      int64_t off = 0, unsaturated = 0, nonzero = 0;
      for (int64_t i = 0; i < want[o].numel(); ++i) {
        const int64_t d = std::abs(got[o].get_i64(i) - want[o].get_i64(i));
        EXPECT_LE(d, 1) << "element " << i;
        off += d != 0;
        unsaturated += want[o].get_i64(i) > -128 && want[o].get_i64(i) < 127;
        nonzero += want[o].get_i64(i) != 0;
      }
      EXPECT_LE(off * 100, want[o].numel()) << off << " of " << want[o].numel() << " differ by one step";
      EXPECT_GT(unsaturated * 4, want[o].numel() * 3);  // a real signal, not a saturated
      EXPECT_GT(nonzero * 4, want[o].numel());          // or all-zero output
    } else {
      EXPECT_LT(max_rel_err({got[o]}, {want[o]}), 1e-5) << "output " << o;
    }
  }
}

TEST(Int8Epilogue, EachActivationResidualAndQuantize) {
  for (const char* act : {"", "Relu", "Gelu", "GeluTanh"})
    for (bool residual : {false, true})
      for (bool quantize : {false, true}) {
        if (std::string(act).empty() && !residual && !quantize) continue;  // nothing to take
        SCOPED_TRACE(std::string(act) + (residual ? " residual" : "") + (quantize ? " quantize" : ""));
        std::mt19937 rng(7);
        Spec s{act, residual, quantize};
        const Graph g = build(s, rng);
        // fold_qdq takes a Relu itself; then only a residual or quantize is left for this pass.
        const Graph f = fused(g, std::string(act) == "Relu" && !residual && !quantize ? 0 : 1);
        EXPECT_EQ(count(f, "Int8Gemm"), 1);
        EXPECT_EQ(count(f, "Relu") + count(f, "Gelu") + count(f, "Add") + count(f, "DequantizeLinear"), 0);
        EXPECT_EQ(count(f, "QuantizeLinear"), 1);  // x's, on the way in
        const Node& n = int8_gemm(f);
        EXPECT_EQ(n.inputs.size() > 5 && n.inputs[5] != kNoValue, residual);
        EXPECT_EQ(n.inputs.size() > 6, quantize);
        EXPECT_EQ(n.attr_s("activation", ""), std::string(act) == "GeluTanh" ? "Gelu" : act);
        EXPECT_EQ(f.value(f.outputs()[0]).info.dtype, quantize ? DType::I8 : DType::F32);
        for (int rep = 0; rep < 3; ++rep) expect_equivalent(g, f, inputs(s, rng));
      }
}

TEST(Int8Epilogue, ReadElsewhereStopsTheChain) {
  {  // the GEMM's own output is read by something else: nothing is taken
    std::mt19937 rng(8);
    Spec s{"Gelu", false, true};
    s.gemm_read_elsewhere = true;
    const Graph g = build(s, rng);
    const Graph f = fused(g, 0);
    EXPECT_EQ(count(f, "Gelu"), 1);
    EXPECT_EQ(count(f, "QuantizeLinear"), 2);
    EXPECT_EQ(int8_gemm(f).attr_s("activation", ""), "");
    expect_equivalent(g, f, inputs(s, rng));
  }
  {  // the Gelu's output is: the Gelu is taken (the node writes that output), the quantize not
    std::mt19937 rng(9);
    Spec s{"Gelu", false, true};
    s.act_read_elsewhere = true;
    const Graph g = build(s, rng);
    const Graph f = fused(g, 1);
    EXPECT_EQ(count(f, "Gelu"), 0);
    EXPECT_EQ(count(f, "QuantizeLinear"), 2);
    EXPECT_EQ(int8_gemm(f).attr_s("activation", ""), "Gelu");
    EXPECT_EQ(f.value(int8_gemm(f).outputs[0]).info.dtype, DType::F32);
    expect_equivalent(g, f, inputs(s, rng));
  }
}

TEST(Int8Epilogue, PerChannelOrShiftedQuantizeStaysOutside) {
  for (bool per_channel : {true, false}) {
    std::mt19937 rng(9);
    Spec s{"Relu", false, true};
    s.per_channel_q = per_channel;
    s.q_zero_point = !per_channel;
    const Graph g = build(s, rng);
    const Graph f = fused(g, 0);  // fold_qdq took the Relu already: nothing left to take
    EXPECT_EQ(count(f, "QuantizeLinear"), 2);
    EXPECT_EQ(int8_gemm(f).inputs.size(), 5u);
    EXPECT_EQ(f.value(int8_gemm(f).outputs[0]).info.dtype, DType::F32);
    expect_equivalent(g, f, inputs(s, rng));
  }
}

TEST(Int8Epilogue, BroadcastAddendStaysOutside) {
  std::mt19937 rng(10);
  Spec s{"Gelu", false, true};
  s.broadcast_addend = true;  // a non-constant [N]: a bias fold_qdq could not take, not a residual
  const Graph g = build(s, rng);
  const Graph f = fused(g, 1);  // the Gelu only
  EXPECT_EQ(count(f, "Add"), 1);
  EXPECT_EQ(count(f, "QuantizeLinear"), 2);
  EXPECT_EQ(int8_gemm(f).attr_s("activation", ""), "Gelu");
  expect_equivalent(g, f, inputs(s, rng));
}

// Two quantized linears as an FFN, GELU written op by op (erf) and a residual: the session
// pipeline for --precision int8 on cuda (run here on the CPU reference) leaves two Int8Gemms, the
// first writing the second's int8 input, and no Q/DQ between them; the switch keeps them apart.
Graph ffn(std::mt19937& rng) {
  Graph g;
  g.opset = 17;
  const int64_t d = 32, h = 64;
  const ValueId x = g.add_input("x", DType::F32, {kFirstSymbolDim, 4, d});
  const ValueId z = g.add_constant("z", Tensor::zeros(DType::I8, {}));
  auto quant_linear = [&](ValueId in, int64_t k, int64_t n, float s, const std::string& name) {
    const ValueId sv = g.add_constant(name + ".s", Tensor::scalar_f32(s));
    const ValueId q = g.add_node(Op::QuantizeLinear, name + ".q", {in, sv, z}, 1)[0];
    const ValueId dq = g.add_node(Op::DequantizeLinear, name + ".dq", {q, sv, z}, 1)[0];
    Tensor wq = Tensor::empty(DType::I8, {k, n});
    std::uniform_int_distribution<int> u(-127, 127);
    for (int64_t i = 0; i < wq.numel(); ++i) wq.data<int8_t>()[i] = static_cast<int8_t>(u(rng));
    const float sw = 1.0f / (127.0f * std::sqrt(static_cast<float>(k)) * s);  // outputs of about unit spread
    const ValueId wd = g.add_node(Op::DequantizeLinear, name + ".dqw",
                                  {g.add_constant(name + ".wq", wq), g.add_constant(name + ".sw", uniform({n}, rng, sw, 2 * sw)),
                                   g.add_constant(name + ".zw", Tensor::zeros(DType::I8, {n}))},
                                  1, {{"axis", int_attr(1)}})[0];
    const ValueId mm = g.add_node(Op::MatMul, name + ".mm", {dq, wd}, 1)[0];
    return g.add_node(Op::Add, name + ".bias", {g.add_constant(name + ".b", uniform({n}, rng, -0.3f, 0.3f)), mm}, 1)[0];
  };
  const ValueId u = quant_linear(x, d, h, 0.02f, "up");
  auto c = [&](const char* name, float v) { return g.add_constant(name, Tensor::scalar_f32(v)); };
  const ValueId e = g.add_node(Op::Erf, "erf", {g.add_node(Op::Div, "div", {u, c("sqrt2", 1.4142135f)}, 1)[0]}, 1)[0];
  const ValueId gl = g.add_node(
      Op::Mul, "half", {g.add_node(Op::Mul, "mul", {u, g.add_node(Op::Add, "one", {e, c("1", 1.0f)}, 1)[0]}, 1)[0], c("0.5", 0.5f)},
      1)[0];
  const ValueId down = quant_linear(gl, h, d, 0.01f, "down");
  g.mark_output(g.add_node(Op::Add, "residual", {x, down}, 1)[0]);
  return g;
}

// g through the int8 session pipeline on cuda (run here on the CPU reference) with one fusion
// turned off by GPUOPT_DISABLE_FUSION; false (with the error printed) when the pipeline fails.
bool cuda_int8_without(Graph* g, const char* fusion) {
  setenv("GPUOPT_DISABLE_FUSION", fusion, 1);
  const Status st = run_session_passes(g, "cuda", "int8", true);
  unsetenv("GPUOPT_DISABLE_FUSION");
  if (!st.ok()) ADD_FAILURE() << st.to_string();
  return st.ok();
}

// The cuda pipeline's graph with the fusion on and off, each against g's CPU int8 session on three
// random [3, 4, 32] batches: fp16 activations and scales against exact QDQ semantics in f32 are a
// few fp16 steps apart, and a one-step int8 flip in the middle moves an output by about the
// down-projection's gain.
void expect_near_cpu_int8(const Graph& g, const Graph& gpu, const Graph& off, std::mt19937& rng) {
  Graph cpu = g;
  ASSERT_TRUE(run_session_passes(&cpu, "cpu", "int8", true).ok());
  for (int rep = 0; rep < 3; ++rep) {
    const Tensor x = uniform({3, 4, 32}, rng, -2, 2);
    const auto want = run_cpu(cpu, {x});
    EXPECT_LT(max_rel_err(run_cpu(gpu, {x}), want), 3e-2);
    EXPECT_LT(max_rel_err(run_cpu(off, {x}), want), 3e-2);
  }
}

TEST(Int8Epilogue, SessionPipelineFfn) {
  std::mt19937 rng(12);
  Graph g = ffn(rng);
  finish(g);
  Graph gpu = g;
  ASSERT_TRUE(run_session_passes(&gpu, "cuda", "int8", true).ok());
  EXPECT_EQ(count(gpu, "Int8Gemm"), 2);
  EXPECT_EQ(count(gpu, "QuantizeLinear"), 1);  // x's only: the up-projection writes the down one's int8 input
  EXPECT_EQ(count(gpu, "DequantizeLinear") + count(gpu, "Gelu") + count(gpu, "Add") + count(gpu, "Erf"), 0);
  Graph off = g;
  ASSERT_TRUE(cuda_int8_without(&off, "int8_epilogue"));
  EXPECT_EQ(count(off, "Int8Gemm"), 2);
  EXPECT_EQ(count(off, "QuantizeLinear"), 2);
  EXPECT_EQ(count(off, "Gelu"), 1);
  expect_near_cpu_int8(g, gpu, off, rng);
}

// x + Relu(x) -> LayerNorm -> h; h -> Q -> DQ -> MatMul + bias -> + h (the residual) -> y.
// After the default passes the LayerNorm is a SkipLayerNormalization; fuse_int8_norm makes it
// write the int8 tensor the QuantizeLinear made (exactly: the same formula on the same stored
// output), and the int8 session pipeline on cuda has no QuantizeLinear left.
Graph norm_block(std::mt19937& rng) {
  Graph g;
  g.opset = 17;
  const int64_t d = 32;
  const ValueId x = g.add_input("x", DType::F32, {kFirstSymbolDim, 4, d});
  const ValueId s = g.add_node(Op::Add, "res", {x, g.add_node(Op::Relu, "relu", {x}, 1)[0]}, 1)[0];
  const ValueId h = g.add_node(Op::LayerNormalization, "ln",
                               {s, g.add_constant("gamma", uniform({d}, rng, 0.5f, 1.5f)),
                                g.add_constant("beta", uniform({d}, rng, -0.2f, 0.2f))},
                               1, {{"axis", int_attr(-1)}, {"epsilon", float_attr(1e-5f)}})[0];
  const ValueId sh = g.add_constant("sh", Tensor::scalar_f32(0.025f));
  const ValueId z = g.add_constant("z", Tensor::zeros(DType::I8, {}));
  const ValueId hd = g.add_node(Op::DequantizeLinear, "dq", {g.add_node(Op::QuantizeLinear, "q", {h, sh, z}, 1)[0], sh, z}, 1)[0];
  Tensor wq = Tensor::empty(DType::I8, {d, d});
  std::uniform_int_distribution<int> u(-127, 127);
  for (int64_t i = 0; i < wq.numel(); ++i) wq.data<int8_t>()[i] = static_cast<int8_t>(u(rng));
  const ValueId wd = g.add_node(Op::DequantizeLinear, "dqw",
                                {g.add_constant("wq", wq), g.add_constant("sw", uniform({d}, rng, 0.002f, 0.004f)),
                                 g.add_constant("zw", Tensor::zeros(DType::I8, {d}))},
                                1, {{"axis", int_attr(1)}})[0];
  const ValueId mm = g.add_node(Op::MatMul, "mm", {hd, wd}, 1)[0];
  const ValueId b = g.add_node(Op::Add, "bias", {mm, g.add_constant("b", uniform({d}, rng, -0.3f, 0.3f))}, 1)[0];
  g.mark_output(g.add_node(Op::Add, "out", {h, b}, 1)[0]);
  EXPECT_TRUE(g.topo_sort().ok() && g.infer_shapes().ok());
  return g;
}

TEST(Int8Epilogue, SkipLayerNormWritesTheInt8Tensor) {
  std::mt19937 rng(31);
  const Graph g = norm_block(rng);
  Graph plain = g;
  ASSERT_TRUE(run_default_passes(&plain).ok());
  ASSERT_EQ(count(plain, "SkipLayerNormalization"), 1);
  Graph f = plain;
  auto st = fuse_int8_norm(&f);
  ASSERT_TRUE(st.ok()) << st.status().to_string();
  EXPECT_EQ(st->rewritten, 1);
  EXPECT_EQ(count(f, "QuantizeLinear"), 0);
  for (const Node& n : f.nodes())
    if (n.op_type == "SkipLayerNormalization") {
      ASSERT_EQ(n.outputs.size(), 5u);
      EXPECT_EQ(f.value(n.outputs[4]).info.dtype, DType::I8);
    }
  for (int rep = 0; rep < 3; ++rep) {
    const Tensor x = uniform({2, 4, 32}, rng, -2, 2);
    const auto want = run_cpu(plain, {x});
    EXPECT_EQ(max_rel_err(run_cpu(f, {x}), want), 0.0);
    EXPECT_LT(max_rel_err(want, run_cpu(g, {x})), 1e-5);
  }
  // The int8 session pipeline on cuda (run here on the CPU reference): the Int8Gemm reads the
  // norm's int8 output; no QuantizeLinear or DequantizeLinear left. int8_norm off keeps the Q.
  Graph gpu = g;
  ASSERT_TRUE(run_session_passes(&gpu, "cuda", "int8", true).ok());
  EXPECT_EQ(count(gpu, "Int8Gemm"), 1);
  EXPECT_EQ(count(gpu, "QuantizeLinear") + count(gpu, "DequantizeLinear"), 0);
  Graph off = g;
  ASSERT_TRUE(cuda_int8_without(&off, "int8_norm"));
  EXPECT_EQ(count(off, "QuantizeLinear"), 1);
  expect_near_cpu_int8(g, gpu, off, rng);
}

}  // namespace
}  // namespace gpuopt::testing
