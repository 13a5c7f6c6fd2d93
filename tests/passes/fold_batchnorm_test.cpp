// Conv + BatchNormalization folding, checked on the CPU reference: the folded graph has one node
// fewer per pair and computes what the unfolded graph computes (the BN kernel is the oracle);
// pairs that must not fold (the Conv output read twice, training mode, non-constant
// parameters) are left alone.
#include "backends/backend.h"
#include "passes/passes.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

namespace gpuopt {
namespace {

Tensor random_tensor(Shape shape, std::mt19937& rng, float lo, float hi) {
  Tensor t = Tensor::empty(DType::F32, std::move(shape));
  std::uniform_real_distribution<float> u(lo, hi);
  for (int64_t i = 0; i < t.numel(); ++i) t.set_f64(i, u(rng));
  return t;
}

struct Built {
  Graph g;
  ValueId conv_out;
};

// x[2,3,11,7] -> Conv(3->5, 3x3, pad 1[, bias]) -> BatchNormalization -> Relu -> y
Built make_graph(std::mt19937& rng, bool conv_bias, bool bn_scale_as_input = false) {
  Built b;
  Graph& g = b.g;
  g.opset = 17;
  ValueId x = g.add_input("x", DType::F32, {2, 3, 11, 7});
  std::vector<ValueId> conv_in{x, g.add_constant("w", random_tensor({5, 3, 3, 3}, rng, -0.5f, 0.5f))};
  if (conv_bias) conv_in.push_back(g.add_constant("b", random_tensor({5}, rng, -0.2f, 0.2f)));
  AttributeMap conv;
  conv["pads"].kind = Attribute::Kind::kInts;
  conv["pads"].ints = {1, 1, 1, 1};
  b.conv_out = g.add_node(Op::Conv, "conv", conv_in, 1, conv)[0];
  ValueId scale = bn_scale_as_input ? g.add_input("scale", DType::F32, {5})
                                    : g.add_constant("scale", random_tensor({5}, rng, 0.5f, 2.0f));
  ValueId bias = g.add_constant("bn_b", random_tensor({5}, rng, -1.0f, 1.0f));
  ValueId mean = g.add_constant("mean", random_tensor({5}, rng, -0.5f, 0.5f));
  ValueId var = g.add_constant("var", random_tensor({5}, rng, 0.1f, 3.0f));
  AttributeMap bn;
  bn["epsilon"].kind = Attribute::Kind::kFloat;
  bn["epsilon"].f = 1e-3f;
  ValueId n = g.add_node(Op::BatchNormalization, "bn", {b.conv_out, scale, bias, mean, var}, 1, bn)[0];
  ValueId y = g.add_node(Op::Relu, "relu", {n}, 1, {}, {"y"})[0];
  g.mark_output(y);
  EXPECT_TRUE(g.topo_sort().ok());
  EXPECT_TRUE(g.infer_shapes().ok());
  return b;
}

int count(const Graph& g, const std::string& op) {
  int c = 0;
  for (const Node& n : g.nodes()) c += n.op_type == op;
  return c;
}

Tensor run(const Graph& g, const std::vector<Tensor>& inputs) {
  auto cpu = make_cpu_backend();
  auto e = cpu->compile(g, {});
  EXPECT_TRUE(e.ok()) << e.status().to_string();
  auto out = (*e)->run(inputs, {});
  EXPECT_TRUE(out.ok()) << out.status().to_string();
  return (*out)[0];
}

class FoldBatchNorm : public ::testing::TestWithParam<bool> {};

TEST_P(FoldBatchNorm, FoldsIntoConvAndMatchesTheBatchNormKernel) {
  std::mt19937 rng(7);
  Built ref = make_graph(rng, GetParam());
  Graph folded = ref.g;
  auto st = fold_batchnorm(&folded);
  ASSERT_TRUE(st.ok()) << st.status().to_string();
  EXPECT_EQ(st->removed, 1);
  ASSERT_TRUE(folded.topo_sort().ok());
  ASSERT_TRUE(folded.infer_shapes().ok());
  EXPECT_EQ(count(folded, "BatchNormalization"), 0);
  EXPECT_EQ(count(folded, "Conv"), 1);
  EXPECT_EQ(folded.value(folded.outputs()[0]).name, "y");

  Tensor x = random_tensor({2, 3, 11, 7}, rng, -2.0f, 2.0f);
  Tensor want = run(ref.g, {x});
  Tensor got = run(folded, {x});
  ASSERT_EQ(got.shape(), want.shape());
  double max_err = 0, max_ref = 0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    max_err = std::max(max_err, std::abs(got.get_f64(i) - want.get_f64(i)));
    max_ref = std::max(max_ref, std::abs(want.get_f64(i)));
  }
  EXPECT_GT(max_ref, 0.5);  // the BN moved values: a fold that dropped it would fail below
  EXPECT_LE(max_err, 1e-5 * std::max(1.0, max_ref));
}

INSTANTIATE_TEST_SUITE_P(ConvBias, FoldBatchNorm, ::testing::Bool(),
                         [](const auto& i) { return i.param ? std::string("with_bias") : std::string("no_bias"); });

TEST(FoldBatchNorm, LeavesPairsThatMustNotFold) {
  std::mt19937 rng(8);
  {  // Conv output also read by another node
    Built b = make_graph(rng, true);
    ValueId extra = b.g.add_node(Op::Sigmoid, "other", {b.conv_out}, 1, {}, {"z"})[0];
    b.g.mark_output(extra);
    auto st = fold_batchnorm(&b.g);
    ASSERT_TRUE(st.ok());
    EXPECT_EQ(st->removed, 0);
    EXPECT_EQ(count(b.g, "BatchNormalization"), 1);
  }
  {  // training mode
    Built b = make_graph(rng, true);
    for (Node& n : b.g.nodes())
      if (n.op_type == "BatchNormalization") {
        n.attrs["training_mode"].kind = Attribute::Kind::kInt;
        n.attrs["training_mode"].i = 1;
      }
    auto st = fold_batchnorm(&b.g);
    ASSERT_TRUE(st.ok());
    EXPECT_EQ(st->removed, 0);
  }
  {  // scale given at run time
    Built b = make_graph(rng, false, /*bn_scale_as_input=*/true);
    auto st = fold_batchnorm(&b.g);
    ASSERT_TRUE(st.ok());
    EXPECT_EQ(st->removed, 0);
  }
}

}  // namespace
}  // namespace gpuopt
