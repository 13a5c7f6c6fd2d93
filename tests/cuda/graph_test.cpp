// CUDA graphs in a CUDA session: the first run of an input shape goes node by node, the second
// is captured, later ones replay it. Replays must read each run's new inputs (not the captured
// run's), match the CPU reference, keep one graph per shape, and a run that cannot be captured
// (a CPU node reading device data) must stay eager with a reason. Shape arithmetic runs on the
// host on purpose. Per-node profiling times every node. Every test skips without a CUDA device.
#include "cuda_test_util.h"
#include "session_util.h"

#include "backends/backend.h"
#include "gpuopt/session.h"
#include "ir/graph.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

namespace gpuopt {
namespace {

using testing::randn;

Attribute ints(std::vector<int64_t> v) { return testing::ints_attr(std::move(v)); }
Attribute int1(int64_t v) { return testing::int_attr(v); }

// x[N,3,8,8] -> Conv(3->4, 3x3, pad 1) -> Relu -> Reshape to [N, 256] where the target shape is
// computed from Shape(x) (Shape -> Gather -> Unsqueeze -> Concat: shape arithmetic) -> MatMul
// [256,10] -> Softmax -> y[N,10].
Graph make_model() {
  Graph g;
  g.opset = 17;
  ValueId x = g.add_input("x", DType::F32, {g.symbol_dim("N"), 3, 8, 8});
  ValueId w = g.add_constant("w", randn({4, 3, 3, 3}, 1, 0.3f));
  ValueId fc = g.add_constant("fc", randn({256, 10}, 2, 0.1f));
  ValueId zero = g.add_constant("zero", Tensor::from_vector<int64_t>(DType::I64, {}, {0}));
  ValueId axes = g.add_constant("axes", Tensor::from_vector<int64_t>(DType::I64, {1}, {0}));
  ValueId rest = g.add_constant("rest", Tensor::from_vector<int64_t>(DType::I64, {1}, {256}));
  // No kernel_shape: optional in ONNX (the weight gives it); the CUDA Conv must take it anyway.
  ValueId c = g.add_node(Op::Conv, "conv", {x, w}, 1, {{"pads", ints({1, 1, 1, 1})}})[0];
  ValueId r = g.add_node(Op::Relu, "relu", {c}, 1)[0];
  ValueId shp = g.add_node(Op::Shape, "shape", {r}, 1)[0];
  ValueId n = g.add_node(Op::Gather, "batch", {shp, zero}, 1, {{"axis", int1(0)}})[0];
  ValueId n1 = g.add_node(Op::Unsqueeze, "batch1", {n, axes}, 1)[0];
  ValueId target = g.add_node(Op::Concat, "target", {n1, rest}, 1, {{"axis", int1(0)}})[0];
  ValueId flat = g.add_node(Op::Reshape, "flat", {r, target}, 1)[0];
  ValueId m = g.add_node(Op::MatMul, "fc", {flat, fc}, 1)[0];
  ValueId y = g.add_node(Op::Softmax, "softmax", {m}, 1, {{"axis", int1(-1)}}, {"y"})[0];
  g.mark_output(y);
  return g;
}

std::unique_ptr<Session> session(const Graph& g, const Device& device, bool graphs = true) {
  SessionOptions o;
  o.device = device;
  o.cuda_graphs = graphs;
  auto s = Session::from_graph(g, o);
  EXPECT_TRUE(s.ok()) << s.status().to_string();
  return s.ok() ? std::move(*s) : nullptr;
}

double max_err(const Tensor& a, const Tensor& b) {
  double m = 0;
  for (int64_t i = 0; i < a.numel(); ++i) m = std::max(m, std::abs(a.get_f64(i) - b.get_f64(i)));
  return m;
}

struct Ran {
  Tensor y;
  RunProfile prof;
};
Ran run(const Session& s, const Tensor& x) {
  Ran r;
  auto out = s.run({{"x", x}}, &r.prof);
  EXPECT_TRUE(out.ok()) << out.status().to_string();
  if (out.ok()) r.y = (*out)[0].second;
  return r;
}

// The test model itself is valid and runs on the CPU reference (no device needed).
TEST(CudaGraphs, ModelRunsOnTheCpuReference) {
  const Graph g = make_model();
  auto cpu = session(g, "cpu");
  ASSERT_TRUE(cpu);
  Ran r = run(*cpu, randn({2, 3, 8, 8}, 1));
  ASSERT_EQ(r.y.shape(), (Shape{2, 10}));
  double row = 0;
  for (int64_t j = 0; j < 10; ++j) row += r.y.get_f64(j);
  EXPECT_NEAR(row, 1.0, 1e-5);  // a softmax row
}

TEST(CudaGraphs, ShapeArithmeticIsPlacedOnTheHost) {
  GPUOPT_REQUIRE_CUDA();
  Graph g = make_model();
  ASSERT_TRUE(g.topo_sort().ok());
  ASSERT_TRUE(g.infer_shapes().ok());
  auto b = create_backend("cuda");
  ASSERT_TRUE(b.ok()) << b.status().to_string();
  const std::vector<NodePlace> p = (*b)->place(g);
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    const std::string& op = g.nodes()[i].op_type;
    const bool shape_math = op == "Shape" || op == "Gather" || op == "Unsqueeze" || op == "Concat";
    EXPECT_EQ(p[i], shape_math ? NodePlace::kHostShapes : NodePlace::kDevice) << g.nodes()[i].name;
  }
}

// Eager, capture, replay; each run with new data must give the CPU's answer for that data.
TEST(CudaGraphs, ReplayReadsNewInputsAndMatchesCpu) {
  GPUOPT_REQUIRE_CUDA();
  const Graph g = make_model();
  auto gpu = session(g, "cuda");
  auto cpu = session(g, "cpu");
  ASSERT_TRUE(gpu && cpu);
  const char* want_mode[] = {"eager", "capture", "graph", "graph", "graph"};
  for (int i = 0; i < 5; ++i) {
    const Tensor x = randn({2, 3, 8, 8}, 100 + i);
    Ran got = run(*gpu, x);
    Ran ref = run(*cpu, x);
    EXPECT_EQ(got.prof.mode, want_mode[i]) << "run " << i << ": " << got.prof.graph_note;
    EXPECT_GT(got.prof.device_us, 0.0) << "run " << i;  // the compute's device time, from events
    ASSERT_EQ(got.y.shape(), ref.y.shape());
    EXPECT_LE(max_err(got.y, ref.y), 1e-5) << "run " << i << " (" << got.prof.mode << ")";
    if (i > 0) {
      // The inputs differ from run to run, and so must the outputs: a replay that kept the
      // captured run's inputs would repeat its answer.
      EXPECT_GT(max_err(got.y, run(*cpu, randn({2, 3, 8, 8}, 100 + i - 1)).y), 1e-4);
    }
  }
  // A new batch size is a new shape: eager, then its own capture; the first shape still replays.
  EXPECT_EQ(run(*gpu, randn({3, 3, 8, 8}, 7)).prof.mode, "eager");
  Ran b3 = run(*gpu, randn({3, 3, 8, 8}, 8));
  EXPECT_EQ(b3.prof.mode, "capture");
  EXPECT_LE(max_err(b3.y, run(*cpu, randn({3, 3, 8, 8}, 8)).y), 1e-5);
  EXPECT_EQ(run(*gpu, randn({2, 3, 8, 8}, 9)).prof.mode, "graph");
}

TEST(CudaGraphs, OffWhenDisabledOrUnderAMemoryLimit) {
  GPUOPT_REQUIRE_CUDA();
  const Graph g = make_model();
  auto off = session(g, "cuda", /*graphs=*/false);
  ASSERT_TRUE(off);
  SessionOptions lim;
  lim.device = "cuda";
  lim.memory_limit = size_t{64} << 20;
  auto limited = Session::from_graph(g, lim);
  ASSERT_TRUE(limited.ok());
  auto cpu = session(g, "cpu");
  for (int i = 0; i < 3; ++i) {
    const Tensor x = randn({2, 3, 8, 8}, 200 + i);
    Ran a = run(*off, x), b = run(**limited, x);
    EXPECT_EQ(a.prof.mode, "eager");
    EXPECT_EQ(b.prof.mode, "eager");
    EXPECT_LE(max_err(a.y, run(*cpu, x).y), 1e-5);
  }
}

// Det has no CUDA kernel and reads the Relu's device output on the host: the capture stops
// there, the shape is remembered as eager, and results stay right.
TEST(CudaGraphs, RunThatReadsDeviceDataOnTheHostStaysEager) {
  GPUOPT_REQUIRE_CUDA();
  const Graph g = testing::relu_det_double(4);
  auto gpu = session(g, "cuda");
  auto cpu = session(g, "cpu");
  ASSERT_TRUE(gpu && cpu);
  for (int i = 0; i < 4; ++i) {
    const Tensor in = randn({4, 3, 3}, 300 + i);
    Ran a = run(*gpu, in);
    auto want = cpu->run({{"x", in}});
    ASSERT_TRUE(want.ok());
    EXPECT_EQ(a.prof.mode, "eager") << "run " << i;
    if (i >= 1) { EXPECT_NE(a.prof.graph_note.find("det"), std::string::npos) << a.prof.graph_note; }
    EXPECT_LE(max_err(a.y, (*want)[0].second), 1e-5);
  }
}

// Shape arithmetic whose result is larger than a kernel-parameter upload (64 KB): Range over
// x's width, 32768 int64 values, computed on the host and added to x on the GPU. It depends on
// the input shape alone, so the graph copies it up from a pinned buffer of its own on every
// replay; this used to end the capture (BERT's token-type ids at batch 256, GPT-2's causal mask).
TEST(CudaGraphs, LargeShapeDerivedValuesAreCaptured) {
  GPUOPT_REQUIRE_CUDA();
  constexpr int64_t kWidth = 32768;
  Graph g;
  g.opset = 17;
  ValueId x = g.add_input("x", DType::F32, {g.symbol_dim("N"), kWidth});
  ValueId one = g.add_constant("one", Tensor::from_vector<int64_t>(DType::I64, {}, {1}));
  ValueId zero = g.add_constant("zero", Tensor::from_vector<int64_t>(DType::I64, {}, {0}));
  ValueId shp = g.add_node(Op::Shape, "shape", {x}, 1)[0];
  ValueId width = g.add_node(Op::Gather, "width", {shp, one}, 1, {{"axis", int1(0)}})[0];
  ValueId r = g.add_node(Op::Range, "range", {zero, width, one}, 1)[0];
  ValueId rf = g.add_node(Op::Cast, "to_float", {r}, 1, {{"to", int1(static_cast<int64_t>(DType::F32))}})[0];
  ValueId y = g.add_node(Op::Add, "add", {x, rf}, 1, {}, {"y"})[0];
  g.mark_output(y);
  auto gpu = session(g, "cuda");
  auto cpu = session(g, "cpu");
  ASSERT_TRUE(gpu && cpu);
  const char* want_mode[] = {"eager", "capture", "graph", "graph"};
  for (int i = 0; i < 4; ++i) {
    const Tensor in = randn({2, kWidth}, 400 + i);
    Ran a = run(*gpu, in);
    EXPECT_EQ(a.prof.mode, want_mode[i]) << "run " << i << ": " << a.prof.graph_note;
    EXPECT_LE(max_err(a.y, run(*cpu, in).y), 1e-5) << "run " << i;
  }
}

TEST(CudaGraphs, PerNodeProfileTimesEveryNode) {
  GPUOPT_REQUIRE_CUDA();
  const Graph g = make_model();
  auto gpu = session(g, "cuda");
  ASSERT_TRUE(gpu);
  RunProfile p;
  p.per_node = true;
  auto out = gpu->run({{"x", randn({2, 3, 8, 8}, 5)}}, &p);
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  EXPECT_EQ(p.mode, "eager");
  ASSERT_EQ(p.nodes.size(), gpu->graph().nodes().size());
  for (const NodeTime& n : p.nodes) {
    EXPECT_GT(n.wall_us, 0.0) << n.node;
    if (n.op == "Conv" || n.op == "FusedConv" || n.op == "MatMul") {  // conv+relu arrives fused
      EXPECT_EQ(n.device, "cuda") << n.node;
      EXPECT_GT(n.gpu_us, 0.0) << n.node;
    }
    if (n.op == "Shape") {
      EXPECT_EQ(n.device, "cpu") << n.node;
    }
  }
}

}  // namespace
}  // namespace gpuopt
