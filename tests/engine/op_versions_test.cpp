// Op versions by opset range (ir/ops_versions.inc): the table's ranges, the form a model's opset
// picks (each form checked against values worked out by hand from the ONNX spec of that
// opset), the error for an opset outside every range, and the opset of a node's own domain.
#include "ir/eval.h"
#include "model_builder.h"
#include "onnx/importer.h"

#include <gtest/gtest.h>

#include <cmath>

namespace gpuopt {
namespace {

using namespace gpuopt::test;

TEST(OpVersions, EveryOpHasContiguousRangesFromOpsetOne) {
  for (size_t i = 0; i < kNumOps; ++i) {
    const OpDef& d = op_def(static_cast<Op>(i));
    ASSERT_FALSE(d.versions.empty()) << d.name;
    EXPECT_EQ(d.versions.front().since, 1) << d.name;
    for (size_t k = 1; k < d.versions.size(); ++k) EXPECT_EQ(d.versions[k].since, d.versions[k - 1].until + 1) << d.name;
    for (const OpVersion& v : d.versions) EXPECT_TRUE(v.infer && v.cpu) << d.name;
  }
}

TEST(OpVersions, RangesFollowTheOnnxChanges) {
  EXPECT_EQ(op_ranges(Op::Relu), "1+");
  EXPECT_EQ(op_ranges(Op::Softmax), "1-12, 13+");
  EXPECT_EQ(op_ranges(Op::ReduceSum), "1-12, 13+");
  EXPECT_EQ(op_ranges(Op::ReduceMean), "1-17, 18+");
  EXPECT_EQ(op_ranges(Op::Pad), "1, 2-10, 11+");
  EXPECT_EQ(op_ranges(Op::BatchNormalization), "1-8, 9-13, 14+");
  EXPECT_EQ(op_ranges(Op::Resize), "1-10, 11+");
  EXPECT_EQ(op_ranges(Op::Upsample), "1-8, 9");
  EXPECT_EQ(op_ranges(Op::Scatter), "1-10");
  // Each opset lands in exactly the range that holds it.
  EXPECT_EQ(op_version(Op::Softmax, 12), &op_def(Op::Softmax).versions[0]);
  EXPECT_EQ(op_version(Op::Softmax, 13), &op_def(Op::Softmax).versions[1]);
  EXPECT_EQ(op_version(Op::Softmax, 27), &op_def(Op::Softmax).versions[1]);
  EXPECT_EQ(op_version(Op::Upsample, 10), nullptr);
  EXPECT_EQ(op_version(Op::Scatter, 11), nullptr);
}

Node one_node(Op op, AttributeMap attrs = {}) {
  Node n;
  n.op = op;
  n.name = "n0";
  n.inputs = {0};
  n.outputs = {1};
  n.attrs = std::move(attrs);
  return n;
}

// Softmax of x = [[0, 1], [2, 3]] (shape [1, 2, 2]) at axis 1: before opset 13 the trailing block
// (all four values) is one row; from 13 each column of axis 1 is its own row.
TEST(OpVersions, SoftmaxFormIsPickedByOpset) {
  const Tensor x = Tensor::from_vector<float>(DType::F32, {1, 2, 2}, {0, 1, 2, 3});
  const Node n = one_node(Op::Softmax, {{"axis", int_attr(1)}});
  auto old_form = eval_node(n, {&x}, 12);
  auto new_form = eval_node(n, {&x}, 13);
  ASSERT_TRUE(old_form.ok() && new_form.ok());
  const double z4 = 1 + std::exp(1.0) + std::exp(2.0) + std::exp(3.0);
  const double z2a = 1 + std::exp(2.0);  // column 0: exp(0), exp(2)
  const double want_old[] = {1 / z4, std::exp(1.0) / z4, std::exp(2.0) / z4, std::exp(3.0) / z4};
  const double want_new[] = {1 / z2a, 1 / z2a, std::exp(2.0) / z2a, std::exp(2.0) / z2a};
  for (int i = 0; i < 4; ++i) {
    EXPECT_NEAR((*old_form)[0].get_f64(i), want_old[i], 1e-6) << i;
    EXPECT_NEAR((*new_form)[0].get_f64(i), want_new[i], 1e-6) << i;
  }
}

// ReduceSum's axes: an attribute before opset 13, an input from 13 (the attribute is then not
// read: without the input every axis is reduced).
TEST(OpVersions, ReduceSumAxesFormIsPickedByOpset) {
  const Tensor x = Tensor::from_vector<float>(DType::F32, {2, 3}, {1, 2, 3, 4, 5, 6});
  const Node n = one_node(Op::ReduceSum, {{"axes", ints_attr({1})}, {"keepdims", int_attr(0)}});
  auto old_form = eval_node(n, {&x}, 12);
  auto new_form = eval_node(n, {&x}, 13);
  ASSERT_TRUE(old_form.ok()) << old_form.status().to_string();
  ASSERT_TRUE(new_form.ok()) << new_form.status().to_string();
  EXPECT_EQ((*old_form)[0].shape(), (Shape{2}));
  EXPECT_EQ((*old_form)[0].get_f64(0), 6);
  EXPECT_EQ((*old_form)[0].get_f64(1), 15);
  EXPECT_EQ((*new_form)[0].shape(), (Shape{}));
  EXPECT_EQ((*new_form)[0].get_f64(0), 21);
}

// Clip's bounds: min/max attributes before opset 11, inputs from 11 (without them: no bound).
TEST(OpVersions, ClipBoundsFormIsPickedByOpset) {
  const Tensor x = Tensor::from_vector<float>(DType::F32, {3}, {-2, 0.5f, 2});
  const Node n = one_node(Op::Clip, {{"min", float_attr(-1)}, {"max", float_attr(1)}});
  auto old_form = eval_node(n, {&x}, 10);
  auto new_form = eval_node(n, {&x}, 11);
  ASSERT_TRUE(old_form.ok() && new_form.ok());
  const double want_old[] = {-1, 0.5, 1}, want_new[] = {-2, 0.5, 2};
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ((*old_form)[0].get_f64(i), want_old[i]) << i;
    EXPECT_EQ((*new_form)[0].get_f64(i), want_new[i]) << i;
  }
}

TEST(OpVersions, OpsetOutsideEveryRangeIsOneErrorNamingOpOpsetAndNode) {
  const Tensor x = Tensor::from_vector<float>(DType::F32, {1, 1, 2, 2}, {1, 2, 3, 4});
  const Tensor scales = Tensor::from_vector<float>(DType::F32, {4}, {1, 1, 2, 2});
  Node n = one_node(Op::Upsample, {{"mode", string_attr("nearest")}});
  n.inputs = {0, 1};
  n.outputs = {2};
  auto ok = eval_node(n, {&x, &scales}, 9);
  ASSERT_TRUE(ok.ok()) << ok.status().to_string();
  EXPECT_EQ((*ok)[0].shape(), (Shape{1, 1, 4, 4}));
  auto bad = eval_node(n, {&x, &scales}, 10);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kUnimplemented);
  EXPECT_EQ(bad.status().message(), "[Upsample] node 'n0': opset 10 is outside every version gpuopt implements (1-8, 9)");

