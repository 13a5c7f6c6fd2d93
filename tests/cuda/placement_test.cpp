// The CUDA backend's placement decision and its CPU-fallback warning (backends/cuda/placement.h),
// from the static op table: no device needed. The warning names each fallback node and the reason
// the decision gave; nodes the GPU runs, and shape arithmetic kept on the host on purpose, are
// not in it.
#include "backends/cuda/placement.h"

#include <gtest/gtest.h>

namespace gpuopt {
namespace {

using cuda::cpu_fallback_warnings;
using cuda::cuda_fallback_reason;
using cuda::cuda_placement;

AttributeMap conv_attrs(std::vector<int64_t> k, std::vector<int64_t> pads) {
  return {{"kernel_shape", ints_attr(std::move(k))}, {"pads", ints_attr(std::move(pads))}};
}

// x -> Conv (1-D, 3-D or asymmetric) etc.; returns the node index of the added node.
size_t add(Graph& g, Op op, const std::string& name, std::vector<ValueId> in, AttributeMap attrs = {}) {
  g.add_node(op, name, std::move(in), 1, std::move(attrs));
  return g.nodes().size() - 1;
}

TEST(CudaPlacement, ConvolutionsOfEveryRankRunOnTheGpu) {
  Graph g;
  const ValueId x1 = g.add_input("x1", DType::F16, {1, 80, 3000});
  const ValueId w1 = g.add_input("w1", DType::F16, {64, 80, 3});
  const ValueId x3 = g.add_input("x3", DType::F32, {1, 3, 8, 9, 10});
  const ValueId w3 = g.add_input("w3", DType::F32, {8, 3, 3, 3, 3});
  const ValueId wt1 = g.add_input("wt1", DType::F16, {80, 16, 4});
  const ValueId wt3 = g.add_input("wt3", DType::F32, {3, 4, 2, 2, 2});
  const size_t c1 = add(g, Op::Conv, "conv1d", {x1, w1}, conv_attrs({3}, {1, 1}));
  const size_t c3 = add(g, Op::Conv, "conv3d", {x3, w3}, conv_attrs({3, 3, 3}, {1, 1, 1, 1, 1, 1}));
  // No kernel_shape: the weight's spatial dims give the rank.
  const size_t c3k = add(g, Op::Conv, "conv3d_no_kernel_shape", {x3, w3});
  const size_t t1 = add(g, Op::ConvTranspose, "convt1d", {x1, wt1},
                        {{"kernel_shape", ints_attr({4})}, {"strides", ints_attr({2})}, {"pads", ints_attr({1, 1})}});
  const size_t t3 = add(g, Op::ConvTranspose, "convt3d", {x3, wt3},
                        {{"kernel_shape", ints_attr({2, 2, 2})}, {"strides", ints_attr({2, 2, 2})}});
  for (const Node& n : g.nodes()) g.mark_output(n.outputs[0]);
  ASSERT_TRUE(g.infer_shapes().ok());
  const std::vector<NodePlace> p = cuda_placement(g);
  for (size_t i : {c1, c3, c3k, t1, t3}) {
    EXPECT_EQ(p[i], NodePlace::kDevice) << g.nodes()[i].name << ": " << cuda_fallback_reason(g.nodes()[i], g);
    EXPECT_EQ(cuda_fallback_reason(g.nodes()[i], g), "") << g.nodes()[i].name;
  }
  EXPECT_TRUE(cpu_fallback_warnings(g, p).empty());
}

TEST(CudaPlacement, ReasonsComeFromTheDecision) {
  Graph g;
  const ValueId x = g.add_input("x", DType::F32, {1, 4, 20});
  const ValueId w = g.add_input("w", DType::F32, {4, 4, 3});
  const ValueId xd = g.add_input("xd", DType::F64, {1, 4, 20});
  const ValueId wd = g.add_input("wd", DType::F64, {4, 4, 3});
  const ValueId m = g.add_input("m", DType::F32, {3, 3});
  const ValueId x4 = g.add_input("x4", DType::F32, {1, 4, 5, 5, 5, 5});
  const ValueId w4 = g.add_input("w4", DType::F32, {4, 4, 3, 3, 3, 3});
  const size_t asym = add(g, Op::Conv, "/enc/asym", {x, w}, conv_attrs({3}, {2, 0}));
  const size_t f64 = add(g, Op::Conv, "/enc/f64", {xd, wd}, conv_attrs({3}, {1, 1}));
  const size_t det = add(g, Op::Det, "/head/det", {m});
  const size_t same = add(g, Op::ConvTranspose, "/up/same", {x, w},
                          {{"kernel_shape", ints_attr({3})}, {"auto_pad", string_attr("SAME_UPPER")}});
  const size_t four = add(g, Op::Conv, "/enc/conv4d", {x4, w4}, conv_attrs({3, 3, 3, 3}, {1, 1, 1, 1, 1, 1, 1, 1}));
  for (const Node& n : g.nodes()) g.mark_output(n.outputs[0]);
  ASSERT_TRUE(g.infer_shapes().ok());
  const std::vector<NodePlace> p = cuda_placement(g);
  for (size_t i : {asym, f64, det, same, four}) EXPECT_EQ(p[i], NodePlace::kCpuFallback) << g.nodes()[i].name;

  EXPECT_EQ(cuda_fallback_reason(g.nodes()[det], g), "no CUDA kernel for Det");
  const std::string r_f64 = cuda_fallback_reason(g.nodes()[f64], g);
  EXPECT_NE(r_f64.find("does not take f64 inputs"), std::string::npos) << r_f64;
  EXPECT_NE(r_f64.find("it would take f32, f16, bf16"), std::string::npos) << r_f64;
  const std::string r_asym = cuda_fallback_reason(g.nodes()[asym], g);
  EXPECT_NE(r_asym.find("this form of Conv"), std::string::npos) << r_asym;
  EXPECT_NE(r_asym.find("pads=[2,0]"), std::string::npos) << r_asym;
  const std::string r_same = cuda_fallback_reason(g.nodes()[same], g);
  EXPECT_NE(r_same.find("auto_pad=SAME_UPPER"), std::string::npos) << r_same;
  const std::string r_four = cuda_fallback_reason(g.nodes()[four], g);
  EXPECT_NE(r_four.find("kernel_shape=[3,3,3,3]"), std::string::npos) << r_four;

  // One line per op type, in op order, each naming its nodes with their reasons.
  const std::vector<std::string> lines = cpu_fallback_warnings(g, p);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0].rfind("cuda: 3 nodes run on the CPU inside the GPU graph: [Conv] '/enc/asym' (", 0), 0u) << lines[0];
  EXPECT_NE(lines[0].find("'/enc/f64' (" + r_f64 + ")"), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find("'/enc/conv4d' (" + r_four + ")"), std::string::npos) << lines[0];
  EXPECT_EQ(lines[1], "cuda: 1 node runs on the CPU inside the GPU graph: [ConvTranspose] '/up/same' (" + r_same + ")");
  EXPECT_EQ(lines[2], "cuda: 1 node runs on the CPU inside the GPU graph: [Det] '/head/det' (no CUDA kernel for Det)");
}

