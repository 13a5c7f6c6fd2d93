// ONNX importer: tensors in every storage form, Constant forms, symbolic dims, and bad input.
#include "model_builder.h"
#include "onnx/importer.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace gpuopt {
namespace {

using namespace gpuopt::test;

onnx::ModelProto relu_model() {
  auto m = make_model();
  add_input(&m, "x", onnx::TensorProto::FLOAT, {-1, 3}, {"", ""});
  add_node(&m, "Relu", {"x"}, {"y"}, "relu1");
  add_output(&m, "y");
  return m;
}

TEST(Importer, RawAndTypedInitializers) {
  auto m = relu_model();
  *m.mutable_graph()->add_initializer() = float_tensor("w_raw", {2, 2}, {1, 2, 3, 4}, true);
  *m.mutable_graph()->add_initializer() = float_tensor("w_typed", {2, 2}, {5, 6, 7, 8}, false);
  onnx::TensorProto h;  // f16 lives as bit patterns in int32_data
  h.set_name("h");
  h.set_data_type(onnx::TensorProto::FLOAT16);
  h.add_dims(2);
  h.add_int32_data(Half::from_float(1.5f));
  h.add_int32_data(Half::from_float(-2.0f));
  *m.mutable_graph()->add_initializer() = h;
  onnx::TensorProto i64;
  i64.set_name("i");
  i64.set_data_type(onnx::TensorProto::INT64);
  i64.add_int64_data(-7);  // scalar: no dims
  *m.mutable_graph()->add_initializer() = i64;
  auto g = import_onnx_model(m, "");
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  const Tensor& raw = *g->value(*g->find_value("w_raw")).constant;
  const Tensor& typed = *g->value(*g->find_value("w_typed")).constant;
  EXPECT_EQ(raw.shape(), (Shape{2, 2}));
  EXPECT_EQ(raw.get_f64(3), 4.0);
  EXPECT_EQ(typed.get_f64(0), 5.0);
  const Tensor& ht = *g->value(*g->find_value("h")).constant;
  EXPECT_EQ(ht.dtype(), DType::F16);
  EXPECT_EQ(ht.get_f64(0), 1.5);
  EXPECT_EQ(ht.get_f64(1), -2.0);
  const Tensor& it = *g->value(*g->find_value("i")).constant;
  EXPECT_EQ(it.rank(), 0);
  EXPECT_EQ(it.get_i64(0), -7);
}

TEST(Importer, SymbolicDimsAndDynamicBatch) {
  auto m = make_model();
  add_input(&m, "a", onnx::TensorProto::FLOAT, {-1, 4}, {"", ""});        // unknown leading -> batch
  add_input(&m, "b", onnx::TensorProto::FLOAT, {-1, -1}, {"N", "seq"});   // named
  add_node(&m, "Relu", {"a"}, {"ya"});
  add_node(&m, "Relu", {"b"}, {"yb"});
  add_output(&m, "ya");
  add_output(&m, "yb");
  auto g = import_onnx_model(m, "");
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  const Shape& a = g->value(g->inputs()[0]).info.shape;
  const Shape& b = g->value(g->inputs()[1]).info.shape;
  EXPECT_EQ(g->symbol_name(a[0]), "batch");
  EXPECT_EQ(a[1], 4);
  EXPECT_EQ(g->shape_string(b), "[N,seq]");
  // Shape inference carried the symbols through Relu.
  EXPECT_EQ(g->shape_string(g->value(g->outputs()[1]).info.shape), "[N,seq]");
}

TEST(Importer, ConstantNodeForms) {
  auto m = relu_model();
  auto add_const = [&](const std::string& out, auto fill) {
    auto* n = add_node(&m, "Constant", {}, {out});
    auto* a = n->add_attribute();
    fill(a);
  };
  add_const("c_float", [](onnx::AttributeProto* a) { a->set_name("value_float"); a->set_type(onnx::AttributeProto::FLOAT); a->set_f(2.5f); });
  add_const("c_floats", [](onnx::AttributeProto* a) { a->set_name("value_floats"); a->set_type(onnx::AttributeProto::FLOATS); a->add_floats(1); a->add_floats(2); });
  add_const("c_int", [](onnx::AttributeProto* a) { a->set_name("value_int"); a->set_type(onnx::AttributeProto::INT); a->set_i(9); });
  add_const("c_ints", [](onnx::AttributeProto* a) { a->set_name("value_ints"); a->set_type(onnx::AttributeProto::INTS); a->add_ints(3); a->add_ints(-1); });
  add_const("c_tensor", [](onnx::AttributeProto* a) { a->set_name("value"); a->set_type(onnx::AttributeProto::TENSOR); *a->mutable_t() = float_tensor("", {3}, {1, 2, 3}); });
  add_const("c_str", [](onnx::AttributeProto* a) { a->set_name("value_string"); a->set_type(onnx::AttributeProto::STRING); a->set_s("hi"); });
  auto g = import_onnx_model(m, "");
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  auto c = [&](const char* n) { return *g->value(*g->find_value(n)).constant; };
  EXPECT_EQ(c("c_float").dtype(), DType::F32);
  EXPECT_EQ(c("c_float").rank(), 0);
  EXPECT_EQ(c("c_float").get_f64(0), 2.5);
  EXPECT_EQ(c("c_floats").shape(), (Shape{2}));
  EXPECT_EQ(c("c_int").dtype(), DType::I64);
  EXPECT_EQ(c("c_int").get_i64(0), 9);
  EXPECT_EQ(c("c_ints").get_i64(1), -1);
  EXPECT_EQ(c("c_tensor").get_f64(2), 3.0);
  EXPECT_EQ(c("c_str").strings().at(0), "hi");
  EXPECT_EQ(g->nodes().size(), 1u);  // Constant nodes became constants
}

TEST(Importer, ExternalData) {
  const std::string dir = temp_dir("external");
  std::vector<float> w = {1, 2, 3, 4, 5, 6};
  {
    std::ofstream f(dir + "/weights.bin", std::ios::binary);
    const std::string pad(16, 'x');  // data starts at an offset
    f.write(pad.data(), 16);
    f.write(reinterpret_cast<const char*>(w.data()), 24);
  }
  auto m = relu_model();
  onnx::TensorProto t;
  t.set_name("w");
  t.set_data_type(onnx::TensorProto::FLOAT);
  t.add_dims(2);
  t.add_dims(3);
  t.set_data_location(onnx::TensorProto::EXTERNAL);
  auto kv = [&](const char* k, const std::string& v) {
    auto* e = t.add_external_data();
    e->set_key(k);
    e->set_value(v);
  };
  kv("location", "weights.bin");
  kv("offset", "16");
  kv("length", "24");
  *m.mutable_graph()->add_initializer() = t;
  auto g = load_onnx_model(write_model(m, dir));
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  EXPECT_EQ(g->value(*g->find_value("w")).constant->get_f64(5), 6.0);

  // A location outside the model folder is refused.
  m.mutable_graph()->mutable_initializer(0)->mutable_external_data(0)->set_value("../weights.bin");
  auto bad = load_onnx_model(write_model(m, dir));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("leaves the model folder"), std::string::npos) << bad.status().to_string();
  // A file too short for the tensor is a clear error, not a crash.
  m.mutable_graph()->mutable_initializer(0)->mutable_external_data(0)->set_value("weights.bin");
  m.mutable_graph()->mutable_initializer(0)->mutable_external_data(1)->set_value("20");
  auto short_file = load_onnx_model(write_model(m, dir));
  ASSERT_FALSE(short_file.ok());
  EXPECT_NE(short_file.status().message().find("truncated"), std::string::npos) << short_file.status().to_string();
  std::filesystem::remove_all(dir);
}