  // A model is refused at load, before any shape inference.
  auto m = make_model(11);
  add_input(&m, "x", onnx::TensorProto::FLOAT, {1, 1, 2, 2});
  m.mutable_graph()->add_initializer()->CopyFrom(float_tensor("scales", {4}, {1, 1, 2, 2}));
  add_node(&m, "Upsample", {"x", "scales"}, {"y"}, "up1");
  add_output(&m, "y");
  auto g = import_onnx_model(m, "");
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), StatusCode::kUnimplemented);
  EXPECT_EQ(g.status().message(), "[Upsample] node 'up1': opset 11 is outside every version gpuopt implements (1-8, 9)");
  auto m9 = m;
  m9.mutable_opset_import(0)->set_version(9);
  auto g9 = import_onnx_model(m9, "");
  ASSERT_TRUE(g9.ok()) << g9.status().to_string();
  ASSERT_TRUE(g9->infer_shapes().ok());
  EXPECT_EQ(g9->value(g9->outputs()[0]).info.shape, (Shape{1, 1, 4, 4}));
}

// A node's opset is its own domain's: com.microsoft's version for FusedConv, the default
// domain's for the rest, 1 for a domain the model does not import (a node a pass wrote).
TEST(OpVersions, OpsetOfTheNodesDomain) {
  auto m = make_model(13);
  auto* o = m.add_opset_import();
  o->set_domain("com.microsoft");
  o->set_version(1);
  add_input(&m, "x", onnx::TensorProto::FLOAT, {1, 2});
  add_node(&m, "Relu", {"x"}, {"y"}, "relu1");
  add_output(&m, "y");
  auto g = import_onnx_model(m, "");
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  Node conv;
  conv.domain = "com.microsoft";
  Node nhwc;
  nhwc.domain = "ai.gpuopt";
  Node plain;
  plain.domain = "ai.onnx";
  EXPECT_EQ(g->opset_for(g->nodes()[0]), 13);
  EXPECT_EQ(g->opset_for(plain), 13);
  EXPECT_EQ(g->opset_for(conv), 1);
  EXPECT_EQ(g->domain_opsets.at("com.microsoft"), 1);
  EXPECT_EQ(g->opset_for(nhwc), 1);
}

}  // namespace
}  // namespace gpuopt
