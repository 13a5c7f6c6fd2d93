// The depthwise conv's input activation (dw_prologue pass), end to end on CUDA: the mini
// EfficientNet (the expand conv's SiLU into the 5x5 s2 depthwise conv that also writes the SE
// mean) and a MobileNetV3-shaped block (a 1x1 expand conv + HardSwish into a 3x3 s1 depthwise
// conv) run through Session at fp16 with the pass (the default) and without it
// (GPUOPT_DISABLE_FUSION=dw_prologue), three runs each (eager, capture, replay), compared with the
// f32 CPU reference and with each other. With the pass the depthwise conv carries the
// activation, every NhwcFusedConv runs on "cuda", and the third run replays a CUDA graph.
// Skips without a GPU.
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
  int prologues = 0;
};

void run_cuda(const Graph& g, const char* off, const NamedTensors& in, Out* r) {
  if (off) setenv("GPUOPT_DISABLE_FUSION", off, 1);
  SessionOptions o;
  o.device = "cuda";
  o.precision = "fp16";
  auto s = Session::from_graph(g, o);
  unsetenv("GPUOPT_DISABLE_FUSION");
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  for (const Node& n : (*s)->graph().nodes())
    r->prologues += n.op_type == "NhwcFusedConv" && !n.attr_s("input_activation", "").empty();
  RunProfile prof;
  prof.per_node = true;
  auto first = (*s)->run(in, &prof);
  ASSERT_TRUE(first.ok()) << first.status().to_string();
  for (const NodeTime& n : prof.nodes) {
    if (n.op == "NhwcFusedConv") {
      EXPECT_EQ(n.device, "cuda") << "node '" << n.node << "' fell back to the CPU";
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

// x [N, 8, hw, hw] -> 1x1 expand to 24 + HardSwish -> depthwise 3x3 + Relu -> 1x1 projection -> head.
Graph hardswish_block(int64_t hw) {
  test::Builder b;
  ValueId x = b.g.add_input("x", DType::F32, {kFirstSymbolDim, 8, hw, hw});
  ValueId e = b.op(Op::HardSwish, {b.conv(x, 8, 24, 1, 0, 1)});
  ValueId d = b.relu(b.conv(e, 24, 24, 3, 1, 1, 24));
  b.output(b.head(b.conv(d, 24, 16, 1, 0, 1), 16, 4));
  return b.done();
}

TEST(DwPrologueSession, MatchesCpuAndTheUnfusedRun) {
  const struct {
    const char* what;
    Graph g;
    int64_t cin, hw;
  } models[] = {{"mini efficientnet c16", test::mini_efficientnet(16, 24), 3, 24},
                {"mini efficientnet c12 odd", test::mini_efficientnet(12, 29), 3, 29},
                {"hardswish block", hardswish_block(13), 8, 13}};
  for (const auto& m : models) {
    for (int64_t batch : {1, 5}) {
      SCOPED_TRACE(std::string(m.what) + " batch " + std::to_string(batch));
      const NamedTensors in{{"x", testing::randn({batch, m.cin, m.hw, m.hw}, 41 + static_cast<uint32_t>(batch))}};
      auto cpu = Session::from_graph(m.g, SessionOptions{});
      ASSERT_TRUE(cpu.ok()) << cpu.status().to_string();
      auto want = (*cpu)->run(in);
      ASSERT_TRUE(want.ok()) << want.status().to_string();
      if (!testing::have_cuda_device()) GTEST_SKIP() << "skipped: no CUDA device";
      Out fused, plain;
      ASSERT_NO_FATAL_FAILURE(run_cuda(m.g, nullptr, in, &fused));
      ASSERT_NO_FATAL_FAILURE(run_cuda(m.g, "dw_prologue", in, &plain));
      EXPECT_EQ(fused.prologues, 1);
      EXPECT_EQ(plain.prologues, 0);
      EXPECT_EQ(fused.mode, "graph") << "the third run should replay a CUDA graph: " << fused.note;
      const Tensor& ref = (*want)[0].second;
      ASSERT_EQ(fused.out[0].second.shape(), ref.shape());
      const double e_fused = rel_l2(fused.out[0].second, ref), e_plain = rel_l2(plain.out[0].second, ref);
      const double e_between = rel_l2(fused.out[0].second, plain.out[0].second);
      std::printf("  %s b%lld: rel L2 vs cpu f32: dw_prologue %.3g, unfused %.3g; between %.3g\n", m.what,
                  static_cast<long long>(batch), e_fused, e_plain, e_between);
      EXPECT_LE(e_fused, 1e-2);
      EXPECT_LE(e_plain, 1e-2);
      EXPECT_LE(e_between, 1e-2);
    }
  }
}

}  // namespace
}  // namespace gpuopt
