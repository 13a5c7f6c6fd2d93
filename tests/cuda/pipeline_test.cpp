// Session::begin_ordered / finish_ordered on the CUDA backend (cuda_pipeline.cpp): a shape's first
// two runs go the usual way (eager, then captured), later ones overlap on the upload, compute and
// download streams with two runs in flight. Each answer must be the CPU reference's for its own
// input, in the order begun, with a new shape (synchronous again) in between. Skips without a GPU.
#include "cuda_test_util.h"
#include "session_util.h"

#include "gpuopt/session.h"
#include "ir/graph.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <memory>

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

// A host tensor in page-locked memory, as the server's batches and request bodies are; *freed is
// set when its memory goes back.
Tensor pinned_copy(const Tensor& t, std::shared_ptr<std::atomic<bool>> freed) {
  void* p = nullptr;
  if (cudaHostAlloc(&p, t.nbytes(), cudaHostAllocPortable) != cudaSuccess) return Tensor();
  std::memcpy(p, t.raw(), t.nbytes());
  auto st = std::make_shared<Storage>();
  st->data = p;
  st->bytes = t.nbytes();
  st->deleter = [freed](void* q) {
    freed->store(true);
    cudaFreeHost(q);
  };
  return Tensor::wrap(t.dtype(), t.shape(), std::move(st), 0);
}

TEST(CudaPipeline, PinnedInputsAreUploadedFromWhereTheyAreAndHeldUntilDone) {
  // The overlapped path reads a pinned input in place (no host copy into the slot's buffer), on
  // the upload stream after begin returned: the caller may drop its tensor at once, the slot
  // keeps it until the slot is refilled, and every answer is still its own input's.
  GPUOPT_REQUIRE_CUDA();
  const Graph g = conv_relu();
  SessionOptions go;
  go.device = Device::cuda(0);
  auto gpu = Session::from_graph(g, go);
  auto cpu = Session::from_graph(g, SessionOptions{});
  ASSERT_TRUE(gpu.ok() && cpu.ok());
  Session& s = **gpu;
  const Tensor warm = randn({4, 3, 8, 8}, 300);
  for (int i = 0; i < 2; ++i) {  // eager, then captured: later runs overlap
    ASSERT_TRUE(s.begin_ordered({warm}).ok());
    ASSERT_TRUE(s.finish_ordered().ok());
  }
  std::vector<Tensor> want;
  std::vector<std::shared_ptr<std::atomic<bool>>> freed;
  std::vector<Tensor> got;
  for (int i = 0; i < 6; ++i) {
    const Tensor x = randn({4, 3, 8, 8}, 310 + static_cast<uint32_t>(i));
    auto r = (*cpu)->run_ordered({x});
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    want.push_back((*r)[0]);
    freed.push_back(std::make_shared<std::atomic<bool>>(false));
    {
      Tensor pinned = pinned_copy(x, freed.back());
      ASSERT_TRUE(pinned.defined()) << "cudaHostAlloc failed";
      ASSERT_TRUE(s.begin_ordered({pinned}).ok()) << "run " << i;
    }  // the caller's reference is gone; the run in flight still reads it
    EXPECT_FALSE(freed.back()->load()) << "run " << i << "'s input was freed while its upload was queued";
    if (i > 0) {
      auto r2 = s.finish_ordered();
      ASSERT_TRUE(r2.ok()) << r2.status().to_string();
      got.push_back((*r2)[0]);
    }
  }
  auto last = s.finish_ordered();
  ASSERT_TRUE(last.ok()) << last.status().to_string();
  got.push_back((*last)[0]);
  for (size_t i = 0; i < got.size(); ++i) EXPECT_LE(max_err(got[i], want[i]), 1e-4) << "run " << i;
  EXPECT_GT(max_err(got[1], want[2]), 1e-3);
  // Once a slot was refilled, the input it held went back: runs 0..3 (two slots, six runs).
  for (size_t i = 0; i < 4; ++i) EXPECT_TRUE(freed[i]->load()) << "run " << i << "'s input is still held";
}

}  // namespace
}  // namespace gpuopt
