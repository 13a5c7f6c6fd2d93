// --precision fp8 on the GPU against the CPU reference: one Linear layer (MatMul + bias, then
// Relu or Gelu) rewritten by rewrite_fp8 (passes/fp8.h), run by a CUDA session at "fp8" (Fp8Gemm
// on cuBLASLt FP8, the rest fp16) and by a CPU session at "fp8" (the e4m3 reference, f32 rest),
// eager, captured and replayed. The input is fp16-exact, so both sides quantize the same values to
// the same e4m3 codes; what differs is the accumulation order, the fp16 bias and output, and
// cuBLASLt's tanh GELU against the erf one (at most 4.7e-4).
#include "backends/cuda/plan_store.h"
#include "passes/fp8.h"
#include "passes/passes.h"
#include "session_util.h"

#include <map>

namespace gpuopt::testing {
namespace {

// Values rounded to fp16: the fp16 session's biases (and inputs) then equal the f32 reference's,
// so an output near an e4m3 rounding edge does not land on the other side because of them.
Tensor half_exact(const Tensor& t) { return t.cast(DType::F16).cast(DType::F32); }

Graph linear(int64_t m, int64_t k, int64_t n, Op act, uint32_t seed) {
  Graph g;
  g.opset = 17;
  const ValueId x = g.add_input("x", DType::F32, {m, k});
  ValueId y = g.add_node(Op::MatMul, "mm", {x, g.add_constant("w", randn({k, n}, seed, 1.0f / std::sqrt(float(k))))}, 1)[0];
  y = g.add_node(Op::Add, "bias", {y, g.add_constant("b", half_exact(randn({n}, seed + 1, 0.5f)))}, 1)[0];
  y = g.add_node(act, "act", {y}, 1, {}, {"y"})[0];
  g.mark_output(y);
  return g;
}

// N(0, 1) values rounded to fp16, so the f32 and fp16 sessions read the same numbers.
Tensor fp16_exact(int64_t m, int64_t k, uint32_t seed) { return half_exact(randn({m, k}, seed)); }

// g at "fp8" on the CPU reference, then on CUDA eager, captured and replayed: each CUDA run's
// first output within `rel` (rel-L2) of the CPU's, and element by element within `elem` when > 0.
void expect_cuda_matches_cpu(const Graph& g, const NamedTensors& in, double rel, double elem) {
  SessionOptions oc, og;
  oc.device = "cpu";
  oc.precision = "fp8";
  auto cpu = Session::from_graph(g, oc);
  ASSERT_TRUE(cpu.ok()) << cpu.status().to_string();
  auto want = (*cpu)->run(in);
  ASSERT_TRUE(want.ok()) << want.status().to_string();
  GPUOPT_REQUIRE_CUDA();
  og.device = "cuda";
  og.precision = "fp8";
  auto gpu = Session::from_graph(g, og);
  ASSERT_TRUE(gpu.ok()) << gpu.status().to_string();
  for (int run = 0; run < 3; ++run) {  // eager, capture, replay
    SCOPED_TRACE(run);
    auto got = (*gpu)->run(in);
    ASSERT_TRUE(got.ok()) << got.status().to_string();
    EXPECT_LT(rel_l2(got->at(0).second, want->at(0).second), rel);
    if (elem > 0) expect_outputs_match(*got, *want, elem);
  }
}

void check(int64_t m, int64_t k, int64_t n, Op act) {
  Graph g = linear(m, k, n, act, static_cast<uint32_t>(m + k + n));
  ASSERT_TRUE(g.topo_sort().ok());
  ASSERT_TRUE(g.infer_shapes().ok());
  ASSERT_TRUE(run_default_passes(&g).ok());
  const Tensor x = fp16_exact(m, k, 3);
  double amax = 0;
  for (int64_t i = 0; i < x.numel(); ++i) amax = std::max(amax, std::fabs(x.get_f64(i)));
  std::map<std::string, double> cal;
  for (const std::string& name : fp8_activation_tensors(g)) cal[name] = amax;  // x itself
  auto st = rewrite_fp8(&g, cal);
  ASSERT_TRUE(st.ok()) << st.status().to_string();
  ASSERT_EQ(st->rewritten, 1);
  expect_cuda_matches_cpu(g, {{"x", x}}, 3e-3, 1e-2);
}

// Two layers, fc1 (+ Relu) writing fc2's e4m3 input (the chain of passes/fp8.h), no Reshape
// between: cuBLASLt's e4m3 D (or its f16 fallback) against the CPU reference. Relu, not Gelu, so
// the two sides' fc1 outputs differ only by accumulation order and rarely round to other codes.
void check_chain(int64_t m, int64_t k, int64_t h, int64_t n) {
  Graph g;
  g.opset = 17;
  const ValueId x = g.add_input("x", DType::F32, {m, k});
  ValueId y = g.add_node(Op::MatMul, "fc1", {x, g.add_constant("w1", randn({k, h}, 1, 1.0f / std::sqrt(float(k))))}, 1)[0];
  y = g.add_node(Op::Add, "b1", {y, g.add_constant("b1", half_exact(randn({h}, 2, 0.5f)))}, 1)[0];
  const ValueId r = g.add_node(Op::Relu, "relu", {y}, 1, {}, {"r"})[0];
  y = g.add_node(Op::MatMul, "fc2", {r, g.add_constant("w2", randn({h, n}, 3, 1.0f / std::sqrt(float(h))))}, 1)[0];
  y = g.add_node(Op::Add, "b2", {y, g.add_constant("b2", half_exact(randn({n}, 4, 0.5f)))}, 1, {}, {"y"})[0];
  g.mark_output(y);
  ASSERT_TRUE(g.topo_sort().ok());
  ASSERT_TRUE(g.infer_shapes().ok());
  ASSERT_TRUE(run_default_passes(&g).ok());
  const Tensor xv = fp16_exact(m, k, 5);
  // amax of both GEMM inputs from an f32 run (the relu output as an extra output).
  Graph probe = g;
  probe.mark_output(*probe.find_value("r"));
  SessionOptions op;
  op.optimize = false;
  auto ps = Session::from_graph(probe, op);
  ASSERT_TRUE(ps.ok()) << ps.status().to_string();
  auto pr = (*ps)->run({{"x", xv}});
  ASSERT_TRUE(pr.ok()) << pr.status().to_string();
  auto amax = [](const Tensor& t) {
    double a = 0;
    for (int64_t i = 0; i < t.numel(); ++i) a = std::max(a, std::fabs(t.get_f64(i)));
    return a;
  };
  std::map<std::string, double> cal{{"x", amax(xv)}, {"r", amax(pr->back().second)}};
  auto st = rewrite_fp8(&g, cal);
  ASSERT_TRUE(st.ok()) << st.status().to_string();
  ASSERT_EQ(st->rewritten, 2);
  ASSERT_EQ(st->chained, 1);
  expect_cuda_matches_cpu(g, {{"x", xv}}, 5e-3, 0);
}

// Q, K and V projections of one input: the first Fp8Gemm writes the e4m3 copy of x as its second
// output, the other two read it (the shared form of passes/fp8.h).
TEST(Fp8GemmSession, SiblingsShareTheQuantizedInput) {
  const int64_t m = 128, k = 768, n = 768;
  Graph g;
  g.opset = 17;
  const ValueId x = g.add_input("x", DType::F32, {m, k});
  std::vector<ValueId> ys;
  uint32_t seed = 20;
  for (const char* p : {"q", "k", "v"}) {
    const ValueId y = g.add_node(Op::MatMul, p, {x, g.add_constant(std::string(p) + ".w", randn({k, n}, seed++, 0.036f))}, 1)[0];
    ys.push_back(g.add_node(Op::Add, std::string(p) + ".b", {y, g.add_constant(std::string(p) + ".bias", half_exact(randn({n}, seed++, 0.5f)))}, 1)[0]);
  }
  g.mark_output(g.add_node(Op::Concat, "cat", ys, 1, {{"axis", int_attr(1)}}, {"y"})[0]);
  ASSERT_TRUE(g.topo_sort().ok());
  ASSERT_TRUE(g.infer_shapes().ok());
  ASSERT_TRUE(run_default_passes(&g).ok());
  const Tensor xv = fp16_exact(m, k, 7);
  double amax = 0;
  for (int64_t i = 0; i < xv.numel(); ++i) amax = std::max(amax, std::fabs(xv.get_f64(i)));
  auto st = rewrite_fp8(&g, {{"x", amax}});
  ASSERT_TRUE(st.ok()) << st.status().to_string();
  ASSERT_EQ(st->shared, 2);
  expect_cuda_matches_cpu(g, {{"x", xv}}, 3e-3, 1e-2);
}

TEST(Fp8GemmSession, ChainSmall) { check_chain(7, 64, 128, 64); }
TEST(Fp8GemmSession, ChainBertFfn) { check_chain(256, 768, 3072, 768); }

TEST(Fp8GemmSession, OneRowBertWidth) { check(1, 768, 768, Op::Relu); }
TEST(Fp8GemmSession, SmallGelu) { check(7, 64, 64, Op::Gelu); }
TEST(Fp8GemmSession, BertFfnGelu) { check(129, 768, 3072, Op::Gelu); }
TEST(Fp8GemmSession, BertFfnDown) { check(256, 3072, 768, Op::Relu); }

// The eager run timed cuBLASLt's candidates (ops/matmul/cuda/lt_tune.h) and recorded the chosen
// algorithm in the plan store, as the float GEMMs do: key "fp8gemm m,n,k,...", value the
// algorithm's 8 words in hex.
TEST(Fp8GemmSession, AlgorithmRecordedInThePlanStore) {
  GPUOPT_REQUIRE_CUDA();
  check(96, 256, 160, Op::Relu);
  int found = 0;
  for (const auto& [key, value] : cuda::PlanStore::of(0).snapshot())
    if (key.rfind("fp8gemm 96,160,256,", 0) == 0) {
      ++found;
      EXPECT_EQ(value.size(), 128u) << key;
    }
  EXPECT_EQ(found, 1);
}

}  // namespace
}  // namespace gpuopt::testing
