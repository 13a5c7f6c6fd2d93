#include "ops/common/broadcast.h"

#include <algorithm>

namespace gpuopt {

std::optional<int64_t> broadcast_dim(int64_t a, int64_t b) {
  if (a == b) return a;
  if (a == 1) return b;
  if (b == 1) return a;
  const bool ka = dim_is_known(a), kb = dim_is_known(b);
  if (ka && kb) return std::nullopt;  // two different known extents, neither 1
  // The unknown side must be 1 or equal to a known other side, so a known extent wins.
  if (ka) return a;
  if (kb) return b;
  return kUnknownDim;  // two different symbols, or a symbol and an unknown
}

std::optional<Shape> broadcast_shapes(const Shape& a, const Shape& b) {
  const size_t rank = std::max(a.size(), b.size());
  Shape out(rank);
  for (size_t i = 0; i < rank; ++i) {
    // right-aligned: missing leading dims act as 1
    const int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    const int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    std::optional<int64_t> d = broadcast_dim(da, db);
    if (!d) return std::nullopt;
    out[i] = *d;
  }
  return out;
}

std::optional<Shape> broadcast_shapes(const std::vector<Shape>& shapes) {
  Shape acc;
  for (const Shape& s : shapes) {
    std::optional<Shape> r = broadcast_shapes(acc, s);
    if (!r) return std::nullopt;
    acc = std::move(*r);
  }
  return acc;
}

bool broadcastable_to(const Shape& from, const Shape& to) {
  if (from.size() > to.size()) return false;
  const size_t lead = to.size() - from.size();
  for (size_t i = 0; i < from.size(); ++i) {
    const int64_t f = from[i], t = to[lead + i];
    if (f == 1 || f == t) continue;
    if (dim_is_known(f) && dim_is_known(t)) return false;
  }
  return true;
}

Status infer_broadcast(const InferContext& ctx, const std::vector<size_t>& which, ValueInfo* out) {
  std::vector<Shape> shapes;
  for (size_t i : which) {
    const ValueInfo& vi = ctx.in(i);
    if (!vi.rank_known) {
      out->rank_known = false;
      out->shape.clear();
      return Status::Ok();
    }
    shapes.push_back(vi.shape);
  }
  std::optional<Shape> s = broadcast_shapes(shapes);
  if (!s) {
    std::string list;
    for (size_t i = 0; i < shapes.size(); ++i) {
      if (i) list += i + 1 == shapes.size() ? " and " : ", ";
      list += shape_to_string(shapes[i]);
    }
    return ctx.error("shapes {} do not broadcast", list);
  }
  out->rank_known = true;
  out->shape = std::move(*s);
  return Status::Ok();
}

bool dtype_in_classes(DType t, unsigned classes) {
  if (dtype_is_float(t)) return classes & kFloatTypes;
  switch (t) {
    case DType::I8:
    case DType::I16:
    case DType::I32:
    case DType::I64:
      return classes & kSignedInts;
    case DType::U8:
    case DType::U16:
    case DType::U32:
    case DType::U64:
      return classes & kUnsignedInts;
    case DType::Bool:
      return classes & kBoolType;
    case DType::String:
      return classes & kStringType;
    default:
      return false;
  }
}

std::string dtype_classes_string(unsigned c) {
  std::vector<std::string> parts;
  if ((c & kNumericTypes) == kNumericTypes)
    parts.push_back("numeric");
  else {
    if (c & kFloatTypes) parts.push_back("float");
    if ((c & kIntTypes) == kIntTypes)
      parts.push_back("integer");
    else if (c & kSignedInts)
      parts.push_back("signed integer");
    else if (c & kUnsignedInts)
      parts.push_back("unsigned integer");
  }
  if (c & kBoolType) parts.push_back("bool");
  if (c & kStringType) parts.push_back("string");
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i) out += i + 1 == parts.size() ? " or " : ", ";
    out += parts[i];
  }
  return out + (parts.size() == 1 && (parts[0] == "bool" || parts[0] == "string") ? "" : " types");
}

