// Classical-ML ops of the ai.onnx.ml domain: LabelEncoder (opset 2+ attributes and opset 4's
// tensor keys/values), Binarizer, ArrayFeatureExtractor. CPU reference.
#include "ops/common/tensor_util.h"

#include <cmath>
#include <map>
#include <unordered_map>

namespace gpuopt {
using namespace tensor_util;

namespace {

// LabelEncoder's keys or values from whichever attribute carries them (`kind`: "keys" or
// "values"): a string, i64 or f32 tensor; undefined when none is given.
Tensor label_table(const Node& n, const char* kind) {
  const std::string k(kind);
  if (const Attribute* a = n.attr(k + "_tensor"); a && a->kind == Attribute::Kind::kTensor) return a->t;
  if (const Attribute* a = n.attr(k + "_strings"); a && a->kind == Attribute::Kind::kStrings) {
    Tensor t = Tensor::empty(DType::String, {static_cast<int64_t>(a->strings.size())});
    t.strings() = a->strings;
    return t;
  }
  if (const Attribute* a = n.attr(k + "_int64s"); a && a->kind == Attribute::Kind::kInts)
    return Tensor::from_vector<int64_t>(DType::I64, {static_cast<int64_t>(a->ints.size())}, a->ints);
  if (const Attribute* a = n.attr(k + "_floats"); a && a->kind == Attribute::Kind::kFloats)
    return Tensor::from_vector<float>(DType::F32, {static_cast<int64_t>(a->floats.size())}, a->floats);
  return Tensor();
}

// The value for keys not in the table: default_tensor, else default_<type> (ONNX's defaults:
// -1, -0.0, "_Unused").
Tensor label_default(const Node& n, DType dt) {
  if (const Attribute* a = n.attr("default_tensor"); a && a->kind == Attribute::Kind::kTensor) return a->t;
  if (dt == DType::String) {
    Tensor t = Tensor::empty(DType::String, {1});
    t.strings()[0] = n.attr_s("default_string", "_Unused");
    return t;
  }
  if (dt == DType::F32) return Tensor::from_vector<float>(DType::F32, {1}, {n.attr_f("default_float", -0.0f)});
  Tensor t = Tensor::zeros(dt, {1});
  t.set_f64(0, static_cast<double>(n.attr_i("default_int64", -1)));
  return t;
}

}  // namespace

Status infer_LabelEncoder(InferContext& ctx) {
  GPUOPT_RETURN_IF_ERROR(check_inputs(ctx, 1, 1));
  const Tensor keys = label_table(ctx.node, "keys"), values = label_table(ctx.node, "values");
  if (!keys.defined() || !values.defined())
    return ctx.error("needs keys_* and values_* attributes (LabelEncoder-2 or later)");
  if (keys.numel() != values.numel()) return ctx.error("has {} keys and {} values", keys.numel(), values.numel());
  const DType xt = ctx.in(0).dtype;
  if (xt != DType::Undefined && xt != keys.dtype())
    return ctx.error("input has dtype {}, the keys {}", dtype_name(xt), dtype_name(keys.dtype()));
  const Tensor def = label_default(ctx.node, values.dtype());
  if (def.dtype() != values.dtype() || def.numel() != 1)
    return ctx.error("default_tensor must be one {} value", dtype_name(values.dtype()));
  ctx.outputs[0] = ctx.in(0);
  ctx.outputs[0].value = nullptr;
  ctx.outputs[0].dims_value.reset();
  ctx.outputs[0].dtype = values.dtype();
  return Status::Ok();
}

Status cpu_LabelEncoder(KernelContext& ctx) {
  const Tensor keys = label_table(ctx.node, "keys"), values = label_table(ctx.node, "values");
  const Tensor def = label_default(ctx.node, values.dtype());
  const Tensor& x = ctx.in(0);
  Tensor& y = ctx.out(0);
  // Index of each key; floats compare by value, with NaN matching a NaN key.
  std::unordered_map<std::string, int64_t> by_string;
  std::map<double, int64_t> by_number;
  int64_t nan_key = -1;
  for (int64_t k = keys.numel() - 1; k >= 0; --k) {  // the first of equal keys wins
    if (keys.dtype() == DType::String) by_string[keys.strings()[k]] = k;
    else if (std::isnan(keys.get_f64(k))) nan_key = k;
    else by_number[keys.get_f64(k)] = k;
  }
  for (int64_t i = 0; i < x.numel(); ++i) {
    int64_t k = -1;
    if (x.dtype() == DType::String) {
      if (auto it = by_string.find(x.strings()[i]); it != by_string.end()) k = it->second;
    } else if (const double v = x.get_f64(i); std::isnan(v)) {
      k = nan_key;
    } else if (auto it = by_number.find(v); it != by_number.end()) {
      k = it->second;
    }
    const Tensor& src = k >= 0 ? values : def;
    const int64_t j = k >= 0 ? k : 0;
    if (y.dtype() == DType::String) y.strings()[i] = src.strings()[j];
    else if (y.dtype() == DType::I64) y.data<int64_t>()[i] = src.get_i64(j);
    else y.set_f64(i, src.get_f64(j));
  }
  return Status::Ok();
}
double flops_LabelEncoder(const FlopsContext&) { return 0.0; }

Status infer_Binarizer(InferContext& ctx) {
  GPUOPT_RETURN_IF_ERROR(check_inputs(ctx, 1, 1));
  const DType t = ctx.in(0).dtype;
  if (t != DType::Undefined && !dtype_is_float(t) && !dtype_is_integer(t))
    return ctx.error("input has dtype {}; expected a numeric type", dtype_name(t));
  ctx.outputs[0] = ctx.in(0);
  ctx.outputs[0].value = nullptr;
  ctx.outputs[0].dims_value.reset();
  return Status::Ok();
}
Status cpu_Binarizer(KernelContext& ctx) {
  const double threshold = ctx.node.attr_f("threshold", 0.0f);
  for (int64_t i = 0; i < ctx.in(0).numel(); ++i) ctx.out(0).set_f64(i, ctx.in(0).get_f64(i) > threshold ? 1.0 : 0.0);
  return Status::Ok();
}
double flops_Binarizer(const FlopsContext& ctx) {
  return ctx.inputs.empty() || !ctx.inputs[0] || !ctx.inputs[0]->rank_known ? 0.0
                                                                            : static_cast<double>(shape_numel(ctx.inputs[0]->shape));
}

// Y = X[..., indices] with the indices flattened; a 1-D X gives a [1, n] matrix (as ONNX
// Runtime does).
Status infer_ArrayFeatureExtractor(InferContext& ctx) {
  GPUOPT_RETURN_IF_ERROR(check_inputs(ctx, 2, 2));
  if (ctx.in(1).dtype != DType::Undefined && ctx.in(1).dtype != DType::I64)
    return ctx.error("indices have dtype {}; expected i64", dtype_name(ctx.in(1).dtype));
  ctx.outputs[0].dtype = ctx.in(0).dtype;
  if (!ctx.in(0).rank_known || !ctx.in(1).rank_known) return Status::Ok();
  const Shape& x = ctx.in(0).shape;
  if (x.empty()) return ctx.error("X must have at least one dimension");
  const int64_t n = shape_is_concrete(ctx.in(1).shape) ? shape_numel(ctx.in(1).shape) : kUnknownDim;
  Shape out = x.size() == 1 ? Shape{1} : Shape(x.begin(), x.end() - 1);
  out.push_back(n);
  set_output(ctx, 0, ctx.in(0).dtype, out);
  return Status::Ok();
}
Status cpu_ArrayFeatureExtractor(KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  const std::vector<int64_t> idx = ctx.in(1).to_i64_vector();
  const int64_t D = x.dim(-1), rows = x.numel() / std::max<int64_t>(D, 1), n = static_cast<int64_t>(idx.size());
  for (int64_t j : idx)
    if (j < 0 || j >= D) return ctx.error("index {} is out of range for the last dimension ({})", j, D);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < n; ++j) copy_elems(x, r * D + idx[static_cast<size_t>(j)], ctx.out(0), r * n + j, 1);
  return Status::Ok();
}
double flops_ArrayFeatureExtractor(const FlopsContext&) { return 0.0; }

}  // namespace gpuopt
