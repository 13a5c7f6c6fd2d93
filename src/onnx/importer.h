// ONNX protobuf -> ir::Graph.
//
//   GPUOPT_ASSIGN_OR_RETURN(Graph g, load_onnx_model("model.onnx"));
//   // g is topologically sorted; with options.infer_shapes (default) every value has a dtype
//   // and a (possibly symbolic) shape.
//
// Supported: default-domain ("" or "ai.onnx") opsets kMinOpset..kMaxOpset (the README promises
// 7-22; newer opsets load because each op's version is picked by opset, ir/ops_versions.inc), initializers in raw
// or typed form, external data files, Constant nodes (every value_* form), symbolic dims. A
// symbolic or -1 leading input dim is the dynamic batch. Anything else is one clear Status.
#pragma once

#include "core/status.h"
#include "core/tensor.h"
#include "ir/graph.h"

#include <string>

namespace onnx {
class ModelProto;
class TensorProto;
}  // namespace onnx

namespace gpuopt {

constexpr int kMinOpset = 7;
constexpr int kMaxOpset = 27;  // newest default-domain opset in the pinned onnx 1.22 test data

struct ImportOptions {
  bool infer_shapes = true;  // run Graph::infer_shapes after import (load-time, partial info)
};

// Loads a model file; external data files are resolved relative to its folder.
Result<Graph> load_onnx_model(const std::string& path, const ImportOptions& options = {});
// Parses a serialized ModelProto held in memory (the fuzzer's entry point). External data, if
// any, is read relative to `model_dir` (empty: external data is an error).
Result<Graph> load_onnx_model_from_bytes(const void* data, size_t size, const std::string& model_dir = "",
                                         const ImportOptions& options = {});
Result<Graph> import_onnx_model(const onnx::ModelProto& model, const std::string& model_dir,
                                const ImportOptions& options = {});

// A serialized TensorProto file (the conformance data's input_0.pb / output_0.pb).
Result<Tensor> load_tensor_pb(const std::string& path);
// TensorProto -> Tensor; `what` names the tensor in errors ("initializer 'w'").
Result<Tensor> tensor_from_proto(const onnx::TensorProto& proto, const std::string& model_dir, const std::string& what);
// "FLOAT8E4M3FN" for an ONNX TensorProto.DataType number.
std::string onnx_dtype_name(int onnx_type);

}  // namespace gpuopt
