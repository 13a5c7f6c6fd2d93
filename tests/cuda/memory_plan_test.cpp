// GPUOPT_MEMORY_PLAN=static on the CUDA executor (one arena per input shape and context, device
// nodes' outputs as views into it) against the pool path and the CPU reference: outputs equal
// over the eager run, the capture and the replays of each shape, several shapes in turn.
#include "session_util.h"

#include <cstdlib>

namespace gpuopt::testing {
namespace {

// x [N,64] -> MatMul(W) -> Relu -> Reshape [N,8,8] -> Softmax -> Flatten -> Add(skip: the Relu)
// -> Mul -> y, plus the Reshape read again at the end (a view kept alive across the arena).
Graph mlp_with_views() {
  Graph g;
  g.opset = 17;
  ValueId x = g.add_input("x", DType::F32, {kFirstSymbolDim, 64});
  ValueId w = g.add_constant("w", randn({64, 64}, 3, 0.2f));
  ValueId shape = g.add_constant("shape", Tensor::from_vector(DType::I64, {3}, std::vector<int64_t>{-1, 8, 8}));
  ValueId m = g.add_node(Op::MatMul, "mm", {x, w}, 1)[0];
  ValueId r = g.add_node(Op::Relu, "relu", {m}, 1)[0];
  ValueId v = g.add_node(Op::Reshape, "view", {r, shape}, 1)[0];
  ValueId s = g.add_node(Op::Softmax, "softmax", {v}, 1, {{"axis", int_attr(-1)}})[0];
  ValueId f = g.add_node(Op::Flatten, "flat", {s}, 1, {{"axis", int_attr(1)}})[0];
  ValueId a = g.add_node(Op::Add, "skip", {f, r}, 1)[0];
  ValueId y = g.add_node(Op::Mul, "y", {a, a}, 1, {}, {"y"})[0];
  ValueId vs = g.add_node(Op::ReduceSum, "vsum", {v}, 1, {{"keepdims", int_attr(0)}}, {"vsum"})[0];
  g.mark_output(y);
  g.mark_output(vs);
  return g;
}

std::unique_ptr<Session> session(const Graph& g, const char* mode) {
  SessionOptions o;
  o.device = "cuda";
  setenv("GPUOPT_MEMORY_PLAN", mode, 1);
  auto s = Session::from_graph(g, o);
  unsetenv("GPUOPT_MEMORY_PLAN");
  EXPECT_TRUE(s.ok()) << s.status().to_string();
  return s.ok() ? std::move(*s) : nullptr;
}

TEST(MemoryPlan, StaticMatchesPoolAndCpuOverCaptureAndReplay) {
  GPUOPT_REQUIRE_CUDA();
  const Graph g = mlp_with_views();
  auto cpu = Session::from_graph(g, {});
  ASSERT_TRUE(cpu.ok());
  auto st = session(g, "static");
  auto pool = session(g, "pool");
  ASSERT_TRUE(st && pool);
  for (int round = 0; round < 2; ++round)
    for (int64_t batch : {1, 3, 8}) {  // each shape: eager, capture, replay, replay
      const NamedTensors in{{"x", randn({batch, 64}, static_cast<uint32_t>(batch + 10 * round))}};
      auto want = (*cpu)->run(in);
      ASSERT_TRUE(want.ok());
      for (int k = 0; k < 4; ++k) {
        RunProfile ps, pp;
        auto a = st->run(in, &ps);
        auto b = pool->run(in, &pp);
        ASSERT_TRUE(a.ok()) << a.status().to_string();
        ASSERT_TRUE(b.ok()) << b.status().to_string();
        SCOPED_TRACE(::testing::Message() << "batch " << batch << " run " << k << " " << ps.mode);
        expect_outputs_match(*a, *b, 1e-6);
        expect_outputs_match(*a, *want, 1e-4);
        EXPECT_EQ(ps.mode, pp.mode);  // the plan does not change how a shape runs
      }
    }
}

TEST(MemoryPlan, CpuNodeBetweenGpuNodes) {
  GPUOPT_REQUIRE_CUDA();
  const Graph g = relu_det_double(5);
  auto cpu = Session::from_graph(g, {});
  ASSERT_TRUE(cpu.ok());
  auto st = session(g, "static");
  ASSERT_TRUE(st);
  const NamedTensors in{{"x", randn({5, 3, 3}, 7)}};
  auto want = (*cpu)->run(in);
  ASSERT_TRUE(want.ok());
  for (int k = 0; k < 3; ++k) {
    auto got = st->run(in);
    ASSERT_TRUE(got.ok()) << got.status().to_string();
    expect_outputs_match(*got, *want, 1e-5);
  }
}

TEST(MemoryPlan, BadSettingRefusesTheSession) {
  GPUOPT_REQUIRE_CUDA();
  SessionOptions o;
  o.device = "cuda";
  setenv("GPUOPT_MEMORY_PLAN", "arena", 1);
  auto s = Session::from_graph(mlp_with_views(), o);
  unsetenv("GPUOPT_MEMORY_PLAN");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("GPUOPT_MEMORY_PLAN='arena'"), std::string::npos);
}

}  // namespace
}  // namespace gpuopt::testing
