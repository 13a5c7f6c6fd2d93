// The fast CPU backend's share of the pool (runs in flight divide cpu_threads() among themselves,
// an executable's cap holds, a capped run's parallel loops stay on the calling thread), and that
// every op the fast kernels claim has test cases.
#include "backends/cpu_fast/fast_kernel.h"
#include "core/thread_pool.h"

#include <gtest/gtest.h>

#include "ir/graph.h"

#include <mutex>
#include <set>
#include <string>
#include <thread>

namespace gpuopt::cpu_fast {
namespace {

std::set<std::thread::id> threads_used(int64_t n) {
  std::mutex mu;
  std::set<std::thread::id> ids;
  parallel(n, 1, [&](int64_t, int64_t) {
    std::lock_guard<std::mutex> lock(mu);
    ids.insert(std::this_thread::get_id());
  });
  return ids;
}

TEST(FastCpuThreads, RunsInFlightDivideThePool) {
  const int n = cpu_threads();
  RunScope first(0);
  EXPECT_EQ(run_threads(), n);
  int second = 0;
  std::thread t([&] {
    RunScope other(0);  // a second session or server instance running at the same time
    second = run_threads();
  });
  t.join();
  EXPECT_EQ(second, std::max(1, n / 2));
}

TEST(FastCpuThreads, CapOfOneRunsOnTheCallingThread) {
  {
    RunScope one(1);
    EXPECT_EQ(run_threads(), 1);
    const std::set<std::thread::id> ids = threads_used(1000);
    ASSERT_EQ(ids.size(), 1u);
    EXPECT_EQ(*ids.begin(), std::this_thread::get_id());
  }
  RunScope all(0);
  EXPECT_LE(threads_used(1000).size(), static_cast<size_t>(cpu_threads()));
}

}  // namespace
}  // namespace gpuopt::cpu_fast

namespace gpuopt::cpu_fast {
namespace {

// Every op a fast kernel claims (given f32 values) has cases in fast_ops_test.cpp and
// fast_ops_more_test.cpp: a kernel added without them fails here.
TEST(FastCpuCoverage, EveryClaimedOpHasCases) {
  const std::set<std::string> tested = {
      "MatMul", "Gemm", "FusedGemm", "Conv", "FusedConv", "Attention", "Softmax", "LayerNormalization",
      "SkipLayerNormalization", "Add", "Sub", "Mul", "Div", "Relu", "Tanh", "Sigmoid", "Erf", "Gelu",
      "GlobalAveragePool", "MaxPool"};
  std::set<std::string> claimed;
  for (size_t i = 0; i < kNumOps; ++i) {
    Graph g;
    g.opset = 23;
    std::vector<ValueId> in;
    for (const char* name : {"x0", "x1", "x2"}) in.push_back(g.add_input(name, DType::F32, {2, 3, 4, 5}));
    const Op op = static_cast<Op>(i);
    const ValueId y = g.add_node(op, "n", in, 1)[0];
    g.value(y).info.dtype = DType::F32;
    if (make_fast_kernel(g.nodes()[0], g)) claimed.insert(std::string(op_name(op)));
  }
  EXPECT_EQ(claimed, tested);
}

}  // namespace
}  // namespace gpuopt::cpu_fast
