// Session::begin_ordered / finish_ordered on the CPU backend (no overlap there: each run happens
// in begin): results come back oldest first and equal run_ordered's, at most 2 begun, a bad input
// is refused at begin without taking a place.
#include "gpuopt/session.h"
#include "model_builder.h"
#include "onnx/importer.h"

#include <gtest/gtest.h>

namespace gpuopt {
namespace {

using namespace gpuopt::test;

// y = relu(neg(x)); x: f32[batch, 3]
std::unique_ptr<Session> neg_relu() {
  auto m = make_model();
  add_input(&m, "x", onnx::TensorProto::FLOAT, {-1, 3}, {"", ""});
  add_node(&m, "Neg", {"x"}, {"t"});
  add_node(&m, "Relu", {"t"}, {"y"});
  add_output(&m, "y");
  auto g = import_onnx_model(m, "");
  EXPECT_TRUE(g.ok()) << g.status().to_string();
  auto s = Session::from_graph(std::move(*g));
  EXPECT_TRUE(s.ok()) << s.status().to_string();
  return std::move(*s);
}

Tensor ramp(int64_t rows, float base) {
  std::vector<float> v;
  for (int64_t i = 0; i < rows * 3; ++i) v.push_back(static_cast<float>(i % 2 ? i : -i) + base);
  return Tensor::from_vector(DType::F32, {rows, 3}, v);
}

void expect_same(const Tensor& a, const Tensor& b) {
  ASSERT_EQ(a.shape(), b.shape());
  for (int64_t i = 0; i < a.numel(); ++i) ASSERT_EQ(a.get_f64(i), b.get_f64(i)) << "element " << i;
}

TEST(SessionPipeline, ResultsComeBackOldestFirstAndEqualRun) {
  auto s = neg_relu();
  const Tensor a = ramp(2, -0.5f), b = ramp(5, 3.25f), c = ramp(1, -7.f);
  auto ra = s->run_ordered({a}), rb = s->run_ordered({b}), rc = s->run_ordered({c});
  ASSERT_TRUE(ra.ok() && rb.ok() && rc.ok());
  // Two begun, the oldest finished, a third begun: the order a, b, c is kept throughout.
  ASSERT_TRUE(s->begin_ordered({a}).ok());
  ASSERT_TRUE(s->begin_ordered({b}).ok());
  auto fa = s->finish_ordered();
  ASSERT_TRUE(fa.ok()) << fa.status().to_string();
  ASSERT_TRUE(s->begin_ordered({c}).ok());
  auto fb = s->finish_ordered();
  auto fc = s->finish_ordered();
  ASSERT_TRUE(fb.ok() && fc.ok());
  expect_same((*fa)[0], (*ra)[0]);
  expect_same((*fb)[0], (*rb)[0]);
  expect_same((*fc)[0], (*rc)[0]);
  EXPECT_EQ((*fb)[0].dim(0), 5);
}

TEST(SessionPipeline, AtMostTwoBegunAndFinishNeedsABegin) {
  auto s = neg_relu();
  auto none = s->finish_ordered();
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), StatusCode::kFailedPrecondition);
  ASSERT_TRUE(s->begin_ordered({ramp(1, 0)}).ok());
  ASSERT_TRUE(s->begin_ordered({ramp(2, 0)}).ok());
  const Status third = s->begin_ordered({ramp(3, 0)});
  EXPECT_EQ(third.code(), StatusCode::kFailedPrecondition) << third.to_string();
  auto f1 = s->finish_ordered();
  ASSERT_TRUE(f1.ok());
  EXPECT_EQ((*f1)[0].dim(0), 1);  // the refused third did not take a place
  auto f2 = s->finish_ordered();
  ASSERT_TRUE(f2.ok());
  EXPECT_EQ((*f2)[0].dim(0), 2);
  EXPECT_FALSE(s->finish_ordered().ok());
}

TEST(SessionPipeline, BadInputsAreRefusedAtBegin) {
  auto s = neg_relu();
  const Status wrong = s->begin_ordered({Tensor::zeros(DType::F32, {2, 4})});
  EXPECT_EQ(wrong.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(wrong.message().find("input 'x': dim 1 is 4, the model expects 3"), std::string::npos) << wrong.message();
  EXPECT_EQ(s->begin_ordered({}).code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(s->finish_ordered().ok());  // nothing was begun
}

}  // namespace
}  // namespace gpuopt