Status check_input_dtype(const InferContext& ctx, size_t i, unsigned classes) {
  if (!ctx.has_input(i)) return Status::Ok();
  const DType t = ctx.in(i).dtype;
  if (t == DType::Undefined || dtype_in_classes(t, classes)) return Status::Ok();
  return ctx.error("input {} has dtype {}; expected {}", i, dtype_name(t), dtype_classes_string(classes));
}

Result<DType> common_input_dtype(const InferContext& ctx, const std::vector<size_t>& which) {
  DType t = DType::Undefined;
  size_t first = 0;
  for (size_t i : which) {
    if (!ctx.has_input(i) || ctx.in(i).dtype == DType::Undefined) continue;
    if (t == DType::Undefined) {
      t = ctx.in(i).dtype;
      first = i;
    } else if (ctx.in(i).dtype != t) {
      return ctx.error("inputs {} and {} have different dtypes ({} and {})", first, i, dtype_name(t),
                       dtype_name(ctx.in(i).dtype));
    }
  }
  return t;
}

double known_numel(const ValueInfo* vi) {
  if (!vi || !vi->rank_known) return 0.0;
  const int64_t n = shape_numel(vi->shape);
  return n < 0 ? 0.0 : static_cast<double>(n);
}

std::vector<int64_t> broadcast_strides(const Shape& in, const Shape& out) {
  GPUOPT_ASSERT(in.size() <= out.size(), "broadcast_strides: rank {} > {}", in.size(), out.size());
  std::vector<int64_t> st(out.size(), 0);
  const size_t lead = out.size() - in.size();
  int64_t stride = 1;
  for (size_t i = in.size(); i-- > 0;) {
    GPUOPT_ASSERT(in[i] == 1 || in[i] == out[lead + i], "broadcast_strides: {} does not broadcast to {}",
                  shape_to_string(in), shape_to_string(out));
    st[lead + i] = in[i] == 1 ? 0 : stride;
    stride *= in[i];
  }
  return st;
}

std::vector<int64_t> broadcast_offsets(const Shape& in, const Shape& out) {
  const BroadcastLoop loop = make_broadcast_loop(out, {in});
  std::vector<int64_t> offs(static_cast<size_t>(loop.numel));
  loop.for_each_row([&](const int64_t* off, int64_t oo) {
    for (int64_t i = 0; i < loop.inner; ++i) offs[oo + i] = off[0] + i * loop.inner_strides[0];
  });
  return offs;
}

BroadcastLoop make_broadcast_loop(const Shape& out, const std::vector<Shape>& ins) {
  const size_t k = ins.size();
  BroadcastLoop loop;
  loop.numel = shape_numel(out);
  GPUOPT_ASSERT(loop.numel >= 0, "make_broadcast_loop: shape {} is not concrete", shape_to_string(out));
  std::vector<std::vector<int64_t>> strides(k);
  for (size_t i = 0; i < k; ++i) strides[i] = broadcast_strides(ins[i], out);

  // Drop extent-1 dims, then merge a dim into the one outside it when every input keeps the
  // same linear relation across the pair (stride_outer == stride_inner * extent_inner).
  std::vector<int64_t> dims;
  std::vector<std::vector<int64_t>> ms(k);
  for (size_t d = 0; d < out.size(); ++d) {
    if (out[d] == 1) continue;
    bool merge = !dims.empty();
    for (size_t i = 0; merge && i < k; ++i) merge = ms[i].back() == strides[i][d] * out[d];
    if (merge) {
      dims.back() *= out[d];
      for (size_t i = 0; i < k; ++i) ms[i].back() = strides[i][d];
    } else {
      dims.push_back(out[d]);
      for (size_t i = 0; i < k; ++i) ms[i].push_back(strides[i][d]);
    }
  }
  loop.inner_strides.assign(k, 0);
  if (dims.empty()) {  // scalar-like output: one row of one element
    loop.inner = 1;
    loop.outer_strides.assign(k, {});
    return loop;
  }
  loop.inner = dims.back();
  for (size_t i = 0; i < k; ++i) loop.inner_strides[i] = ms[i].back();
  dims.pop_back();
  loop.outer_dims = std::move(dims);
  loop.outer_strides.resize(k);
  for (size_t i = 0; i < k; ++i) loop.outer_strides[i].assign(ms[i].begin(), ms[i].end() - 1);
  return loop;
}

}  // namespace gpuopt
