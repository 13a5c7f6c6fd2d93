// Int8Gemm on the GPU (cuBLASLt int8 tensor cores, or the simple kernel for odd shapes) against
// the CPU reference: a QDQ MatMul/Gemm model at --precision int8 on CUDA (fold_qdq makes the
// Int8Gemm; fp16 epilogue) versus the same model on the CPU reference (exact QDQ semantics).
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

void check(int64_t m, int64_t k, int64_t n) {
  std::mt19937 rng(static_cast<uint32_t>(m * 1000 + k + n));
  Graph g = qdq_mlp(m, k, n, rng);
  const NamedTensors in{{"x", randn({m, k}, 9, 1.0f)}};
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
  // The integer products are exact on both sides; what differs is fp16: the epilogue's rounding and
  // x quantized from fp16 (a value on a rounding edge moves one quantum: ~2e-3 of an output).
  EXPECT_LT(rel_l2(got->at(0).second, want->at(0).second), 5e-3);
  expect_outputs_match(*got, *want, 2e-2);
}

TEST(Int8Gemm, TensorCoreShape) { check(64, 256, 128); }    // cuBLASLt int8 (K, N multiples of 4)
TEST(Int8Gemm, OddShapeFallback) { check(5, 19, 7); }      // the simple kernel
TEST(Int8Gemm, LargeM) { check(1024, 768, 768); }

}  // namespace
}  // namespace gpuopt::testing
