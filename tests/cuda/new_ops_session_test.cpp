// The CUDA kernels added beyond the first op set, end to end through gpuopt::Session (the
// executor's host inputs, device outputs and copies included), against the CPU session:
// Resize -> SpaceToDepth -> InstanceNormalization -> TopK -> Cosh / GatherElements, and
// ConstantOfShape -> Trilu, Range from graph inputs. Every node must be placed on CUDA. Skips
// without a CUDA device.
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
  std::mt19937 rng(11);
  auto rnd = [&](Shape s) { return testing::random_tensor(DType::F32, std::move(s), rng); };
  Graph g;
  g.opset = 18;
  ValueId x = g.add_input("x", DType::F32, {2, 4, 6, 6});
  ValueId shape = g.add_input("shape", DType::I64, {2});
  ValueId start = g.add_input("start", DType::F32, {});
  ValueId limit = g.add_input("limit", DType::F32, {});
  ValueId scales = g.add_constant("scales", Tensor::from_vector<float>(DType::F32, {4}, {1, 1, 2, 2}));
  ValueId sc = g.add_constant("in_scale", rnd({16}));
  ValueId bi = g.add_constant("in_bias", rnd({16}));
  ValueId k = g.add_constant("k", Tensor::from_vector<int64_t>(DType::I64, {1}, {4}));
  ValueId delta = g.add_constant("delta", Tensor::scalar_f32(0.7f));

  ValueId r = g.add_node(Op::Resize, "resize", {x, kNoValue, scales}, 1, {{"mode", str_attr("linear")}})[0];
  ValueId s2d = g.add_node(Op::SpaceToDepth, "s2d", {r}, 1, {{"blocksize", int_attr(2)}})[0];
  ValueId in = g.add_node(Op::InstanceNormalization, "inorm", {s2d, sc, bi}, 1)[0];
  auto tk = g.add_node(Op::TopK, "topk", {in, k}, 2, {{"axis", int_attr(-1)}}, {"topk_v", "topk_i"});
  ValueId c = g.add_node(Op::Cosh, "cosh", {tk[0]}, 1, {}, {"cosh"})[0];
  ValueId ge = g.add_node(Op::GatherElements, "gather", {in, tk[1]}, 1, {{"axis", int_attr(-1)}}, {"gathered"})[0];
  Attribute half;
  half.kind = Attribute::Kind::kTensor;
  half.t = Tensor::from_vector<float>(DType::F32, {1}, {0.5f});
  ValueId cs = g.add_node(Op::ConstantOfShape, "fill", {shape}, 1, {{"value", half}})[0];
  ValueId tr = g.add_node(Op::Trilu, "triu", {cs}, 1, {}, {"triu"})[0];
  ValueId rg = g.add_node(Op::Range, "range", {start, limit, delta}, 1, {}, {"range"})[0];
  for (ValueId o : {c, tk[1], ge, tr, rg}) g.mark_output(o);
  return g;
}

TEST(CudaNewOpsSession, ChainMatchesCpuAndRunsOnCuda) {
  const Graph g = make_graph();
  for (const Node& n : g.nodes()) ASSERT_NE(cuda::cuda_op(n.op, g.opset_for(n)), nullptr) << n.op_type << " has no CUDA kernel";
  std::mt19937 rng(12);
  NamedTensors in = {{"x", testing::random_tensor(DType::F32, {2, 4, 6, 6}, rng)},
                     {"shape", Tensor::from_vector<int64_t>(DType::I64, {2}, {5, 7})},
                     {"start", Tensor::scalar_f32(-1.5f)},
                     {"limit", Tensor::scalar_f32(9.0f)}};
  testing::expect_cuda_matches_cpu(g, in, 1e-4);  // TopK indices exact
}

}  // namespace
}  // namespace gpuopt
