// Per-node profiles carry what `gpuopt profile` draws: each node's host start and, on the GPU,
// its device start after the run's origin event. Nodes run one after another with a wait after
// each, so host starts increase, device starts increase, and a node's device time ends before
// the next one starts. Skips without a CUDA device.
#include "cuda_test_util.h"
#include "session_util.h"

#include "gpuopt/session.h"
#include "ir/graph.h"

#include <gtest/gtest.h>

namespace gpuopt {
namespace {

using testing::randn;

TEST(CudaTraceTimes, StartsAreOrderedAndDeviceSlicesDoNotOverlap) {
  GPUOPT_REQUIRE_CUDA();
  Graph g;
  g.opset = 17;
  ValueId x = g.add_input("x", DType::F32, {64, 256});
  ValueId w1 = g.add_constant("w1", randn({256, 256}, 1, 0.1f));
  ValueId w2 = g.add_constant("w2", randn({256, 64}, 2, 0.1f));
  ValueId h = g.add_node(Op::MatMul, "mm1", {x, w1}, 1)[0];
  ValueId r = g.add_node(Op::Relu, "relu", {h}, 1)[0];
  ValueId y = g.add_node(Op::MatMul, "mm2", {r, w2}, 1, {}, {"y"})[0];
  g.mark_output(y);
  SessionOptions o;
  o.device = "cuda";
  auto s = Session::from_graph(g, o);
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  RunProfile p;
  p.per_node = true;
  auto out = (*s)->run({{"x", randn({64, 256}, 3)}}, &p);
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  ASSERT_EQ(p.nodes.size(), 3u);
  for (size_t i = 0; i < p.nodes.size(); ++i) {
    const NodeTime& n = p.nodes[i];
    EXPECT_EQ(n.device, "cuda") << n.node;
    EXPECT_GE(n.gpu_start_us, 0.0) << n.node;
    EXPECT_GT(n.start_us, 0.0) << n.node;
    if (i == 0) continue;
    const NodeTime& prev = p.nodes[i - 1];
    EXPECT_GE(n.start_us, prev.start_us + prev.wall_us * 0.999) << n.node;  // the host waited for prev
    EXPECT_GE(n.gpu_start_us, prev.gpu_start_us + prev.gpu_us * 0.999) << n.node;
  }
}

}  // namespace
}  // namespace gpuopt
