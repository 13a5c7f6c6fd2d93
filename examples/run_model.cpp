// Example: load an ONNX model with gpuopt's C++ API, list its inputs and outputs, run it once
// on inputs filled with 0.5 (dynamic dims set to 1) and print each output's first values.
//
//   build/examples/gpuopt_example_run_model model.onnx
#include "gpuopt/gpuopt.h"

#include <fmt/format.h>

int main(int argc, char** argv) {
  if (argc != 2) {
    fmt::print(stderr, "usage: {} MODEL.onnx\n", argv[0]);
    return 2;
  }
  gpuopt::SessionOptions options;  // defaults: the CPU reference, fp32
  options.device = gpuopt::Device::cpu();
  auto loaded = gpuopt::Session::load(argv[1], options);
  if (!loaded.ok()) {
    fmt::print(stderr, "error: {}\n", loaded.status().to_string());
    return 1;
  }
  const gpuopt::Session& session = **loaded;

  gpuopt::NamedTensors inputs;
  for (const gpuopt::TensorInfo& in : session.inputs()) {
    fmt::print("input  {:<16} {:<5} {}\n", in.name, gpuopt::dtype_name(in.dtype), in.shape_string());
    gpuopt::Shape shape;
    for (int64_t d : in.shape) shape.push_back(d < 0 ? 1 : d);  // a dynamic dim: use 1
    gpuopt::Tensor t = gpuopt::Tensor::empty(in.dtype, shape);
    for (int64_t i = 0; i < t.numel(); ++i) t.set_f64(i, 0.5);
    inputs.emplace_back(in.name, std::move(t));
  }
  for (const gpuopt::TensorInfo& out : session.outputs())
    fmt::print("output {:<16} {:<5} {}\n", out.name, gpuopt::dtype_name(out.dtype), out.shape_string());

  auto outputs = session.run(inputs);
  if (!outputs.ok()) {
    fmt::print(stderr, "error: {}\n", outputs.status().to_string());
    return 1;
  }
  for (const auto& [name, t] : *outputs) {
    fmt::print("{} = {} [", name, t.describe());
    for (int64_t i = 0; i < std::min<int64_t>(t.numel(), 6); ++i) fmt::print("{}{:.5g}", i ? ", " : "", t.get_f64(i));
    fmt::print("{}]\n", t.numel() > 6 ? ", ..." : "");
  }
  return 0;
}
