// Builds small ONNX ModelProtos in C++ for the engine tests (no Python needed).
#pragma once

#include "onnx/onnx.pb.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <string>
#include <vector>

namespace gpuopt::test {

inline onnx::ModelProto make_model(int opset = 17) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.set_producer_name("engine-test");
  auto* o = m.add_opset_import();
  o->set_domain("");
  o->set_version(opset);
  m.mutable_graph()->set_name("g");
  return m;
}

// dims: >= 0 fixed, -1 = no value and no name, otherwise a name via `params` at the same index.
inline void add_value_info(onnx::ValueInfoProto* vi, const std::string& name, int elem_type, std::vector<int64_t> dims,
                           std::vector<std::string> params = {}) {
  vi->set_name(name);
  auto* tt = vi->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(elem_type);
  auto* shape = tt->mutable_shape();
  for (size_t i = 0; i < dims.size(); ++i) {
    auto* d = shape->add_dim();
    if (i < params.size() && !params[i].empty()) d->set_dim_param(params[i]);
    else if (dims[i] >= 0) d->set_dim_value(dims[i]);
  }
}

inline void add_input(onnx::ModelProto* m, const std::string& name, int elem_type, std::vector<int64_t> dims,
                      std::vector<std::string> params = {}) {
  add_value_info(m->mutable_graph()->add_input(), name, elem_type, std::move(dims), std::move(params));
}

inline void add_output(onnx::ModelProto* m, const std::string& name, int elem_type = onnx::TensorProto::FLOAT) {
  auto* vi = m->mutable_graph()->add_output();
  vi->set_name(name);
  vi->mutable_type()->mutable_tensor_type()->set_elem_type(elem_type);
}

inline onnx::NodeProto* add_node(onnx::ModelProto* m, const std::string& op, std::vector<std::string> in,
                                 std::vector<std::string> out, const std::string& name = "") {
  auto* n = m->mutable_graph()->add_node();
  n->set_op_type(op);
  n->set_name(name.empty() ? op + "_" + out.at(0) : name);
  for (auto& s : in) n->add_input(s);
  for (auto& s : out) n->add_output(s);
  return n;
}

inline onnx::TensorProto float_tensor(const std::string& name, std::vector<int64_t> dims, std::vector<float> v,
                                      bool raw = true) {
  onnx::TensorProto t;
  t.set_name(name);
  t.set_data_type(onnx::TensorProto::FLOAT);
  for (auto d : dims) t.add_dims(d);
  if (raw) t.set_raw_data(std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float)));
  else
    for (float f : v) t.add_float_data(f);
  return t;
}

inline std::string temp_dir(const std::string& tag) {
  auto p = std::filesystem::temp_directory_path() / ("gpuopt_engine_test_" + tag + "_" + std::to_string(::getpid()));
  std::filesystem::create_directories(p);
  return p.string();
}

inline std::string write_model(const onnx::ModelProto& m, const std::string& dir, const std::string& file = "model.onnx") {
  const std::string path = dir + "/" + file;
  std::ofstream f(path, std::ios::binary);
  m.SerializeToOstream(&f);
  return path;
}

}  // namespace gpuopt::test
