// AttributeProto -> Attribute, and Constant nodes -> constant tensors.
#include "onnx/import_detail.h"
#include "onnx/onnx.pb.h"

namespace gpuopt::onnx_detail {

Result<Attribute> convert_attribute(const onnx::AttributeProto& a, const std::string& where,
                                    const std::string& model_dir) {
  Attribute out;
  if (!a.ref_attr_name().empty())
    return Status::Unimplemented("{}: attribute '{}' refers to a function attribute; functions are not supported", where,
                                 a.name());
  auto type = a.type();
  if (type == onnx::AttributeProto::UNDEFINED) {
    // IR version < 3 models leave the type out; deduce it from the field that is set.
    if (a.has_f()) type = onnx::AttributeProto::FLOAT;
    else if (a.has_i()) type = onnx::AttributeProto::INT;
    else if (a.has_s()) type = onnx::AttributeProto::STRING;
    else if (a.has_t()) type = onnx::AttributeProto::TENSOR;
    else if (a.floats_size()) type = onnx::AttributeProto::FLOATS;
    else if (a.ints_size()) type = onnx::AttributeProto::INTS;
    else if (a.strings_size()) type = onnx::AttributeProto::STRINGS;
    else if (a.has_g() || a.graphs_size()) type = onnx::AttributeProto::GRAPH;
    else return Status::InvalidArgument("{}: attribute '{}' has no type and no value", where, a.name());
  }
  switch (type) {
    case onnx::AttributeProto::FLOAT: out.kind = Attribute::Kind::kFloat; out.f = a.f(); break;
    case onnx::AttributeProto::INT: out.kind = Attribute::Kind::kInt; out.i = a.i(); break;
    case onnx::AttributeProto::STRING: out.kind = Attribute::Kind::kString; out.s = a.s(); break;
    case onnx::AttributeProto::TENSOR: {
      out.kind = Attribute::Kind::kTensor;
      GPUOPT_ASSIGN_OR_RETURN(out.t, tensor_from_proto(a.t(), model_dir, fmt::format("{}: attribute '{}'", where, a.name())));
      break;
    }
    case onnx::AttributeProto::FLOATS:
      out.kind = Attribute::Kind::kFloats;
      out.floats.assign(a.floats().begin(), a.floats().end());
      break;
    case onnx::AttributeProto::INTS:
      out.kind = Attribute::Kind::kInts;
      out.ints.assign(a.ints().begin(), a.ints().end());
      break;
    case onnx::AttributeProto::STRINGS:
      out.kind = Attribute::Kind::kStrings;
      out.strings.assign(a.strings().begin(), a.strings().end());
      break;
    case onnx::AttributeProto::GRAPH:
    case onnx::AttributeProto::GRAPHS:
      return Status::Unimplemented("{}: attribute '{}' is a subgraph; gpuopt does not support control flow", where,
                                   a.name());
    default:
      return Status::Unimplemented("{}: attribute '{}' has type {}, which gpuopt does not support", where, a.name(),
                                   onnx::AttributeProto_AttributeType_Name(type));
  }
  return out;
}

namespace {

template <typename T>
Tensor vector_tensor(DType dt, const std::vector<T>& v, bool scalar) {
  return Tensor::from_vector(dt, scalar ? Shape{} : Shape{static_cast<int64_t>(v.size())}, v);
}

}  // namespace

Result<Tensor> constant_node_value(const onnx::NodeProto& n, const std::string& where, const std::string& model_dir) {
  if (n.attribute_size() != 1)
    return Status::InvalidArgument("{}: a Constant node needs exactly one value attribute, found {}", where,
                                   n.attribute_size());
  const onnx::AttributeProto& a = n.attribute(0);
  const std::string& k = a.name();
  if (k == "sparse_value") return Status::Unimplemented("{}: sparse Constant values are not supported", where);
  GPUOPT_ASSIGN_OR_RETURN(Attribute attr, convert_attribute(a, where, model_dir));
  if (k == "value" && attr.kind == Attribute::Kind::kTensor) return attr.t;
  if (k == "value_float" && attr.kind == Attribute::Kind::kFloat) return Tensor::scalar_f32(attr.f);
  if (k == "value_floats" && attr.kind == Attribute::Kind::kFloats) return vector_tensor(DType::F32, attr.floats, false);
  if (k == "value_int" && attr.kind == Attribute::Kind::kInt) return Tensor::scalar_i64(attr.i);
  if (k == "value_ints" && attr.kind == Attribute::Kind::kInts) return vector_tensor(DType::I64, attr.ints, false);
  if ((k == "value_string" && attr.kind == Attribute::Kind::kString) ||
      (k == "value_strings" && attr.kind == Attribute::Kind::kStrings)) {
    const bool scalar = k == "value_string";
    const std::vector<std::string> v = scalar ? std::vector<std::string>{attr.s} : attr.strings;
    Tensor t = Tensor::empty(DType::String, scalar ? Shape{} : Shape{static_cast<int64_t>(v.size())});
    for (size_t i = 0; i < v.size(); ++i) t.strings()[i] = v[i];
    return t;
  }
  return Status::InvalidArgument("{}: Constant attribute '{}' is not one of value, value_float(s), value_int(s), "
                                 "value_string(s) with the matching type",
                                 where, k);
}

}  // namespace gpuopt::onnx_detail