TEST(CudaPlacement, ShapeArithmeticAndSupportedNodesAreNotWarnedAbout) {
  Graph g;
  const ValueId x = g.add_input("x", DType::F32, {2, 3});
  const ValueId s = g.add_node(Op::Shape, "shape", {x}, 1)[0];
  const ValueId r = g.add_node(Op::Relu, "relu", {x}, 1)[0];
  std::vector<ValueId> dets;
  const ValueId sq = g.add_input("sq", DType::F32, {3, 3});
  for (int i = 0; i < 5; ++i) dets.push_back(g.add_node(Op::Det, "det" + std::to_string(i), {sq}, 1)[0]);
  for (ValueId v : {s, r}) g.mark_output(v);
  for (ValueId v : dets) g.mark_output(v);
  ASSERT_TRUE(g.infer_shapes().ok());
  const std::vector<NodePlace> p = cuda_placement(g);
  EXPECT_EQ(p[0], NodePlace::kHostShapes);
  EXPECT_EQ(p[1], NodePlace::kDevice);
  const std::vector<std::string> lines = cpu_fallback_warnings(g, p);
  ASSERT_EQ(lines.size(), 1u);
  // The first three are named; the rest counted.
  EXPECT_EQ(lines[0],
            "cuda: 5 nodes run on the CPU inside the GPU graph: [Det] 'det0' (no CUDA kernel for Det), 'det1' (no CUDA "
            "kernel for Det), 'det2' (no CUDA kernel for Det), and 2 more");
}

}  // namespace
}  // namespace gpuopt
