// Session: run with named tensors; every kind of bad run-time input is one clear Status.
#include "core/device.h"
#include "gpuopt/session.h"
#include "ir/graph.h"
#include "model_builder.h"
#include "onnx/importer.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace gpuopt {
namespace {

using namespace gpuopt::test;

// y = relu(neg(x)); x: f32[batch, 3]
std::unique_ptr<Session> neg_relu_session() {
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

TEST(Session, RunsWithDynamicBatch) {
  auto s = neg_relu_session();
  ASSERT_EQ(s->inputs().size(), 1u);
  EXPECT_TRUE(s->inputs()[0].dynamic_batch());
  EXPECT_EQ(s->inputs()[0].shape_string(), "[batch,3]");
  for (int64_t batch : {1, 4}) {
    std::vector<float> v;
    for (int64_t i = 0; i < batch * 3; ++i) v.push_back(static_cast<float>(i % 2 ? i : -i) - 0.5f);
    auto out = s->run({{"x", Tensor::from_vector(DType::F32, {batch, 3}, v)}});
    ASSERT_TRUE(out.ok()) << out.status().to_string();
    const Tensor& y = out->at(0).second;
    EXPECT_EQ(out->at(0).first, "y");
    ASSERT_EQ(y.shape(), (Shape{batch, 3}));
    for (int64_t i = 0; i < y.numel(); ++i) EXPECT_EQ(y.get_f64(i), std::max(0.0, -static_cast<double>(v[i])));
  }
}

TEST(Session, MissingExtraAndDuplicateInputs) {
  auto s = neg_relu_session();
  auto missing = s->run({});
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("missing input 'x'"), std::string::npos) << missing.status().to_string();
  const Tensor x = Tensor::zeros(DType::F32, {2, 3});
  auto extra = s->run({{"x", x}, {"bogus", x}});
  ASSERT_FALSE(extra.ok());
  EXPECT_NE(extra.status().message().find("unknown input 'bogus'"), std::string::npos) << extra.status().to_string();
  auto dup = s->run({{"x", x}, {"x", x}});
  ASSERT_FALSE(dup.ok());
  EXPECT_NE(dup.status().message().find("twice"), std::string::npos);
}

TEST(Session, WrongDtypeRankAndDim) {
  auto s = neg_relu_session();
  auto dtype = s->run({{"x", Tensor::zeros(DType::I64, {2, 3})}});
  ASSERT_FALSE(dtype.ok());
  EXPECT_NE(dtype.status().message().find("dtype i64 given, the model expects f32"), std::string::npos)
      << dtype.status().to_string();
  auto rank = s->run({{"x", Tensor::zeros(DType::F32, {2, 3, 1})}});
  ASSERT_FALSE(rank.ok());
  EXPECT_NE(rank.status().message().find("rank 3 given"), std::string::npos) << rank.status().to_string();
  auto dim = s->run({{"x", Tensor::zeros(DType::F32, {2, 5})}});
  ASSERT_FALSE(dim.ok());
  EXPECT_NE(dim.status().message().find("dim 1 is 5, the model expects 3"), std::string::npos) << dim.status().to_string();
}

TEST(Session, SymbolMustAgreeAcrossInputs) {
  auto m = make_model();
  add_input(&m, "a", onnx::TensorProto::FLOAT, {-1, 2}, {"N", ""});
  add_input(&m, "b", onnx::TensorProto::FLOAT, {-1, 2}, {"N", ""});
  add_node(&m, "Relu", {"a"}, {"ya"});
  add_node(&m, "Relu", {"b"}, {"yb"});
  add_output(&m, "ya");
  add_output(&m, "yb");
  auto g = import_onnx_model(m, "");
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  auto s = Session::from_graph(std::move(*g));
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  auto r = (*s)->run({{"a", Tensor::zeros(DType::F32, {2, 2})}, {"b", Tensor::zeros(DType::F32, {3, 2})}});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("N"), std::string::npos) << r.status().to_string();
  EXPECT_TRUE((*s)->run({{"a", Tensor::zeros(DType::F32, {3, 2})}, {"b", Tensor::zeros(DType::F32, {3, 2})}}).ok());
}

