// Kernel settings per session on the GPU (gpuopt/kernel_settings.h): sessions of one process with
// different settings, alive together, each run their own kernels (checked against the CPU
// reference) and write plan caches of their own. Every test skips without a CUDA device.
#include "cuda_test_util.h"
#include "engine/model_builder.h"
#include "session_util.h"

#include "gpuopt/session.h"
#include "ir/graph.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <random>

namespace gpuopt {
namespace {

using testing::int_attr;
using testing::random_tensor;
using testing::rel_l2;

// Attention over q, k, v [2, 4, 32, 64] (head 64, 32 keys: the flash kernel's shape under auto).
Graph attention_graph() {
  Graph g;
  g.opset = 23;
  std::vector<ValueId> in;
  for (const char* n : {"q", "k", "v"}) in.push_back(g.add_input(n, DType::F32, {2, 4, 32, 64}));
  g.mark_output(g.add_node(Op::Attention, "attn", in, 1, {}, {"y"})[0]);
  return g;
}

TEST(KernelSettingsCuda, SessionsWithOtherAttentionKernelsRunSideBySide) {
  GPUOPT_REQUIRE_CUDA();
  std::mt19937 rng(7);
  const NamedTensors in{{"q", random_tensor(DType::F32, {2, 4, 32, 64}, rng)},
                        {"k", random_tensor(DType::F32, {2, 4, 32, 64}, rng)},
                        {"v", random_tensor(DType::F32, {2, 4, 32, 64}, rng)}};
  auto ref = Session::from_graph(attention_graph(), {});
  ASSERT_TRUE(ref.ok()) << ref.status().to_string();
  auto want = (*ref)->run(in);
  ASSERT_TRUE(want.ok());
  using AK = KernelSettings::AttentionKernel;
  std::vector<std::unique_ptr<Session>> sessions;
  for (AK k : {AK::kScalar, AK::kWmma, AK::kFa, AK::kCudnn, AK::kAuto}) {
    SessionOptions o;
    o.device = "cuda";
    o.precision = "fp16";
    o.kernels = KernelSettings{};
    o.kernels->attention_kernel = k;
    auto s = Session::from_graph(attention_graph(), o);
    ASSERT_TRUE(s.ok()) << s.status().to_string();
    sessions.push_back(std::move(*s));
  }
  for (int round = 0; round < 3; ++round)  // eager, capture, replay; the sessions interleaved
    for (size_t i = 0; i < sessions.size(); ++i) {
      auto got = sessions[i]->run(in);
      ASSERT_TRUE(got.ok()) << got.status().to_string();
      EXPECT_LT(rel_l2(got->at(0).second, want->at(0).second), 1e-2) << "session " << i << " round " << round;
    }
}

TEST(KernelSettingsCuda, OtherSettingsWriteTheirOwnPlanCache) {
  GPUOPT_REQUIRE_CUDA();
  using namespace gpuopt::test;
  const std::string dir = temp_dir("kernel_settings_cache");
  auto m = make_model();
  add_input(&m, "x", onnx::TensorProto::FLOAT, {8, 64});
  std::vector<float> w(64 * 64);
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i % 13) * 0.01f - 0.06f;
  *m.mutable_graph()->add_initializer() = float_tensor("w", {64, 64}, w);
  add_node(&m, "MatMul", {"x", "w"}, {"y"});
  add_output(&m, "y");
  const std::string path = write_model(m, dir);
  std::vector<std::string> files;
  for (bool autotune : {true, false}) {
    SessionOptions o;
    o.device = "cuda";
    o.cache_dir = dir + "/plans";
    o.kernels = KernelSettings{};
    o.kernels->matmul_autotune = autotune;
    auto s = Session::load(path, o);
    ASSERT_TRUE(s.ok()) << s.status().to_string();
    EXPECT_EQ((*s)->plan_cache().state, "cold");
    files.push_back((*s)->plan_cache().path);
    ASSERT_TRUE((*s)->run({{"x", Tensor::zeros(DType::F32, {8, 64})}}).ok());
  }
  EXPECT_NE(files[0], files[1]);
  for (const std::string& f : files) EXPECT_TRUE(std::filesystem::exists(f)) << f;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace gpuopt