TEST(Importer, UnknownOpNamesOpDomainOpsetAndNode) {
  auto m = relu_model();
  add_node(&m, "FancyOp", {"y"}, {"z"}, "fancy1");
  auto g = import_onnx_model(m, "");
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), StatusCode::kUnimplemented);
  const std::string msg = g.status().message();
  EXPECT_NE(msg.find("'FancyOp'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("ai.onnx"), std::string::npos) << msg;
  EXPECT_NE(msg.find("opset 17"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'fancy1'"), std::string::npos) << msg;

  auto m2 = relu_model();
  auto* n = add_node(&m2, "FusedGelu", {"y"}, {"z"}, "ms1");
  n->set_domain("com.microsoft");
  auto* o = m2.add_opset_import();
  o->set_domain("com.microsoft");
  o->set_version(1);
  auto g2 = import_onnx_model(m2, "");
  ASSERT_FALSE(g2.ok());
  EXPECT_NE(g2.status().message().find("domain 'com.microsoft', opset 1"), std::string::npos) << g2.status().to_string();
}

// gpuopt's channels-last ops are read in their own domain (ai.gpuopt) only, as FusedConv in
// com.microsoft: a default-domain NhwcMaxPool is an unknown op.
TEST(Importer, ChannelsLastOpsOnlyInTheirDomain) {
  auto model = [](const char* domain) {
    auto m = make_model();
    add_input(&m, "x", onnx::TensorProto::FLOAT, {2, 8, 6, 5}, {"", "", "", ""});
    auto* n = add_node(&m, "NhwcMaxPool", {"x"}, {"y"}, "pool");
    n->set_domain(domain);
    for (const char* name : {"kernel_shape", "strides"}) {
      auto* a = n->add_attribute();
      a->set_name(name);
      a->set_type(onnx::AttributeProto::INTS);
      a->add_ints(2);
      a->add_ints(2);
    }
    add_output(&m, "y");
    return m;
  };
  auto plain = import_onnx_model(model(""), "");
  ASSERT_FALSE(plain.ok());
  EXPECT_NE(plain.status().message().find("unknown op 'NhwcMaxPool'"), std::string::npos) << plain.status().to_string();
  auto own = import_onnx_model(model("ai.gpuopt"), "");
  ASSERT_TRUE(own.ok()) << own.status().to_string();
  ASSERT_TRUE(own->infer_shapes().ok());
  const ValueId y = own->outputs()[0];
  EXPECT_EQ(own->value(y).info.shape, (Shape{2, 4, 3, 5}));  // [N, H, W, C] pooled over H and W
}

TEST(Importer, UnsupportedDtypeAndOpset) {
  auto m = relu_model();
  m.mutable_graph()->mutable_input(0)->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::COMPLEX64);
  auto g = import_onnx_model(m, "");
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("COMPLEX64"), std::string::npos) << g.status().to_string();
  // A narrow dtype is read, but an arithmetic op refuses it, naming the node and the dtype.
  auto f8 = relu_model();
  f8.mutable_graph()->mutable_input(0)->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT8E4M3FN);
  auto g8 = import_onnx_model(f8, "");
  ASSERT_FALSE(g8.ok());
  EXPECT_NE(g8.status().message().find("[Relu] node 'relu1'"), std::string::npos) << g8.status().to_string();
  EXPECT_NE(g8.status().message().find("f8e4m3fn"), std::string::npos) << g8.status().to_string();

  auto old = relu_model();
  old.mutable_opset_import(0)->set_version(5);
  auto g2 = import_onnx_model(old, "");
  ASSERT_FALSE(g2.ok());
  EXPECT_NE(g2.status().message().find("opset 5"), std::string::npos) << g2.status().to_string();
}

