// Private helpers for the tensor-manipulation CPU kernels (shape_ops, layout, index, create,
// resize): output-info setters for shape inference, dtype-agnostic element copies (bytes of
// dtype_size, or std::string for String tensors) and one generic "gather by per-dimension
// offset tables" routine that Transpose, Slice, Expand, Tile, Pad and DepthToSpace share.
#pragma once

#include "ir/graph.h"

#include <fmt/ranges.h>

#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <vector>

namespace gpuopt::tensor_util {

inline void set_output(InferContext& ctx, size_t i, DType dtype, Shape shape) {
  if (i >= ctx.outputs.size()) return;
  ctx.outputs[i].dtype = dtype;
  ctx.outputs[i].rank_known = true;
  ctx.outputs[i].shape = std::move(shape);
}

// Rank known (dims unknown) when rank >= 0, otherwise nothing but the dtype.
// A rank read from a dim (Reshape's shape input declared [N], say) is left unknown past 2^16:
// a hostile declared dim of 2^31 would otherwise allocate a 16 GiB shape vector.
constexpr int64_t kMaxInferredRank = int64_t{1} << 16;

inline void set_output_rank(InferContext& ctx, size_t i, DType dtype, int64_t rank) {
  if (i >= ctx.outputs.size()) return;
  if (rank > kMaxInferredRank) rank = -1;
  ctx.outputs[i].dtype = dtype;
  ctx.outputs[i].rank_known = rank >= 0;
  ctx.outputs[i].shape = rank >= 0 ? Shape(static_cast<size_t>(rank), kUnknownDim) : Shape{};
}

inline const Tensor* const_input(const InferContext& ctx, size_t i) {
  return ctx.has_input(i) ? ctx.in(i).value : nullptr;
}

inline Status check_inputs(const InferContext& ctx, size_t min_count, size_t max_count) {
  size_t n = ctx.num_inputs();
  while (n > 0 && !ctx.has_input(n - 1)) --n;  // trailing absent optionals do not count
  if (n < min_count || n > max_count) {
    if (min_count == max_count) return ctx.error("expects {} inputs, got {}", min_count, n);
    return ctx.error("expects {} to {} inputs, got {}", min_count, max_count, n);
  }
  for (size_t i = 0; i < min_count; ++i)
    if (!ctx.has_input(i)) return ctx.error("required input {} is missing", i);
  return Status::Ok();
}

// Integer values of a constant 0-d/1-d input (shape, axes, pads, ...); nullopt when unknown.
inline std::optional<std::vector<int64_t>> const_ints(const InferContext& ctx, size_t i) {
  const Tensor* t = const_input(ctx, i);
  if (!t) return std::nullopt;
  return t->to_i64_vector();
}

// Shape arithmetic (ValueInfo::dims_value): the elements of a 0-D/1-D integer input computed from
// shapes, each a known dim (>= 0), a symbol (< -1) or a literal -1 carried from a constant
// (Reshape's "infer"; an unknown dim never makes a shape value). A constant input counts when
// every element is >= -1. nullopt when not known.
constexpr int64_t kMaxDimsValue = 64;
inline std::optional<std::vector<int64_t>> dims_value_of(const InferContext& ctx, size_t i) {
  if (!ctx.has_input(i)) return std::nullopt;
  const ValueInfo& v = ctx.in(i);
  if (!v.value) return v.dims_value;
  const Tensor& t = *v.value;
  if ((t.dtype() != DType::I64 && t.dtype() != DType::I32 && t.dtype() != DType::Bool) || t.rank() > 1 ||
      t.numel() > kMaxDimsValue)
    return std::nullopt;
  std::vector<int64_t> out = t.to_i64_vector();
  for (int64_t d : out)
    if (d < -1) return std::nullopt;  // would read as a symbol
  return out;
}

// Elementwise over shape values (lengths equal, or one of them 1): f(a, b) -> the element, or
// nullopt when it is not known (then no shape value at all).
template <typename F>
std::optional<std::vector<int64_t>> dims_zip(const std::vector<int64_t>& a, const std::vector<int64_t>& b, F&& f) {
  if (a.size() != b.size() && a.size() != 1 && b.size() != 1) return std::nullopt;
  std::vector<int64_t> out(std::max(a.size(), b.size()));
  for (size_t i = 0; i < out.size(); ++i) {
    const std::optional<int64_t> v = f(a[a.size() == 1 ? 0 : i], b[b.size() == 1 ? 0 : i]);
    if (!v || *v < -1) return std::nullopt;
    out[i] = *v;
  }
  return out;
}

// Sets output i's dims_value (elements as dims_value_of's).
inline void set_dims_value(InferContext& ctx, size_t i, std::vector<int64_t> dims) {
  if (i >= ctx.outputs.size() || dims.size() > static_cast<size_t>(kMaxDimsValue)) return;
  ctx.outputs[i].dims_value = std::move(dims);
}

inline Status require_int_tensor(const InferContext& ctx, size_t i, const char* what) {
  if (!ctx.has_input(i)) return Status::Ok();
  DType d = ctx.in(i).dtype;
  if (d != DType::Undefined && d != DType::I64 && d != DType::I32)
    return ctx.error("{} (input {}) must be int64 or int32, got {}", what, i, dtype_name(d));
  return Status::Ok();
}

// Product of dims [b, e): known when every dim is; a lone symbolic dim among 1s stays symbolic.
// Saturates at INT64_MAX (the output size check then refuses the shape) instead of wrapping.
inline int64_t dims_product(const Shape& s, size_t b, size_t e) {
  int64_t p = 1;
  int64_t sym = 0;
  int non_known = 0;
  for (size_t i = b; i < e; ++i) {
    if (s[i] >= 0) {
      if (!checked_mul(p, s[i], &p)) p = std::numeric_limits<int64_t>::max();
    } else {
      ++non_known;
      sym = s[i];
    }
  }
  if (non_known == 0) return p;
  if (non_known == 1 && p == 1) return sym;
  return kUnknownDim;
}

// Two descriptions of the same dim: keep what is known, report a conflict of known extents.
inline bool merge_dim(int64_t a, int64_t b, int64_t* out) {
  if (a >= 0 && b >= 0) {
    *out = a;
    return a == b;
  }
  *out = a >= 0 ? a : (b >= 0 ? b : (a == b ? a : (a != kUnknownDim ? a : b)));
  return true;
}

// --- element copies -----------------------------------------------------------------------

inline void copy_elems(const Tensor& src, int64_t src_off, Tensor& dst, int64_t dst_off, int64_t n) {
  if (n <= 0) return;
  if (src.dtype() == DType::String) {
    for (int64_t i = 0; i < n; ++i) dst.strings()[dst_off + i] = src.strings()[src_off + i];
    return;
  }
  const size_t es = dtype_size(src.dtype());
  std::memcpy(static_cast<char*>(dst.raw()) + dst_off * es, static_cast<const char*>(src.raw()) + src_off * es,
              static_cast<size_t>(n) * es);
}

inline void copy_all(const Tensor& src, Tensor& dst) { copy_elems(src, 0, dst, 0, src.numel()); }

// Out element at coordinates c is input element sum_d tables[d][c_d]. A negative table entry
// means "outside the input": the element gets `fill` (dtype_size bytes; zeros when null).
void gather_by_tables(const Tensor& in, Tensor& out, const std::vector<std::vector<int64_t>>& tables,
                      const void* fill = nullptr, const std::string& fill_str = {});

// out = transpose(in viewed as `view_shape`, perm); out's shape is view_shape permuted
// (possibly reshaped afterwards: only its element order matters).
void transpose_view(const Tensor& in, const Shape& view_shape, const std::vector<int64_t>& perm, Tensor& out);

// Normalizes axis into [0, rank) or fails with "<what> <axis> is out of range for rank <rank>".
inline Status norm_axis(const InferContext& ctx, int64_t* axis, int64_t rank, const char* what = "axis") {
  const int64_t orig = *axis;
  if (!normalize_axis(axis, rank))
    return ctx.error("{} {} is out of range for rank {}", what, orig, rank);
  return Status::Ok();
}

inline double numel_or_zero(const ValueInfo* v) {
  if (!v || !v->rank_known) return 0.0;
  const int64_t n = shape_numel(v->shape);
  return n < 0 ? 0.0 : static_cast<double>(n);
}

}  // namespace gpuopt::tensor_util
