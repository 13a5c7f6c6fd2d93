// If / Loop / Scan beyond the ONNX node tests: subgraphs reading outer values, and malformed
// control flow (wrong branch arity, a body of the wrong shape, a name defined nowhere, a bad
// cond) refused at load with one error naming the node, never a crash.
#include "gpuopt/session.h"
#include "model_builder.h"
#include "onnx/importer.h"

#include <gtest/gtest.h>

namespace gpuopt {
namespace {

using namespace gpuopt::test;

// A subgraph attribute whose graph has `nodes` (op, inputs, output) and these outputs.
onnx::GraphProto* add_graph_attr(onnx::NodeProto* n, const std::string& name) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::GRAPH);
  a->mutable_g()->set_name(name);
  return a->mutable_g();
}
void graph_node(onnx::GraphProto* g, const std::string& op, std::vector<std::string> in, const std::string& out) {
  auto* n = g->add_node();
  n->set_op_type(op);
  n->set_name(op + "_" + out);
  for (auto& s : in) n->add_input(s);
  n->add_output(out);
}
void graph_output(onnx::GraphProto* g, const std::string& name, int elem = onnx::TensorProto::FLOAT) {
  auto* vi = g->add_output();
  vi->set_name(name);
  vi->mutable_type()->mutable_tensor_type()->set_elem_type(elem);
}

// y = cond ? x + x : x * x, both branches reading the outer x.
onnx::ModelProto if_model() {
  auto m = make_model();
  add_input(&m, "cond", onnx::TensorProto::BOOL, {});
  add_input(&m, "x", onnx::TensorProto::FLOAT, {3});
  auto* n = add_node(&m, "If", {"cond"}, {"y"}, "if1");
  auto* t = add_graph_attr(n, "then_branch");
  graph_node(t, "Add", {"x", "x"}, "a");
  graph_output(t, "a");
  auto* e = add_graph_attr(n, "else_branch");
  graph_node(e, "Mul", {"x", "x"}, "b");
  graph_output(e, "b");
  add_output(&m, "y");
  return m;
}

std::vector<float> run_if(const onnx::ModelProto& m, bool cond, std::vector<float> x) {
  auto g = import_onnx_model(m, "");
  EXPECT_TRUE(g.ok()) << g.status().to_string();
  auto s = Session::from_graph(std::move(*g));
  EXPECT_TRUE(s.ok()) << s.status().to_string();
  auto out = (*s)->run_ordered({Tensor::from_vector<int>(DType::Bool, {}, {cond ? 1 : 0}),
                                Tensor::from_vector<float>(DType::F32, {3}, x)});
  EXPECT_TRUE(out.ok()) << out.status().to_string();
  const float* p = (*out)[0].data<float>();
  return {p, p + 3};
}

TEST(ControlFlow, IfBranchesReadOuterValues) {
  const auto m = if_model();
  EXPECT_EQ(run_if(m, true, {1, -2, 3.5f}), (std::vector<float>{2, -4, 7}));
  EXPECT_EQ(run_if(m, false, {1, -2, 3.5f}), (std::vector<float>{1, 4, 12.25f}));
}

Status load_status(const onnx::ModelProto& m) {
  auto g = import_onnx_model(m, "");
  if (!g.ok()) return g.status();
  return Session::from_graph(std::move(*g)).status();
}

TEST(ControlFlow, MalformedIfIsOneError) {
  auto m = if_model();
  graph_output(m.mutable_graph()->mutable_node(0)->mutable_attribute(0)->mutable_g(), "x");  // then: 2 outputs
  Status st = load_status(m);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.to_string().find("[If] node 'if1'"), std::string::npos) << st.to_string();
  EXPECT_NE(st.to_string().find("2 outputs"), std::string::npos) << st.to_string();

  auto f = if_model();
  f.mutable_graph()->mutable_input(0)->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  st = load_status(f);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.to_string().find("expected bool"), std::string::npos) << st.to_string();

  auto u = if_model();  // the else branch reads a name defined nowhere
  u.mutable_graph()->mutable_node(0)->mutable_attribute(1)->mutable_g()->mutable_node(0)->set_input(1, "nope");
  st = load_status(u);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.to_string().find("'nope'"), std::string::npos) << st.to_string();

  auto missing = if_model();
  missing.mutable_graph()->mutable_node(0)->mutable_attribute()->RemoveLast();  // no else_branch
  st = load_status(missing);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.to_string().find("else_branch"), std::string::npos) << st.to_string();
}

// Loop: s = s + x, three times (M = 3); body inputs (iteration, cond, s).
onnx::ModelProto loop_model(bool wrong_body) {
  auto m = make_model();
  add_input(&m, "m", onnx::TensorProto::INT64, {});
  add_input(&m, "s0", onnx::TensorProto::FLOAT, {2});
  add_input(&m, "x", onnx::TensorProto::FLOAT, {2});
  auto* n = add_node(&m, "Loop", {"m", "", "s0"}, {"s"}, "loop1");
  auto* b = add_graph_attr(n, "body");
  for (const char* in : {"i", "c"}) {
    auto* vi = b->add_input();
    vi->set_name(in);
  }
  if (!wrong_body) b->add_input()->set_name("s_in");
  graph_node(b, "Identity", {"c"}, "c_out");
  graph_node(b, "Add", {wrong_body ? "x" : "s_in", "x"}, "s_out");
  graph_output(b, "c_out", onnx::TensorProto::BOOL);
  graph_output(b, "s_out");
  add_output(&m, "s");
  return m;
}

TEST(ControlFlow, LoopRunsAndAWrongBodyIsOneError) {
  auto g = import_onnx_model(loop_model(false), "");
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  auto s = Session::from_graph(std::move(*g));
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  auto out = (*s)->run_ordered({Tensor::scalar_i64(3), Tensor::from_vector<float>(DType::F32, {2}, {1, 2}),
                                Tensor::from_vector<float>(DType::F32, {2}, {0.5f, -1})});
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  EXPECT_EQ((*out)[0].data<float>()[0], 2.5f);
  EXPECT_EQ((*out)[0].data<float>()[1], -1.0f);

  Status st = load_status(loop_model(true));  // body takes (i, c) but one value is carried
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.to_string().find("[Loop] node 'loop1'"), std::string::npos) << st.to_string();
  EXPECT_NE(st.to_string().find("body has"), std::string::npos) << st.to_string();
}

TEST(ControlFlow, ScanWithoutNumScanInputsIsOneError) {
  auto m = make_model();
  add_input(&m, "x", onnx::TensorProto::FLOAT, {4, 2});
  auto* n = add_node(&m, "Scan", {"x"}, {"y"}, "scan1");
  auto* b = add_graph_attr(n, "body");
  b->add_input()->set_name("xi");
  graph_node(b, "Neg", {"xi"}, "yi");
  graph_output(b, "yi");
  add_output(&m, "y");
  Status st = load_status(m);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.to_string().find("num_scan_inputs"), std::string::npos) << st.to_string();
  auto* a = m.mutable_graph()->mutable_node(0)->add_attribute();  // now valid: y = -x row by row
  a->set_name("num_scan_inputs");
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(1);
  auto g = import_onnx_model(m, "");
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  auto s = Session::from_graph(std::move(*g));
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  auto out = (*s)->run_ordered({Tensor::from_vector<float>(DType::F32, {4, 2}, {1, 2, 3, 4, 5, 6, 7, 8})});
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  ASSERT_EQ((*out)[0].shape(), (Shape{4, 2}));
  EXPECT_EQ((*out)[0].data<float>()[5], -6.0f);
}

}  // namespace
}  // namespace gpuopt
