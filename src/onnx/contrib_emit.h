// Writing standard nodes in place of one ONNX Runtime contrib node (contrib_ops.cpp,
// contrib_attention.cpp): each node added is inferred at once, so the next step sees its shape.
#pragma once

#include "ir/op_table.h"
#include "onnx/import_detail.h"

#include <fmt/format.h>

#include <string>
#include <utility>
#include <vector>

namespace gpuopt::onnx_detail {

class Emitter {
 public:
  Emitter(Graph& g, const ContribNode& n) : g_(g), n_(n) {}

  const ContribNode& node() const { return n_; }
  Graph& graph() { return g_; }
  // Input i, or kNoValue when absent.
  ValueId in(size_t i) const { return i < n_.inputs.size() ? n_.inputs[i] : kNoValue; }
  bool has_in(size_t i) const { return in(i) != kNoValue; }
  bool wants_out(size_t i) const { return i < n_.outputs.size() && !n_.outputs[i].empty(); }
  ValueInfo info(ValueId v) const { return g_.info_with_value(v); }
  // The rank of v, or -1 when shape inference could not tell it.
  int64_t rank(ValueId v) const {
    const ValueInfo vi = info(v);
    return vi.rank_known ? static_cast<int64_t>(vi.shape.size()) : -1;
  }
  // Dim i of v's inferred shape (negative i from the end), or kUnknownDim.
  int64_t dim(ValueId v, int64_t i) const {
    const ValueInfo vi = info(v);
    const int64_t r = static_cast<int64_t>(vi.shape.size());
    if (!vi.rank_known || i >= r || i < -r) return kUnknownDim;
    return vi.shape[static_cast<size_t>(i < 0 ? i + r : i)];
  }
  int64_t attr_i(const char* name, int64_t def) const {
    auto it = n_.attrs.find(name);
    return it == n_.attrs.end() ? def : it->second.i;
  }
  float attr_f(const char* name, float def) const {
    auto it = n_.attrs.find(name);
    return it == n_.attrs.end() ? def : it->second.f;
  }
  std::vector<int64_t> attr_ints(const char* name) const {
    auto it = n_.attrs.find(name);
    return it == n_.attrs.end() ? std::vector<int64_t>{} : it->second.ints;
  }

  const char* domain_label() const { return n_.domain.empty() ? "ai.onnx" : n_.domain.c_str(); }
  // "[Attention] node 'attn' (com.microsoft): <reason>"
  template <class... A>
  Status error(fmt::format_string<A...> f, A&&... a) const {
    return Status::InvalidArgument("[{}] node '{}' ({}): {}", n_.op_type, n_.name, domain_label(),
                                   fmt::format(f, std::forward<A>(a)...));
  }
  template <class... A>
  Status unsupported(fmt::format_string<A...> f, A&&... a) const {
    return Status::Unimplemented("[{}] node '{}' ({}): {}", n_.op_type, n_.name, domain_label(),
                                 fmt::format(f, std::forward<A>(a)...));
  }

  // The contrib node's output 0 must be requested; `others` names the outputs not supported.
  Status only_output0(const char* others) const;

  // One standard node; `out_name` (the contrib node's output) names its first output.
  Result<std::vector<ValueId>> op_n(Op op, std::vector<ValueId> ins, size_t num_out, AttributeMap attrs = {},
                                    std::vector<std::string> out_names = {});
  Result<ValueId> op(Op op, std::vector<ValueId> ins, AttributeMap attrs = {}, std::string out_name = "") {
    std::vector<std::string> names;
    if (!out_name.empty()) names.push_back(std::move(out_name));
    GPUOPT_ASSIGN_OR_RETURN(std::vector<ValueId> outs, op_n(op, std::move(ins), 1, std::move(attrs), std::move(names)));
    return outs[0];
  }
  ValueId constant(Tensor t) {
    return g_.add_constant(fmt::format("{}/const_{}", n_.name, counter_++), std::move(t));
  }
  ValueId i64s(const std::vector<int64_t>& v) {
    return constant(Tensor::from_vector(DType::I64, {static_cast<int64_t>(v.size())}, v));
  }
  ValueId i64_scalar(int64_t v) { return constant(Tensor::from_vector(DType::I64, {}, std::vector<int64_t>{v})); }
  static Tensor i64_tensor(int64_t v) { return Tensor::from_vector(DType::I64, {1}, std::vector<int64_t>{v}); }
  static Attribute tensor_attr(Tensor t) {
    Attribute a;
    a.kind = Attribute::Kind::kTensor;
    a.t = std::move(t);
    return a;
  }
  ValueId scalar(DType dt, double v) { return constant(Tensor::from_vector(dt, {}, std::vector<double>{v})); }

  Result<ValueId> reshape(ValueId x, const std::vector<int64_t>& shape, std::string out_name = "") {
    return op(Op::Reshape, {x, i64s(shape)}, {}, std::move(out_name));
  }
  // Unsqueeze in the form of the model's opset (axes an attribute before 13).
  Result<ValueId> unsqueeze(ValueId x, const std::vector<int64_t>& axes) {
    if (g_.opset >= 0 && g_.opset < 13) return op(Op::Unsqueeze, {x}, {{"axes", ints_attr(axes)}});
    return op(Op::Unsqueeze, {x, i64s(axes)});
  }
  // ReduceSum in the form of the model's opset (axes an attribute before 13).
  Result<ValueId> reduce_sum(ValueId x, const std::vector<int64_t>& axes, bool keepdims) {
    AttributeMap a{{"keepdims", int_attr(keepdims ? 1 : 0)}};
    if (g_.opset >= 0 && g_.opset < 13) {
      a["axes"] = ints_attr(axes);
      return op(Op::ReduceSum, {x}, std::move(a));
    }
    return op(Op::ReduceSum, {x, i64s(axes)}, std::move(a));
  }
  Result<ValueId> transpose(ValueId x, const std::vector<int64_t>& perm, std::string out_name = "") {
    return op(Op::Transpose, {x}, {{"perm", ints_attr(perm)}}, std::move(out_name));
  }
  // Dim `axis` of x's shape as a 0-D (scalar) or 1-D [1] int64 tensor.
  Result<ValueId> dim_scalar(ValueId x, int64_t axis) {
    GPUOPT_ASSIGN_OR_RETURN(ValueId s, op(Op::Shape, {x}));
    return op(Op::Gather, {s, i64_scalar(axis)});
  }

 private:
  Graph& g_;
  const ContribNode& n_;
  int counter_ = 0;
};

// com.microsoft Attention and MultiHeadAttention (contrib_attention.cpp).
Result<std::vector<ValueId>> expand_contrib_attention(Emitter& e);
Result<std::vector<ValueId>> expand_contrib_mha(Emitter& e);

}  // namespace gpuopt::onnx_detail
