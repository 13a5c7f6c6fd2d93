// Channels-last convolutions end to end (layout_nhwc + NhwcFusedConv/NhwcMaxPool on cuDNN):
// small ResNet- and MobileNetV2-shaped graphs run through Session on CUDA at fp16 and bf16,
// with the pass (the default) and without it (GPUOPT_DISABLE_FUSION=nhwc), and are compared with
// the f32 CPU reference and with each other. The runs must also really be channels-last on the
// GPU: the session graph holds NhwcFusedConv/NhwcMaxPool nodes, a profiled run shows each of
// them on "cuda" (not a CPU fallback), and the third run replays a CUDA graph. Channel counts
// multiple of 8 (cuDNN's tensor-core kernels) and not (12, 24: other kernels), a C=3 stem, and
// an odd batch. Skips with "skipped: no CUDA device" without a GPU.
#include "cuda_test_util.h"
#include "session_util.h"

#include "../passes/cnn_graphs.h"
#include "gpuopt/session.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace gpuopt {
namespace {

using testing::rel_l2;

int count(const Graph& g, const std::string& op) {
  int c = 0;
  for (const Node& n : g.nodes()) c += n.op_type == op;
  return c;
}

struct Model {
  std::string name;
  Graph graph;
  int64_t hw;
};

struct Runs {
  NamedTensors out;  // third run's outputs (a CUDA graph replay)
  std::string mode;  // the third run's RunProfile::mode
  std::string note;  // and its graph_note (why a shape runs eager)
};

// Builds a CUDA session (GPUOPT_DISABLE_FUSION=`off` while it compiles), checks where its
// channels-last nodes run, then runs it three times (eager, capture, replay).
void run_cuda(const Graph& g, const std::string& precision, const char* off, const NamedTensors& in, bool want_nhwc,
              Runs* r) {
  if (off) setenv("GPUOPT_DISABLE_FUSION", off, 1);
  SessionOptions o;
  o.device = "cuda";
  o.precision = precision;
  auto s = Session::from_graph(g, o);
  unsetenv("GPUOPT_DISABLE_FUSION");
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  const Graph& sg = (*s)->graph();
  if (want_nhwc) {
    EXPECT_GT(count(sg, "NhwcFusedConv"), 0) << "layout_nhwc did not run";
    EXPECT_EQ(count(sg, "FusedConv") + count(sg, "Conv"), 0) << "an NCHW conv is left";
  } else {
    EXPECT_EQ(count(sg, "NhwcFusedConv") + count(sg, "NhwcMaxPool"), 0) << "GPUOPT_DISABLE_FUSION=nhwc ignored";
  }
  RunProfile prof;
  prof.per_node = true;
  auto first = (*s)->run(in, &prof);
  ASSERT_TRUE(first.ok()) << first.status().to_string();
  for (const NodeTime& n : prof.nodes) {
    if (n.op == "NhwcFusedConv" || n.op == "NhwcMaxPool" || n.op == "ReduceMean" || n.op == "Transpose") {
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

class NhwcSession : public ::testing::TestWithParam<std::string> {};

TEST_P(NhwcSession, MatchesCpuWithAndWithoutThePass) {
  const std::string precision = GetParam();
  // bf16 keeps 8 mantissa bits; these nets chain 6 convs (the CNN session test allows 1e-2 for
  // a single conv at either precision).
  const double tol = precision == "bf16" ? 2e-2 : 1e-2;
  const Model models[] = {
      {"resnet c16", test::mini_resnet(16, 32), 32},
      {"resnet c12", test::mini_resnet(12, 29), 29},
      {"mobilenet_v2 c16", test::mini_mobilenet(16, 32), 32},
      {"mobilenet_v2 c12", test::mini_mobilenet(12, 23), 23},
  };
  for (const Model& m : models) {
    for (int64_t batch : {2, 5}) {
      SCOPED_TRACE(m.name + " batch " + std::to_string(batch) + " " + precision);
      const NamedTensors in{{"x", testing::randn({batch, 3, m.hw, m.hw}, 17 + static_cast<uint32_t>(batch))}};
      SessionOptions oc;
      auto cpu = Session::from_graph(m.graph, oc);
      ASSERT_TRUE(cpu.ok()) << cpu.status().to_string();
      auto want = (*cpu)->run(in);
      ASSERT_TRUE(want.ok()) << want.status().to_string();
      if (!testing::have_cuda_device()) GTEST_SKIP() << "skipped: no CUDA device";
      Runs nhwc, nchw;
      ASSERT_NO_FATAL_FAILURE(run_cuda(m.graph, precision, nullptr, in, true, &nhwc));
      ASSERT_NO_FATAL_FAILURE(run_cuda(m.graph, precision, "nhwc", in, false, &nchw));
      EXPECT_EQ(nhwc.mode, "graph") << "the third run should replay a CUDA graph: " << nhwc.note;
      for (size_t o = 0; o < want->size(); ++o) {
        const Tensor& ref = (*want)[o].second;
        ASSERT_EQ(nhwc.out[o].second.shape(), ref.shape());
        const double e_nhwc = rel_l2(nhwc.out[o].second, ref), e_nchw = rel_l2(nchw.out[o].second, ref);
        const double e_between = rel_l2(nhwc.out[o].second, nchw.out[o].second);
        std::printf("  %s b%lld %s: rel L2 vs cpu: nhwc %.3g, nchw %.3g; nhwc vs nchw %.3g\n", m.name.c_str(),
                    static_cast<long long>(batch), precision.c_str(), e_nhwc, e_nchw, e_between);
        EXPECT_LE(e_nhwc, tol);
        EXPECT_LE(e_nchw, tol);
        EXPECT_LE(e_between, tol);
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Precisions, NhwcSession, ::testing::Values("fp16", "bf16"));

}  // namespace
}  // namespace gpuopt
