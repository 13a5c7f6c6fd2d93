// Pieces of the ONNX importer shared between its files (not a public interface).
#pragma once

#include "onnx/importer.h"

namespace onnx {
class AttributeProto;
class NodeProto;
}  // namespace onnx

namespace gpuopt::onnx_detail {

// `where` prefixes errors: "[Conv] node 'conv1'".
Result<Attribute> convert_attribute(const onnx::AttributeProto& a, const std::string& where, const std::string& model_dir);
// The tensor a Constant node produces, from whichever value_* attribute it carries.
Result<Tensor> constant_node_value(const onnx::NodeProto& n, const std::string& where, const std::string& model_dir);

}  // namespace gpuopt::onnx_detail
