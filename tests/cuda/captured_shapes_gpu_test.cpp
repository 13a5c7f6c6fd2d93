// The plan cache's captured-shape list on a GPU (backends/captured_shapes.h): after a shape's
// second run (its capture) the plan file lists it; a warm start captures it again while the
// session loads, so its first run replays a graph; a malformed entry in the list is skipped and the
// rest still used; SessionOptions::defer_graph_capture leaves the capture to
// Session::capture_deferred_shape (the server's instances, after `ready`). Skips without a CUDA device.
#include "cuda_test_util.h"
#include "engine/model_builder.h"

#include "gpuopt/session.h"
#include "backends/plan_cache.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace gpuopt {
namespace {

namespace fs = std::filesystem;
using namespace gpuopt::test;

std::string read_all(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// y = relu(x); x: f32[batch, 4]
std::string relu_model(const std::string& dir) {
  auto m = make_model();
  add_input(&m, "x", onnx::TensorProto::FLOAT, {-1, 4}, {"batch", ""});
  add_node(&m, "Relu", {"x"}, {"y"});
  add_output(&m, "y");
  return write_model(m, dir);
}

std::string run_mode(Session& s, float base) {
  Tensor x = Tensor::empty(DType::F32, {2, 4});
  for (int i = 0; i < 8; ++i) x.data<float>()[i] = base + static_cast<float>(i % 2 ? i : -i);
  RunProfile prof;
  auto out = s.run({{"x", x}}, &prof);
  EXPECT_TRUE(out.ok()) << out.status().to_string();
  if (out.ok()) {
    for (int i = 0; i < 8; ++i) EXPECT_EQ((*out)[0].second.data<float>()[i], std::max(0.f, x.data<float>()[i]));
  }
  return prof.mode;
}

TEST(CapturedShapesGpu, ListedAfterCaptureAndCapturedAgainAtAWarmStart) {
  GPUOPT_REQUIRE_CUDA();
  const std::string dir = temp_dir("captured_shapes_gpu");
  const std::string model = relu_model(dir);
  SessionOptions o;
  o.device = Device::cuda(0);
  o.cache_dir = dir + "/cache";
  {
    auto s = Session::load(model, o);
    ASSERT_TRUE(s.ok()) << s.status().to_string();
    EXPECT_EQ(run_mode(**s, 0.5f), "eager");
    EXPECT_EQ(run_mode(**s, 1.5f), "capture");
  }
  fs::path file;
  for (const auto& e : fs::directory_iterator(o.cache_dir)) file = e.path();
  ASSERT_FALSE(file.empty());
  const std::string text = read_all(file);
  EXPECT_NE(text.find(" f32[2,4] = captured\n"), std::string::npos) << text;
  {
    auto s = Session::load(model, o);  // warm: f32[2,4] captured while loading
    ASSERT_TRUE(s.ok()) << s.status().to_string();
    EXPECT_EQ((*s)->plan_cache().state, "warm");
    EXPECT_EQ(run_mode(**s, -2.5f), "graph");
  }
  {
    // Deferred (the server's instances): nothing captured while loading; each
    // capture_deferred_shape() call captures one listed shape, then there is none left.
    SessionOptions d = o;
    d.defer_graph_capture = true;
    auto s = Session::load(model, d);
    ASSERT_TRUE(s.ok()) << s.status().to_string();
    EXPECT_TRUE((*s)->capture_deferred_shape());
    EXPECT_FALSE((*s)->capture_deferred_shape());
    EXPECT_EQ(run_mode(**s, -1.5f), "graph");
  }
  {
    SessionOptions d = o;
    d.defer_graph_capture = true;
    auto s = Session::load(model, d);  // not captured yet: its first run is eager
    ASSERT_TRUE(s.ok()) << s.status().to_string();
    EXPECT_EQ(run_mode(**s, -0.5f), "eager");
  }
  // A malformed entry (valid checksum, as a file written by a broken build would have) is skipped.
  auto parsed = parse_plan_cache(text);
  ASSERT_TRUE(parsed.ok()) << parsed.status().to_string();
  auto [key, entries] = std::move(parsed).value();
  entries["graph " + key.model + " f32[2,"] = "captured";
  ASSERT_TRUE(save_plan_cache(o.cache_dir, key, entries).ok());
  {
    auto s = Session::load(model, o);
    ASSERT_TRUE(s.ok()) << s.status().to_string();
    EXPECT_EQ((*s)->plan_cache().state, "warm");
    EXPECT_EQ(run_mode(**s, 3.5f), "graph");
  }
  fs::remove_all(dir);
}

// An input already in page-locked memory (the server's pooled request bodies) is copied to the
// device from where it is (Staging::upload); eager, captured and replayed runs all read it right.
TEST(CapturedShapesGpu, PinnedHostInputsGoStraightUp) {
  GPUOPT_REQUIRE_CUDA();
  const std::string dir = temp_dir("pinned_inputs_gpu");
  SessionOptions o;
  o.device = Device::cuda(0);
  auto s = Session::load(relu_model(dir), o);
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  void* p = nullptr;
  ASSERT_EQ(cudaHostAlloc(&p, 64 * sizeof(float), cudaHostAllocPortable), cudaSuccess);
  auto storage = std::make_shared<Storage>();
  storage->data = p;
  storage->bytes = 64 * sizeof(float);
  storage->deleter = [](void* q) { cudaFreeHost(q); };
  Tensor x = Tensor::wrap(DType::F32, {16, 4}, storage, 0);
  for (int run = 0; run < 4; ++run) {
    for (int i = 0; i < 64; ++i) x.data<float>()[i] = static_cast<float>((i * 7 + run * 3) % 11) - 5.f;
    RunProfile prof;
    auto out = (*s)->run({{"x", x}}, &prof);
    ASSERT_TRUE(out.ok()) << out.status().to_string();
    for (int i = 0; i < 64; ++i) EXPECT_EQ((*out)[0].second.data<float>()[i], std::max(0.f, x.data<float>()[i])) << run;
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace gpuopt