TEST(Importer, MissingProducerAndBadRawData) {
  auto m = relu_model();
  add_node(&m, "Relu", {"nowhere"}, {"z"}, "orphan");
  auto g = import_onnx_model(m, "");
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("'nowhere'"), std::string::npos) << g.status().to_string();
  EXPECT_NE(g.status().message().find("orphan"), std::string::npos) << g.status().to_string();

  auto m2 = relu_model();
  auto t = float_tensor("w", {3}, {1, 2, 3});
  t.mutable_raw_data()->resize(5);  // 5 bytes for 3 floats
  *m2.mutable_graph()->add_initializer() = t;
  auto g2 = import_onnx_model(m2, "");
  ASSERT_FALSE(g2.ok());
  EXPECT_NE(g2.status().message().find("raw_data has 5 bytes"), std::string::npos) << g2.status().to_string();
}

TEST(Importer, TruncatedCorruptEmptyAndMissingFiles) {
  const std::string dir = temp_dir("bad_files");
  auto m = relu_model();
  *m.mutable_graph()->add_initializer() = float_tensor("w", {64}, std::vector<float>(64, 1.0f));
  const std::string bytes = m.SerializeAsString();
  auto write = [&](const std::string& name, const std::string& data) {
    std::ofstream(dir + "/" + name, std::ios::binary) << data;
    return dir + "/" + name;
  };
  for (size_t cut : {bytes.size() / 2, bytes.size() - 3, size_t{7}}) {
    auto g = load_onnx_model(write("cut.onnx", bytes.substr(0, cut)));
    ASSERT_FALSE(g.ok()) << "cut at " << cut;
    EXPECT_EQ(g.status().code(), StatusCode::kInvalidArgument) << g.status().to_string();
  }
  std::string corrupt = bytes;
  for (size_t i = 0; i < corrupt.size(); i += 3) corrupt[i] = static_cast<char>(0xff);
  EXPECT_FALSE(load_onnx_model(write("corrupt.onnx", corrupt)).ok());
  auto empty = load_onnx_model(write("empty.onnx", ""));
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.status().message().find("no graph"), std::string::npos) << empty.status().to_string();
  auto missing = load_onnx_model(dir + "/does_not_exist.onnx");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  std::filesystem::remove_all(dir);
}

TEST(Importer, TensorPbFile) {
  const std::string dir = temp_dir("pb");
  auto t = float_tensor("x", {2}, {3.5f, -1.0f});
  {
    std::ofstream f(dir + "/input_0.pb", std::ios::binary);
    t.SerializeToOstream(&f);
  }
  auto r = load_tensor_pb(dir + "/input_0.pb");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->get_f64(0), 3.5);
  std::ofstream(dir + "/bad.pb", std::ios::binary) << "\xff\xff\xff";
  EXPECT_FALSE(load_tensor_pb(dir + "/bad.pb").ok());
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace gpuopt
