// Squeeze-excitation's mean inside the depthwise conv, end to end on CUDA: EfficientNet-shaped
// blocks (test::mini_efficientnet: depthwise 3x3 s1 and 5x5 s2, each with an SE block) run
// through Session at fp16 with the se_mean pass (the default) and without it
// (GPUOPT_DISABLE_FUSION=se_mean), three runs each (eager, capture, replay), compared with the
// f32 CPU reference and with each other. With the pass the session graph has no ReduceMean but
// the classifier's pool, its two depthwise convs write the mean, every NhwcFusedConv runs on
// "cuda", and the third run replays a CUDA graph. Batch 1 and 5, an odd spatial size, channel
// counts that take the 4-wide (c 12) and 8-wide tiles (c 16). Skips without a GPU.
#include "cuda_test_util.h"
#include "session_util.h"

#include "../passes/cnn_graphs.h"
#include "gpuopt/session.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace gpuopt {
namespace {

using testing::rel_l2;

struct Out {
  NamedTensors out;
  std::string mode, note;
  int with_mean = 0, means = 0;
};

void run_cuda(const Graph& g, const char* off, const NamedTensors& in, Out* r) {
  if (off) setenv("GPUOPT_DISABLE_FUSION", off, 1);
  SessionOptions o;
  o.device = "cuda";
  o.precision = "fp16";
  auto s = Session::from_graph(g, o);
  unsetenv("GPUOPT_DISABLE_FUSION");
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  for (const Node& n : (*s)->graph().nodes()) {
    r->with_mean += n.op_type == "NhwcFusedConv" && n.outputs.size() == 2;
    r->means += n.op_type == "ReduceMean";
  }
  RunProfile prof;
  prof.per_node = true;
  auto first = (*s)->run(in, &prof);
  ASSERT_TRUE(first.ok()) << first.status().to_string();
  for (const NodeTime& n : prof.nodes) {
    if (n.op == "NhwcFusedConv" || n.op == "ReduceMean") {
      EXPECT_EQ(n.device, "cuda") << n.op << " node '" << n.node << "' fell back to the CPU";
    }
  }
  for (int i = 0; i < 3; ++i) {
    RunProfile p;
    auto out = (*s)->run(in, &p);
    ASSERT_TRUE(out.ok()) << "run " << i << ": " << out.status().to_string();
    r->out = std::move(*out);
    r->mode = p.mode;
    r->note = p.graph_note;
  }
}

TEST(SeSession, MeanInsideTheDepthwiseConvMatchesCpuAndTheUnfusedRun) {
  const struct {
    int64_t c, hw;
  } shapes[] = {{16, 24}, {12, 29}};
  for (const auto& sh : shapes) {
    const Graph g = test::mini_efficientnet(sh.c, sh.hw);
    for (int64_t batch : {1, 5}) {
      SCOPED_TRACE("c " + std::to_string(sh.c) + " hw " + std::to_string(sh.hw) + " batch " + std::to_string(batch));
      const NamedTensors in{{"x", testing::randn({batch, 3, sh.hw, sh.hw}, 31 + static_cast<uint32_t>(batch))}};
      auto cpu = Session::from_graph(g, SessionOptions{});
      ASSERT_TRUE(cpu.ok()) << cpu.status().to_string();
      auto want = (*cpu)->run(in);
      ASSERT_TRUE(want.ok()) << want.status().to_string();
      if (!testing::have_cuda_device()) GTEST_SKIP() << "skipped: no CUDA device";
      Out fused, plain;
      ASSERT_NO_FATAL_FAILURE(run_cuda(g, nullptr, in, &fused));
      ASSERT_NO_FATAL_FAILURE(run_cuda(g, "se_mean", in, &plain));
      EXPECT_EQ(fused.with_mean, 2);
      EXPECT_EQ(fused.means, 1);  // the classifier's pool, after a 1x1 conv
      EXPECT_EQ(plain.with_mean, 0);
      EXPECT_EQ(plain.means, 3);
      EXPECT_EQ(fused.mode, "graph") << "the third run should replay a CUDA graph: " << fused.note;
      const Tensor& ref = (*want)[0].second;
      ASSERT_EQ(fused.out[0].second.shape(), ref.shape());
      const double e_fused = rel_l2(fused.out[0].second, ref), e_plain = rel_l2(plain.out[0].second, ref);
      const double e_between = rel_l2(fused.out[0].second, plain.out[0].second);
      std::printf("  c%lld hw%lld b%lld: rel L2 vs cpu f32: se_mean %.3g, unfused %.3g; between %.3g\n",
                  static_cast<long long>(sh.c), static_cast<long long>(sh.hw), static_cast<long long>(batch), e_fused,
                  e_plain, e_between);
      EXPECT_LE(e_fused, 1e-2);
      EXPECT_LE(e_plain, 1e-2);
      EXPECT_LE(e_between, 1e-2);
    }
  }
}

}  // namespace
}  // namespace gpuopt
