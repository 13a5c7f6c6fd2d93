// The fp16/bf16 conversion pass, checked on the CPU reference: the converted graph keeps f32 at
// its boundary, computes inside in the low type, and agrees with the f32 graph within the
// issue's relative L2 bound (1e-2).
#include "backends/backend.h"
#include "passes/precision.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

namespace gpuopt {
namespace {

Tensor random_tensor(DType dt, Shape shape, std::mt19937& rng, float scale = 1.0f) {
  Tensor t = Tensor::empty(dt, std::move(shape));
  std::normal_distribution<float> n(0.f, scale);
  for (int64_t i = 0; i < t.numel(); ++i) t.set_f64(i, n(rng));
  return t;
}

// x[2,3,9,9] -> Conv(3->8, 3x3, pad 1) -> Relu -> Sigmoid -> y ; plus a ReduceSum-free path.
Graph make_graph(std::mt19937& rng) {
  Graph g;
  g.opset = 17;
  ValueId x = g.add_input("x", DType::F32, {2, 3, 9, 9});
  ValueId w = g.add_constant("w", random_tensor(DType::F32, {8, 3, 3, 3}, rng, 0.3f));
  ValueId b = g.add_constant("b", random_tensor(DType::F32, {8}, rng, 0.1f));
  AttributeMap conv;
  conv["pads"].kind = Attribute::Kind::kInts;
  conv["pads"].ints = {1, 1, 1, 1};
  ValueId c = g.add_node(Op::Conv, "conv", {x, w, b}, 1, conv)[0];
  ValueId r = g.add_node(Op::Relu, "relu", {c}, 1)[0];
  ValueId y = g.add_node(Op::Sigmoid, "sig", {r}, 1, {}, {"y"})[0];
  g.mark_output(y);
  EXPECT_TRUE(g.topo_sort().ok());
  EXPECT_TRUE(g.infer_shapes().ok());
  return g;
}

double rel_l2(const Tensor& a, const Tensor& b) {
  double num = 0, den = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    const double d = a.get_f64(i) - b.get_f64(i);
    num += d * d;
    den += b.get_f64(i) * b.get_f64(i);
  }
  return std::sqrt(num / den);
}

class Precision : public ::testing::TestWithParam<DType> {};

TEST_P(Precision, KeepsF32BoundaryAndMatchesF32Graph) {
  const DType low = GetParam();
  std::mt19937 rng(1234);
  Graph ref = make_graph(rng);
  Graph lp = ref;
  auto st = convert_precision(&lp, low);
  ASSERT_TRUE(st.ok()) << st.status().to_string();

  // Boundary: same input/output names and f32 types; weights converted once on the host.
  ASSERT_EQ(lp.outputs().size(), 1u);
  EXPECT_EQ(lp.value(lp.outputs()[0]).name, "y");
  EXPECT_EQ(lp.value(lp.outputs()[0]).info.dtype, DType::F32);
  EXPECT_EQ(lp.value(lp.inputs()[0]).info.dtype, DType::F32);
  int low_consts = 0, casts = 0;
  for (const Value& v : lp.values())
    if (v.constant && v.constant->dtype() == low) ++low_consts;
  for (const Node& n : lp.nodes()) {
    casts += n.op_type == "Cast";
    if (n.op_type == "Conv") { EXPECT_EQ(lp.value(n.outputs[0]).info.dtype, low) << n.name; }
    // bf16 keeps everything but the tensor-core ops in f32 (autocast's split); fp16 does not.
    if (n.op_type == "Relu" || n.op_type == "Sigmoid") {
      EXPECT_EQ(lp.value(n.outputs[0]).info.dtype, low == DType::BF16 ? DType::F32 : low) << n.name;
    }
  }
  EXPECT_EQ(low_consts, 2);
  EXPECT_EQ(casts, 2);  // x -> low, and low -> y (fp16) or conv -> f32 (bf16)

  auto cpu = make_cpu_backend();
  auto e_ref = cpu->compile(ref, {});
  auto e_lp = cpu->compile(lp, {});
  ASSERT_TRUE(e_ref.ok() && e_lp.ok());
  Tensor x = random_tensor(DType::F32, {2, 3, 9, 9}, rng);
  auto y_ref = (*e_ref)->run({x}, {});
  auto y_lp = (*e_lp)->run({x}, {});
  ASSERT_TRUE(y_ref.ok()) << y_ref.status().to_string();
  ASSERT_TRUE(y_lp.ok()) << y_lp.status().to_string();
  ASSERT_EQ((*y_lp)[0].dtype(), DType::F32);
  const double err = rel_l2((*y_lp)[0], (*y_ref)[0]);
  EXPECT_LE(err, 1e-2);
  EXPECT_GT(err, 0.0) << "identical results: the low-precision graph did not compute in low precision";
}

INSTANTIATE_TEST_SUITE_P(LowTypes, Precision, ::testing::Values(DType::F16, DType::BF16),
                         [](const auto& i) { return std::string(dtype_name(i.param)); });

TEST(Precision, KeptOpsStayF32) {
  for (const auto& [op, why] : keep_f32_ops()) EXPECT_FALSE(why.empty()) << op;
  Graph g;
  EXPECT_EQ(convert_precision(&g, DType::I8).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace gpuopt
