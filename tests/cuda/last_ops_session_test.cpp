// The last ops that used to fall back to the CPU inside a CUDA session, end to end through
// gpuopt::Session against the CPU session: Sum / Mean / Max with 3 and 4 inputs broadcast
// together (the first one smaller than the output), Resize cubic with antialias and cubic with
// align_corners, and NonZero, whose output shape the executor learns from the data. Every node
// must be placed on CUDA (the kernels' `supports` says yes). Skips without a CUDA device.
#include "cuda_test_util.h"
#include "session_util.h"

#include "backends/cuda/cuda_ops.h"
#include "gpuopt/session.h"
#include "ir/graph.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

namespace gpuopt {
namespace {

using testing::int_attr;
using testing::str_attr;

Graph make_graph() {
  Graph g;
  g.opset = 19;
  ValueId x = g.add_input("x", DType::F32, {2, 3, 8, 9});
  ValueId y = g.add_input("y", DType::F32, {9});
  ValueId z = g.add_input("z", DType::F32, {3, 1, 9});
  ValueId scales = g.add_constant("scales", Tensor::from_vector<float>(DType::F32, {4}, {1, 1, 0.5f, 0.7f}));
  ValueId sizes = g.add_constant("sizes", Tensor::from_vector<int64_t>(DType::I64, {4}, {2, 3, 13, 5}));
  ValueId zero = g.add_constant("zero", Tensor::scalar_f32(0.0f));

  ValueId mean = g.add_node(Op::Mean, "mean", {x, y, z}, 1)[0];
  ValueId sum = g.add_node(Op::Sum, "sum", {y, z, x, y}, 1)[0];
  ValueId mx = g.add_node(Op::Max, "max", {z, x, y}, 1, {}, {"max"})[0];
  ValueId aa = g.add_node(Op::Resize, "resize_aa", {mean, kNoValue, scales}, 1,
                          {{"mode", str_attr("cubic")}, {"antialias", int_attr(1)}}, {"resize_aa"})[0];
  ValueId cu = g.add_node(Op::Resize, "resize_cubic", {sum, kNoValue, kNoValue, sizes}, 1,
                          {{"mode", str_attr("cubic")}, {"coordinate_transformation_mode", str_attr("align_corners")}},
                          {"resize_cubic"})[0];
  ValueId pos = g.add_node(Op::Greater, "positive", {aa, zero}, 1)[0];
  ValueId nz = g.add_node(Op::NonZero, "nonzero", {pos}, 1, {}, {"nonzero"})[0];
  for (ValueId o : {mx, aa, cu, nz}) g.mark_output(o);
  return g;
}

TEST(CudaLastOpsSession, VariadicResizeNonZeroMatchCpuAndRunOnCuda) {
  Graph g = make_graph();
  ASSERT_TRUE(g.infer_shapes().ok());
  for (const Node& n : g.nodes()) {
    const cuda::CudaOpEntry* e = cuda::cuda_op(n.op, g.opset_for(n));
    ASSERT_NE(e, nullptr) << n.op_type << " has no CUDA kernel";
    std::vector<DType> dts;
    for (ValueId v : n.inputs) dts.push_back(v == kNoValue ? DType::Undefined : g.value(v).info.dtype);
    EXPECT_TRUE(!e->supports || e->supports(n, dts)) << n.name << " would fall back to the CPU";
  }
  std::mt19937 rng(5);
  NamedTensors in = {{"x", testing::random_tensor(DType::F32, {2, 3, 8, 9}, rng)},
                     {"y", testing::random_tensor(DType::F32, {9}, rng)},
                     {"z", testing::random_tensor(DType::F32, {3, 1, 9}, rng)}};
  testing::expect_cuda_matches_cpu(g, in, 1e-5);  // NonZero indices exact
}

}  // namespace
}  // namespace gpuopt
