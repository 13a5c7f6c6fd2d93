// Session::begin_ordered / finish_ordered on the CUDA backend (cuda_pipeline.cpp): a shape's first
// two runs go the usual way (eager, then captured), later ones overlap on the upload, compute and
// download streams with two runs in flight. Each answer must be the CPU reference's for its own
// input, in the order begun, with a new shape (synchronous again) in between. Skips without a GPU.
#include "cuda_test_util.h"
#include "session_util.h"

#include "gpuopt/session.h"
#include "ir/graph.h"

#include <gtest/gtest.h>

#include <cmath>

namespace gpuopt {
namespace {

using testing::randn;

// x[N,3,8,8] -> Conv(3->4, 3x3, pad 1) -> Relu -> y[N,4,8,8]
Graph conv_relu() {
  Graph g;
  g.opset = 17;
  ValueId x = g.add_input("x", DType::F32, {g.symbol_dim("N"), 3, 8, 8});
  ValueId w = g.add_constant("w", randn({4, 3, 3, 3}, 1, 0.3f));
  Attribute pads = testing::ints_attr({1, 1, 1, 1});
  ValueId c = g.add_node(Op::Conv, "conv", {x, w}, 1, {{"pads", pads}})[0];
  ValueId y = g.add_node(Op::Relu, "relu", {c}, 1, {}, {"y"})[0];
  g.mark_output(y);
  return g;
}

double max_err(const Tensor& a, const Tensor& b) {
  double m = 0;
  for (int64_t i = 0; i < a.numel(); ++i) m = std::max(m, std::abs(a.get_f64(i) - b.get_f64(i)));
  return m;
}

TEST(CudaPipeline, OverlappedRunsMatchTheCpuInTheOrderBegun) {
  GPUOPT_REQUIRE_CUDA();
  const Graph g = conv_relu();
  SessionOptions go;
  go.device = Device::cuda(0);
  auto gpu = Session::from_graph(g, go);
  auto cpu = Session::from_graph(g, SessionOptions{});
  ASSERT_TRUE(gpu.ok() && cpu.ok());
  // Inputs 0..7 at batch 2, except 5 (batch 3: a new shape in the middle of the overlap).
  std::vector<Tensor> x;
  for (int i = 0; i < 8; ++i) x.push_back(randn({i == 5 ? 3 : 2, 3, 8, 8}, 200 + static_cast<uint32_t>(i)));
  std::vector<Tensor> want;
  for (const Tensor& t : x) {
    auto r = (*cpu)->run_ordered({t});
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    want.push_back((*r)[0]);
  }
  Session& s = **gpu;
  std::vector<Tensor> got(x.size());
  auto fin = [&](int i) {
    auto r = s.finish_ordered();
    ASSERT_TRUE(r.ok()) << "run " << i << ": " << r.status().to_string();
    got[static_cast<size_t>(i)] = (*r)[0];
  };
  // 0: eager, 1: captured (each finished before the next is begun), then two in flight.
  ASSERT_TRUE(s.begin_ordered({x[0]}).ok());
  fin(0);
  ASSERT_TRUE(s.begin_ordered({x[1]}).ok());
  fin(1);
  ASSERT_TRUE(s.begin_ordered({x[2]}).ok());
  for (int i = 3; i < 8; ++i) {
    const Status st = s.begin_ordered({x[static_cast<size_t>(i)]});
    ASSERT_TRUE(st.ok()) << "run " << i << ": " << st.to_string();
    fin(i - 1);
  }
  fin(7);
  EXPECT_EQ(s.begin_ordered({x[0]}).ok() && s.begin_ordered({x[1]}).ok(), true);
  EXPECT_EQ(s.begin_ordered({x[2]}).code(), StatusCode::kFailedPrecondition);  // 2 in flight at most
  fin(0);
  fin(1);
  for (size_t i = 0; i < x.size(); ++i) {
    ASSERT_EQ(got[i].shape(), want[i].shape()) << "run " << i;
    EXPECT_LE(max_err(got[i], want[i]), 1e-4) << "run " << i;
  }
  // Each answer is its own input's: neighbours differ.
  EXPECT_GT(max_err(got[3], want[4]), 1e-3);
}

}  // namespace
}  // namespace gpuopt
