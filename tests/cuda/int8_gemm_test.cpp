// Int8Gemm on the GPU (cuBLASLt int8 tensor cores, or the simple kernel for odd shapes) against
// the CPU reference: a QDQ MatMul/Gemm model at --precision int8 on CUDA (fold_qdq makes the
// Int8Gemm; fp16 epilogue) versus the same model on the CPU reference (exact QDQ semantics).
#include "backends/cuda/plan_store.h"
#include "session_util.h"

namespace gpuopt::testing {
namespace {

Attribute int1(int64_t v) {
  Attribute a;
  a.kind = Attribute::Kind::kInt;
  a.i = v;
  return a;
}

Graph qdq_mlp(int64_t m, int64_t k, int64_t n, std::mt19937& rng) {
  Graph g;
  g.opset = 17;
  const ValueId x = g.add_input("x", DType::F32, {m, k});
  const ValueId sx = g.add_constant("sx", Tensor::scalar_f32(0.02f));
  const ValueId zx = g.add_constant("zx", Tensor::zeros(DType::I8, {}));
  const ValueId xq = g.add_node(Op::QuantizeLinear, "q", {x, sx, zx}, 1)[0];
  const ValueId xd = g.add_node(Op::DequantizeLinear, "dq", {xq, sx, zx}, 1)[0];
  Tensor wq = Tensor::empty(DType::I8, {k, n});
  std::uniform_int_distribution<int> u(-127, 127);
  for (int64_t i = 0; i < wq.numel(); ++i) wq.data<int8_t>()[i] = static_cast<int8_t>(u(rng));
  Tensor sw = Tensor::empty(DType::F32, {n});
  for (int64_t i = 0; i < n; ++i) sw.set_f64(i, 0.0005 + 0.0001 * (i % 7));
  AttributeMap ax;
  ax["axis"] = int1(1);
  const ValueId wd = g.add_node(Op::DequantizeLinear, "dqw",
                                {g.add_constant("wq", wq), g.add_constant("sw", sw), g.add_constant("zw", Tensor::zeros(DType::I8, {n}))},
                                1, ax)[0];
  ValueId y = g.add_node(Op::MatMul, "mm", {xd, wd}, 1)[0];
  y = g.add_node(Op::Add, "add", {y, g.add_constant("b", randn({n}, 5, 0.1f))}, 1)[0];
  y = g.add_node(Op::Relu, "relu", {y}, 1, {}, {"y"})[0];
  g.mark_output(y);
  return g;
}

// x = (q + u) * 0.02 with q an integer in [-127, 127] and |u| <= 0.3: x / scale is at least 0.2 of
// a quantum from every rounding edge, further than fp16 can move it (x in fp16: < 0.05; the scale
// 0.02 in fp16, 2e-4 off: < 0.03 at q = 127; x / scale rounded to fp16: < 0.04), so the GPU's
// int8 x equals the CPU reference's and the integer sums are exactly equal.
Tensor on_grid(int64_t m, int64_t k, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nq(0.f, 40.f);
  std::uniform_real_distribution<float> u(-0.3f, 0.3f);
  Tensor x = Tensor::empty(DType::F32, {m, k});
  for (int64_t i = 0; i < x.numel(); ++i)
    x.data<float>()[i] = (std::clamp(std::nearbyint(nq(rng)), -127.f, 127.f) + u(rng)) * 0.02f;
  return x;
}

void check(int64_t m, int64_t k, int64_t n, bool grid) {
  std::mt19937 rng(static_cast<uint32_t>(m * 1000 + k + n));
  Graph g = qdq_mlp(m, k, n, rng);
  const NamedTensors in{{"x", grid ? on_grid(m, k, 9) : randn({m, k}, 9, 1.0f)}};
  SessionOptions oc, og;
  oc.device = "cpu";
  oc.precision = "int8";
  auto cpu = Session::from_graph(g, oc);
  ASSERT_TRUE(cpu.ok()) << cpu.status().to_string();
  auto want = (*cpu)->run(in);
  ASSERT_TRUE(want.ok()) << want.status().to_string();
  GPUOPT_REQUIRE_CUDA();
  og.device = "cuda";
  og.precision = "int8";
  auto gpu = Session::from_graph(g, og);
  ASSERT_TRUE(gpu.ok()) << gpu.status().to_string();
  int folded = 0;
  for (const Node& node : (*gpu)->graph().nodes()) folded += node.op_type == "Int8Gemm";
  EXPECT_EQ(folded, 1);
  auto got = (*gpu)->run(in);
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  if (grid) {
    // Equal int8 inputs, exact integer sums: what differs is the fp16 epilogue (scales, bias and
    // output rounded to fp16: ~1e-3 of an output at worst; a NumPy model of it gives 4e-4 rel-L2
    // and 0.18 of this element bound at 1024x768x768).
    EXPECT_LT(rel_l2(got->at(0).second, want->at(0).second), 2e-3);
    expect_outputs_match(*got, *want, 5e-3);
  } else {
    // x ~ N(0, 1) quantized from fp16 on the GPU: a value near a rounding edge moves one quantum
    // (~1e-3 of an output per flip, a few flips per output at K = 256; more at larger K, which is
    // why the large shapes use on_grid inputs).
    EXPECT_LT(rel_l2(got->at(0).second, want->at(0).second), 5e-3);
    expect_outputs_match(*got, *want, 2e-2);
  }
}

TEST(Int8Gemm, TensorCoreShape) { check(64, 256, 128, true); }     // cuBLASLt int8 (K, N multiples of 4)
TEST(Int8Gemm, TensorCoreShapeOffGrid) { check(64, 256, 128, false); }
TEST(Int8Gemm, OddShapeFallback) { check(5, 19, 7, true); }       // the simple kernel
// 1024x768x768 with N(0, 1) inputs failed the element bound on the H200: ~7 fp16 rounding-edge
// flips per output at K = 768 reach 0.94 of 2e-2 * (1 + |y|) in a NumPy model of the kernel's
// arithmetic, over 786k outputs; on_grid inputs make the int8 products exactly equal.
TEST(Int8Gemm, LargeM) { check(1024, 768, 768, true); }

// The eager run timed cuBLASLt's int8 candidates (ops/matmul/cuda/lt_tune.h) and recorded the
// chosen algorithm in the plan store: key "int8gemm m,n,k,workspace", value 8 words in hex.
TEST(Int8Gemm, AlgorithmRecordedInThePlanStore) {
  GPUOPT_REQUIRE_CUDA();
  check(48, 192, 96, true);
  int found = 0;
  for (const auto& [key, value] : cuda::PlanStore::of(0).snapshot())
    if (key.rfind("int8gemm 48,96,192,", 0) == 0) {
      ++found;
      EXPECT_EQ(value.size(), 128u) << key;
    }
  EXPECT_EQ(found, 1);
}

// A BERT-like block at --precision int8 on CUDA: x + Relu(x) -> LayerNorm -> h -> Q -> DQ ->
// MatMul + bias -> Gelu -> Q -> DQ -> MatMul + bias -> + h. fuse_int8_norm makes the LayerNorm
// write the first GEMM's int8 input, fuse_int8_epilogue the first GEMM (+ Gelu + Q) the second's:
// no QuantizeLinear kernel is left. Against the CPU reference (exact QDQ semantics) over eager,
// captured and replayed runs: fp16 activations move a few int8 values by one step.
Graph qdq_ffn(std::mt19937& rng) {
  Graph g;
  g.opset = 17;
  const int64_t d = 64, f = 128;
  const ValueId x = g.add_input("x", DType::F32, {kFirstSymbolDim, 16, d});
  const ValueId s = g.add_node(Op::Add, "res", {x, g.add_node(Op::Relu, "relu", {x}, 1)[0]}, 1)[0];
  AttributeMap ln_at{{"axis", int1(-1)}};
  const ValueId h = g.add_node(Op::LayerNormalization, "ln", {s, g.add_constant("gamma", randn({d}, 3, 0.3f)), g.add_constant("beta", randn({d}, 4, 0.1f))}, 1, ln_at)[0];
  const ValueId z = g.add_constant("z", Tensor::zeros(DType::I8, {}));
  auto linear = [&](ValueId in, float sx, int64_t k, int64_t n, const std::string& name) {
    const ValueId sv = g.add_constant(name + ".sx", Tensor::scalar_f32(sx));
    const ValueId xd =
        g.add_node(Op::DequantizeLinear, name + ".dq", {g.add_node(Op::QuantizeLinear, name + ".q", {in, sv, z}, 1)[0], sv, z}, 1)[0];
    Tensor wq = Tensor::empty(DType::I8, {k, n});
    std::uniform_int_distribution<int> u(-127, 127);
    for (int64_t i = 0; i < wq.numel(); ++i) wq.data<int8_t>()[i] = static_cast<int8_t>(u(rng));
    Tensor sw = Tensor::empty(DType::F32, {n});  // outputs of about unit spread
    for (int64_t i = 0; i < n; ++i) sw.set_f64(i, (1.0 + 0.1 * (i % 5)) / (73.0 * std::sqrt(static_cast<double>(k)) * sx * 40));
    AttributeMap ax;
    ax["axis"] = int1(1);
    const ValueId wd = g.add_node(Op::DequantizeLinear, name + ".dqw",
                                  {g.add_constant(name + ".wq", wq), g.add_constant(name + ".sw", sw),
                                   g.add_constant(name + ".zw", Tensor::zeros(DType::I8, {n}))},
                                  1, ax)[0];
    const ValueId mm = g.add_node(Op::MatMul, name + ".mm", {xd, wd}, 1)[0];
    return g.add_node(Op::Add, name + ".bias", {mm, g.add_constant(name + ".b", randn({n}, 6, 0.1f))}, 1)[0];
  };
  const ValueId up = g.add_node(Op::Gelu, "gelu", {linear(h, 0.03f, d, f, "up")}, 1)[0];
  g.mark_output(g.add_node(Op::Add, "out", {h, linear(up, 0.02f, f, d, "down")}, 1, {}, {"y"})[0]);
  return g;
}

TEST(Int8Gemm, FusedFfnBlockMatchesCpu) {
  std::mt19937 rng(17);
  Graph g = qdq_ffn(rng);
  const NamedTensors in{{"x", randn({4, 16, 64}, 12, 1.0f)}};
  SessionOptions oc, og;
  oc.device = "cpu";
  oc.precision = "int8";
  auto cpu = Session::from_graph(g, oc);
  ASSERT_TRUE(cpu.ok()) << cpu.status().to_string();
  auto want = (*cpu)->run(in);
  ASSERT_TRUE(want.ok()) << want.status().to_string();
  GPUOPT_REQUIRE_CUDA();
  og.device = "cuda";
  og.precision = "int8";
  auto gpu = Session::from_graph(g, og);
  ASSERT_TRUE(gpu.ok()) << gpu.status().to_string();
  int gemms = 0, quantize = 0;
  for (const Node& node : (*gpu)->graph().nodes()) {
    gemms += node.op_type == "Int8Gemm";
    quantize += node.op_type == "QuantizeLinear";
  }
  EXPECT_EQ(gemms, 2);
  EXPECT_EQ(quantize, 0);
  for (int run = 0; run < 3; ++run) {  // eager, captured, replayed
    SCOPED_TRACE(run);
    auto got = (*gpu)->run(in);
    ASSERT_TRUE(got.ok()) << got.status().to_string();
    EXPECT_LT(rel_l2(got->at(0).second, want->at(0).second), 1e-2);
    expect_outputs_match(*got, *want, 5e-2);
  }
}

}  // namespace
}  // namespace gpuopt::testing