TEST(Session, UnknownDeviceIsAClearError) {
  auto m = make_model();
  add_input(&m, "x", onnx::TensorProto::FLOAT, {2});
  add_node(&m, "Relu", {"x"}, {"y"});
  add_output(&m, "y");
  auto g = import_onnx_model(m, "");
  ASSERT_TRUE(g.ok());
  // Text names a device only through parse_device; a device that is not there fails the load
  // naming it (no such backend in this build, no GPU, or no GPU of that index).
  auto bad = parse_device("tpu");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("'tpu'"), std::string::npos) << bad.status().to_string();
  SessionOptions o;
  o.device = Device::cuda(4095);
  auto s = Session::from_graph(std::move(*g), o);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("cuda:4095"), std::string::npos) << s.status().to_string();
}

TEST(Session, LoadErrorsNameTheFile) {
  auto s = Session::load("/nonexistent/model.onnx");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("/nonexistent/model.onnx"), std::string::npos);
}

}  // namespace
}  // namespace gpuopt

namespace gpuopt {
namespace {

using namespace gpuopt::test;

TEST(Session, ShapeMismatchAtLoadNamesTheNode) {
  auto m = make_model();
  add_input(&m, "a", onnx::TensorProto::FLOAT, {2, 3});
  add_input(&m, "b", onnx::TensorProto::FLOAT, {4, 5});
  add_node(&m, "MatMul", {"a", "b"}, {"y"}, "mm1");
  add_output(&m, "y");
  auto g = import_onnx_model(m, "");
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("[MatMul] node 'mm1'"), std::string::npos) << g.status().to_string();
}

TEST(Session, ShapeMismatchAtRunTimeNamesTheNode) {
  // Two independent symbols load fine; values that do not broadcast fail when run.
  auto m = make_model();
  add_input(&m, "a", onnx::TensorProto::FLOAT, {-1, 3}, {"N", ""});
  add_input(&m, "b", onnx::TensorProto::FLOAT, {-1, 3}, {"M", ""});
  add_node(&m, "Add", {"a", "b"}, {"y"}, "add1");
  add_output(&m, "y");
  auto g = import_onnx_model(m, "");
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  auto s = Session::from_graph(std::move(*g));
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  auto ok = (*s)->run({{"a", Tensor::zeros(DType::F32, {2, 3})}, {"b", Tensor::zeros(DType::F32, {1, 3})}});
  EXPECT_TRUE(ok.ok()) << ok.status().to_string();
  auto bad = (*s)->run({{"a", Tensor::zeros(DType::F32, {2, 3})}, {"b", Tensor::zeros(DType::F32, {3, 3})}});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("[Add] node 'add1'"), std::string::npos) << bad.status().to_string();
}

TEST(Session, TypeMismatchAtLoadNamesTheNode) {
  auto m = make_model();
  add_input(&m, "a", onnx::TensorProto::FLOAT, {3});
  add_input(&m, "b", onnx::TensorProto::INT64, {3});
  add_node(&m, "Add", {"a", "b"}, {"y"}, "add_mixed");
  add_output(&m, "y");
  auto g = import_onnx_model(m, "");
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("add_mixed"), std::string::npos) << g.status().to_string();
}

TEST(Importer, ModelsOver2GiBAreRefusedBeforeReading) {
  const std::string dir = temp_dir("huge");
  const std::string path = dir + "/huge.onnx";
  { std::ofstream(path, std::ios::binary) << "x"; }
  std::filesystem::resize_file(path, (uintmax_t{1} << 31) + 16);  // sparse: no disk used
  auto g = load_onnx_model(path);
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("2 GiB"), std::string::npos) << g.status().to_string();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace gpuopt
