// Layout ops: Transpose, Concat, Split, Slice, Tile, DepthToSpace, SpaceToDepth, Trilu, Pad,
// Expand. Most are "out[c] = in[sum_d table_d[c_d]]" for per-dimension
// offset tables, so one gather routine does the moving for every dtype.
#include "ops/common/broadcast.h"
#include "ops/common/tensor_util.h"

#include <algorithm>
#include <functional>
#include <numeric>

namespace gpuopt {
using namespace tensor_util;

namespace tensor_util {

void gather_by_tables(const Tensor& in, Tensor& out, const std::vector<std::vector<int64_t>>& tables,
                      const void* fill, const std::string& fill_str) {
  const int64_t n = out.numel();
  if (n == 0) return;
  const size_t r = out.shape().size();
  const bool is_str = in.dtype() == DType::String;
  const size_t es = dtype_size(in.dtype());
  const char* src = static_cast<const char*>(in.raw());
  char* dst = static_cast<char*>(out.raw());
  auto put = [&](int64_t o, int64_t s) {
    if (is_str) out.strings()[o] = s < 0 ? fill_str : in.strings()[s];
    else if (s >= 0) std::memcpy(dst + o * es, src + s * es, es);
    else if (fill) std::memcpy(dst + o * es, fill, es);
    else std::memset(dst + o * es, 0, es);
  };
  if (r == 0) {
    put(0, 0);
    return;
  }
  const std::vector<int64_t>& inner = tables[r - 1];
  const int64_t inner_n = out.shape()[r - 1];
  bool inner_contig = true;
  for (int64_t j = 1; j < inner_n && inner_contig; ++j) inner_contig = inner[j] == inner[0] + j && inner[0] >= 0;
  if (inner_n > 0 && inner[0] < 0) inner_contig = false;
  std::vector<int64_t> c(r, 0);
  int64_t o = 0;
  while (o < n) {
    int64_t base = 0;
    bool outside = false;
    for (size_t d = 0; d + 1 < r; ++d) {
      const int64_t t = tables[d][c[d]];
      if (t < 0) outside = true;
      base += t;
    }
    if (!outside && inner_contig && !is_str) {
      std::memcpy(dst + o * es, src + (base + inner[0]) * es, static_cast<size_t>(inner_n) * es);
    } else {
      for (int64_t j = 0; j < inner_n; ++j) put(o + j, outside || inner[j] < 0 ? -1 : base + inner[j]);
    }
    o += inner_n;
    for (int64_t d = static_cast<int64_t>(r) - 2; d >= 0; --d) {
      if (++c[d] < out.shape()[d]) break;
      c[d] = 0;
    }
  }
}

void transpose_view(const Tensor& in, const Shape& view_shape, const std::vector<int64_t>& perm, Tensor& out) {
  const std::vector<int64_t> st = shape_strides(view_shape);
  std::vector<std::vector<int64_t>> tables(perm.size());
  Shape out_shape(perm.size());
  for (size_t d = 0; d < perm.size(); ++d) {
    out_shape[d] = view_shape[perm[d]];
    tables[d].resize(static_cast<size_t>(out_shape[d]));
    for (int64_t i = 0; i < out_shape[d]; ++i) tables[d][i] = i * st[perm[d]];
  }
  Tensor view = Tensor::wrap(out.dtype(), out_shape, out.storage(), out.offset());
  gather_by_tables(in, view, tables);
}

}  // namespace tensor_util

// --- Transpose ----------------------------------------------------------------------------

namespace {
std::vector<int64_t> transpose_perm(const Node& node, size_t rank) {
  std::vector<int64_t> perm = node.attr_ints("perm");
  if (perm.empty() && !node.has_attr("perm")) {
    perm.resize(rank);
    std::iota(perm.rbegin(), perm.rend(), 0);
  }
  return perm;
}
}  // namespace

Status infer_Transpose(InferContext& ctx) {
  GPUOPT_RETURN_IF_ERROR(check_inputs(ctx, 1, 1));
  const ValueInfo& in = ctx.in(0);
  if (!in.rank_known) {
    const int64_t rank = ctx.node.has_attr("perm") ? static_cast<int64_t>(ctx.node.attr_ints("perm").size()) : -1;
    set_output_rank(ctx, 0, in.dtype, rank);
    return Status::Ok();
  }
  const std::vector<int64_t> perm = transpose_perm(ctx.node, in.shape.size());
  if (perm.size() != in.shape.size())
    return ctx.error("perm {} has {} entries but the input has rank {}", dims_string(perm), perm.size(),
                     in.shape.size());
  std::vector<bool> seen(perm.size(), false);
  Shape out;
  for (int64_t p : perm) {
    if (p < 0 || p >= static_cast<int64_t>(perm.size()) || seen[p])
      return ctx.error("perm {} is not a permutation of 0..{}", dims_string(perm), perm.size() - 1);
    seen[p] = true;
    out.push_back(in.shape[p]);
  }
  set_output(ctx, 0, in.dtype, std::move(out));
  return Status::Ok();
}
Status cpu_Transpose(KernelContext& ctx) {
  transpose_view(ctx.in(0), ctx.in(0).shape(), transpose_perm(ctx.node, ctx.in(0).shape().size()), ctx.out(0));
  return Status::Ok();
}
double flops_Transpose(const FlopsContext&) { return 0.0; }

// --- Concat -------------------------------------------------------------------------------

Status infer_Concat(InferContext& ctx) {
  if (ctx.num_inputs() == 0) return ctx.error("needs at least one input");
  for (size_t i = 0; i < ctx.num_inputs(); ++i)
    if (!ctx.has_input(i)) return ctx.error("input {} is missing", i);
  if (!ctx.node.has_attr("axis") && ctx.opset >= 4) return ctx.error("attribute 'axis' is required");
  const DType dt = ctx.in(0).dtype;
  int64_t rank = -1;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    const ValueInfo& v = ctx.in(i);
    if (v.dtype != dt && v.dtype != DType::Undefined && dt != DType::Undefined)
      return ctx.error("input {} has dtype {} but input 0 has {}", i, dtype_name(v.dtype), dtype_name(dt));
    if (!v.rank_known) continue;
    if (rank >= 0 && static_cast<int64_t>(v.shape.size()) != rank)
      return ctx.error("input {} has rank {} but an earlier input has rank {}", i, v.shape.size(), rank);
    rank = static_cast<int64_t>(v.shape.size());
  }
  if (rank < 0) {
    set_output_rank(ctx, 0, dt, -1);
    return Status::Ok();
  }
  int64_t axis = ctx.node.attr_i("axis", 1);
  GPUOPT_RETURN_IF_ERROR(norm_axis(ctx, &axis, rank));
  Shape out(static_cast<size_t>(rank), kUnknownDim);
  int64_t axis_sum = 0;
  bool first = true;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    const ValueInfo& v = ctx.in(i);
    if (!v.rank_known) {
      axis_sum = kUnknownDim;
      continue;
    }
    for (int64_t d = 0; d < rank; ++d) {
      if (d == axis) continue;
      if (first) out[d] = v.shape[d];
      else if (!merge_dim(out[d], v.shape[d], &out[d]))
        return ctx.error("input {} has shape {} which does not match {} outside axis {}", i,
                         shape_to_string(v.shape), shape_to_string(ctx.in(0).shape), axis);
    }
    first = false;
    if (axis_sum >= 0 && v.shape[axis] >= 0 && !checked_add(axis_sum, v.shape[axis], &axis_sum))
      return ctx.error("the inputs' extents along axis {} overflow an int64", axis);
    if (v.shape[axis] < 0) axis_sum = kUnknownDim;
  }
  out[axis] = axis_sum;
  set_output(ctx, 0, dt, std::move(out));
  return Status::Ok();
}
Status cpu_Concat(KernelContext& ctx) {
  Tensor& out = ctx.out(0);
  int64_t axis = ctx.node.attr_i("axis", 1);
  normalize_axis(&axis, out.rank());
  const int64_t outer = shape_numel(Shape(out.shape().begin(), out.shape().begin() + axis));
  const int64_t inner = shape_numel(Shape(out.shape().begin() + axis + 1, out.shape().end()));
  const int64_t out_block = out.shape()[axis] * inner;
  int64_t at = 0;
  for (const Tensor* t : ctx.inputs) {
    const int64_t block = t->shape()[axis] * inner;
    for (int64_t o = 0; o < outer; ++o) copy_elems(*t, o * block, out, o * out_block + at, block);
    at += block;
  }
  return Status::Ok();
}
double flops_Concat(const FlopsContext&) { return 0.0; }

// --- Split --------------------------------------------------------------------------------

namespace {
// Split sizes: input (opset 13+) or attribute; else num_outputs (18+, last part smaller) or
// equal parts.
Status split_sizes(const InferContext& ctx, int64_t extent, std::vector<int64_t>* sizes, bool* known) {
  const size_t n = ctx.outputs.size();
  *known = true;
  std::optional<std::vector<int64_t>> split;
  if (ctx.node.has_attr("split")) split = ctx.node.attr_ints("split");
  else if (ctx.has_input(1)) {
    split = const_ints(ctx, 1);
    if (!split) {
      *known = false;
      return Status::Ok();
    }
  }
  if (split) {
    if (split->size() != n)
      return ctx.error("split {} has {} entries for {} outputs", dims_string(*split), split->size(), n);
    int64_t sum = 0;
    for (int64_t s : *split) {
      if (s < 0) return ctx.error("split {} has a negative size", dims_string(*split));
      if (!checked_add(sum, s, &sum)) return ctx.error("split {} sums past 2^63", dims_string(*split));
    }
    if (extent >= 0 && sum != extent)
      return ctx.error("split {} sums to {} but the axis has extent {}", dims_string(*split), sum, extent);
    *sizes = *split;
    return Status::Ok();
  }
  if (ctx.node.has_attr("num_outputs") && ctx.node.attr_i("num_outputs", 0) != static_cast<int64_t>(n))
    return ctx.error("num_outputs {} does not match the node's {} outputs", ctx.node.attr_i("num_outputs", 0), n);
  if (extent < 0) {
    *known = false;
    return Status::Ok();
  }
  if (ctx.node.has_attr("num_outputs")) {
    const int64_t chunk = (extent + static_cast<int64_t>(n) - 1) / static_cast<int64_t>(n);
    for (size_t i = 0; i < n; ++i) sizes->push_back(std::clamp<int64_t>(extent - chunk * static_cast<int64_t>(i), 0, chunk));
    return Status::Ok();
  }
  if (extent % static_cast<int64_t>(n) != 0)
    return ctx.error("axis extent {} does not split evenly into {} outputs", extent, n);
  sizes->assign(n, extent / static_cast<int64_t>(n));
  return Status::Ok();
}
}  // namespace

Status infer_Split(InferContext& ctx) {
  GPUOPT_RETURN_IF_ERROR(check_inputs(ctx, 1, 2));
  GPUOPT_RETURN_IF_ERROR(require_int_tensor(ctx, 1, "split"));
  if (ctx.outputs.empty()) return ctx.error("has no outputs");
  const ValueInfo& in = ctx.in(0);
  if (!in.rank_known) {
    for (size_t i = 0; i < ctx.outputs.size(); ++i) set_output_rank(ctx, i, in.dtype, -1);
    return Status::Ok();
  }
  int64_t axis = ctx.node.attr_i("axis", 0);
  GPUOPT_RETURN_IF_ERROR(norm_axis(ctx, &axis, static_cast<int64_t>(in.shape.size())));
  std::vector<int64_t> sizes;
  bool known = true;
  GPUOPT_RETURN_IF_ERROR(split_sizes(ctx, in.shape[axis], &sizes, &known));
  for (size_t i = 0; i < ctx.outputs.size(); ++i) {
    Shape s = in.shape;
    s[axis] = known ? sizes[i] : kUnknownDim;
    set_output(ctx, i, in.dtype, std::move(s));
  }
  return Status::Ok();
}
Status cpu_Split(KernelContext& ctx) {
  const Tensor& in = ctx.in(0);
  int64_t axis = ctx.node.attr_i("axis", 0);
  normalize_axis(&axis, in.rank());
  const int64_t outer = shape_numel(Shape(in.shape().begin(), in.shape().begin() + axis));
  const int64_t inner = shape_numel(Shape(in.shape().begin() + axis + 1, in.shape().end()));
  const int64_t in_block = in.shape()[axis] * inner;
  // Sizes again (not from the output shapes: an output nobody asked for has no tensor).
  std::vector<int64_t> sizes;
  const int64_t extent = in.shape()[axis];
  const auto n = static_cast<int64_t>(ctx.outputs.size());
  if (ctx.node.has_attr("split")) sizes = ctx.node.attr_ints("split");
  else if (ctx.has_input(1)) sizes = ctx.in(1).to_i64_vector();
  else {
    const int64_t chunk = ctx.node.has_attr("num_outputs") ? (extent + n - 1) / n : extent / n;
    for (int64_t i = 0; i < n; ++i) sizes.push_back(std::clamp<int64_t>(extent - chunk * i, 0, chunk));
  }
  int64_t at = 0;
  for (size_t i = 0; i < ctx.outputs.size(); ++i) {
    const int64_t block = sizes[i] * inner;
    if (Tensor* t = ctx.outputs[i])
      for (int64_t o = 0; o < outer; ++o) copy_elems(in, o * in_block + at, *t, o * block, block);
    at += block;
  }
  return Status::Ok();
}
double flops_Split(const FlopsContext&) { return 0.0; }

// --- Slice --------------------------------------------------------------------------------

namespace {
struct SliceAxis {
  int64_t start = 0, step = 1, count = 0;
};

// Clamps one axis per the ONNX rules (negative indices wrap once; steps may be negative).
SliceAxis slice_axis(int64_t dim, int64_t start, int64_t end, int64_t step) {
  SliceAxis a;
  a.step = step;
  if (start < 0) start += dim;
  if (end < 0) end += dim;
  if (step > 0) {
    start = std::clamp<int64_t>(start, 0, dim);
    end = std::clamp<int64_t>(end, 0, dim);
    a.count = end > start ? (end - start + step - 1) / step : 0;
  } else if (dim == 0) {
    a.count = 0;
  } else {
    start = std::clamp<int64_t>(start, 0, dim - 1);
    end = std::clamp<int64_t>(end, -1, dim - 1);
    a.count = start > end ? (start - end + (-step) - 1) / (-step) : 0;
  }
  a.start = start;
  return a;
}

struct SliceArgs {
  std::vector<int64_t> starts, ends, axes, steps;
};

// Opset 1-9: attributes; 10+: inputs 1..4. Returns false when some input value is unknown.
template <typename GetInts>
Status slice_args(const Node& node, int opset, GetInts get, SliceArgs* a, bool* known,
                  const std::function<Status(std::string)>& fail) {
  *known = true;
  if (opset < 10) {
    a->starts = node.attr_ints("starts");
    a->ends = node.attr_ints("ends");
    a->axes = node.attr_ints("axes");
  } else {
    std::optional<std::vector<int64_t>> v[5];
    for (size_t i = 1; i < 5; ++i) {
      bool present = true;
      v[i] = get(i, &present);
      if (present && !v[i]) *known = false;
    }
    if (!*known) return Status::Ok();
    a->starts = v[1].value_or(std::vector<int64_t>{});
    a->ends = v[2].value_or(std::vector<int64_t>{});
    a->axes = v[3].value_or(std::vector<int64_t>{});
    a->steps = v[4].value_or(std::vector<int64_t>{});
  }
  const size_t n = a->starts.size();
  if (a->ends.size() != n) return fail(fmt::format("starts has {} entries but ends has {}", n, a->ends.size()));
  if (a->axes.empty()) {
    a->axes.resize(n);
    std::iota(a->axes.begin(), a->axes.end(), 0);
  }
  if (a->steps.empty()) a->steps.assign(n, 1);
  if (a->axes.size() != n || a->steps.size() != n)
    return fail(fmt::format("starts, ends, axes and steps must have the same length ({}, {}, {}, {})", n,
                            a->ends.size(), a->axes.size(), a->steps.size()));
  for (int64_t s : a->steps)
    if (s == 0) return fail("steps must not be 0");
  return Status::Ok();
}
}  // namespace

Status infer_Slice(InferContext& ctx) {
  GPUOPT_RETURN_IF_ERROR(check_inputs(ctx, ctx.opset < 10 ? 1 : 3, ctx.opset < 10 ? 1 : 5));
  for (size_t i = 1; i < 5; ++i) GPUOPT_RETURN_IF_ERROR(require_int_tensor(ctx, i, "starts/ends/axes/steps"));
  const ValueInfo& in = ctx.in(0);
  if (!in.rank_known) {
    set_output_rank(ctx, 0, in.dtype, -1);
    return Status::Ok();
  }
  const int64_t r = static_cast<int64_t>(in.shape.size());
  SliceArgs a;
  bool known = true;
  GPUOPT_RETURN_IF_ERROR(slice_args(
      ctx.node, ctx.opset,
      [&](size_t i, bool* present) {
        *present = ctx.has_input(i);
        return const_ints(ctx, i);
      },
      &a, &known, [&](std::string m) { return ctx.error("{}", m); }));
  Shape out = in.shape;
  if (!known) {
    // Axes known: only those dims change. Otherwise every dim may.
    auto axes = ctx.has_input(3) ? const_ints(ctx, 3) : std::nullopt;
    for (int64_t d = 0; d < r; ++d)
      if (!axes) out[d] = kUnknownDim;
    if (axes)
      for (int64_t ax : *axes)
        if (normalize_axis(&ax, r)) out[ax] = kUnknownDim;
    set_output(ctx, 0, in.dtype, std::move(out));
    return Status::Ok();
  }
  std::vector<bool> seen(static_cast<size_t>(r), false);
  for (size_t i = 0; i < a.axes.size(); ++i) {
    int64_t ax = a.axes[i];
    GPUOPT_RETURN_IF_ERROR(norm_axis(ctx, &ax, r, "axes entry"));
    if (seen[ax]) return ctx.error("axis {} is repeated in axes {}", ax, dims_string(a.axes));
    seen[ax] = true;
    const int64_t dim = in.shape[ax];
    if (dim >= 0) out[ax] = slice_axis(dim, a.starts[i], a.ends[i], a.steps[i]).count;
    else if (a.starts[i] == 0 && a.steps[i] == 1 && a.ends[i] >= (int64_t{1} << 31)) out[ax] = dim;  // [0:inf]
    else out[ax] = kUnknownDim;
  }
  set_output(ctx, 0, in.dtype, std::move(out));
  return Status::Ok();
}

Status cpu_Slice(KernelContext& ctx) {
  const Tensor& in = ctx.in(0);
  SliceArgs a;
  bool known = true;
  GPUOPT_RETURN_IF_ERROR(slice_args(
      ctx.node, ctx.opset,
      [&](size_t i, bool* present) -> std::optional<std::vector<int64_t>> {
        *present = ctx.has_input(i);
        if (!*present) return std::nullopt;
        return ctx.in(i).to_i64_vector();
      },
      &a, &known, [&](std::string m) { return ctx.error("{}", m); }));
  const std::vector<int64_t> st = shape_strides(in.shape());
  std::vector<std::vector<int64_t>> tables(in.shape().size());
  std::vector<SliceAxis> per(in.shape().size());
  for (size_t d = 0; d < per.size(); ++d) per[d].count = in.shape()[d];
  for (size_t i = 0; i < a.axes.size(); ++i) {
    int64_t ax = a.axes[i];
    normalize_axis(&ax, in.rank());
    per[ax] = slice_axis(in.shape()[ax], a.starts[i], a.ends[i], a.steps[i]);
  }
  for (size_t d = 0; d < per.size(); ++d)
    for (int64_t c = 0; c < per[d].count; ++c) tables[d].push_back((per[d].start + c * per[d].step) * st[d]);
  gather_by_tables(in, ctx.out(0), tables);
  return Status::Ok();
}
double flops_Slice(const FlopsContext&) { return 0.0; }

// --- Tile ---------------------------------------------------------------------------------

Status infer_Tile(InferContext& ctx) {
  GPUOPT_RETURN_IF_ERROR(check_inputs(ctx, 2, 2));
  GPUOPT_RETURN_IF_ERROR(require_int_tensor(ctx, 1, "repeats"));
  const ValueInfo& in = ctx.in(0);
  auto reps = const_ints(ctx, 1);
  if (!in.rank_known || !reps) {
    set_output_rank(ctx, 0, in.dtype, in.rank_known ? static_cast<int64_t>(in.shape.size()) : -1);
    return Status::Ok();
  }
  if (reps->size() != in.shape.size())
    return ctx.error("repeats {} has {} entries but the input has rank {}", dims_string(*reps), reps->size(),
                     in.shape.size());
  Shape out = in.shape;
  for (size_t d = 0; d < out.size(); ++d) {
    if ((*reps)[d] < 0) return ctx.error("repeats {} has a negative entry", dims_string(*reps));
    if (out[d] < 0) {
      out[d] = (*reps)[d] == 1 ? out[d] : kUnknownDim;
    } else if (!checked_mul(out[d], (*reps)[d], &out[d])) {
      return ctx.error("repeats {} overflow the shape {}", dims_string(*reps), shape_to_string(in.shape));
    }
  }
  set_output(ctx, 0, in.dtype, std::move(out));
  return Status::Ok();
}
Status cpu_Tile(KernelContext& ctx) {
  const Tensor& in = ctx.in(0);
  const std::vector<int64_t> st = shape_strides(in.shape());
  std::vector<std::vector<int64_t>> tables(in.shape().size());
  for (size_t d = 0; d < tables.size(); ++d)
    for (int64_t c = 0; c < ctx.out(0).shape()[d]; ++c) tables[d].push_back((c % in.shape()[d]) * st[d]);
  gather_by_tables(in, ctx.out(0), tables);
  return Status::Ok();
}
double flops_Tile(const FlopsContext&) { return 0.0; }

// --- DepthToSpace / SpaceToDepth ----------------------------------------------------------

namespace {
Status d2s_check(InferContext& ctx, int64_t* b) {
  GPUOPT_RETURN_IF_ERROR(check_inputs(ctx, 1, 1));
  *b = ctx.node.attr_i("blocksize", 0);
  if (*b <= 0 || *b > (int64_t{1} << 20)) return ctx.error("attribute 'blocksize' must be in [1, 2^20], got {}", *b);
  const ValueInfo& in = ctx.in(0);
  if (in.rank_known && in.shape.size() != 4) return ctx.error("input must be 4-D (NCHW), got rank {}", in.shape.size());
  return Status::Ok();
}
// d * f; an overflow (a hostile blocksize) makes the dim unknown here and is refused by d2s_check.
int64_t mul_dim(int64_t d, int64_t f) { return d >= 0 && checked_mul(d, f, &d) ? d : kUnknownDim; }
}  // namespace

Status infer_DepthToSpace(InferContext& ctx) {
  int64_t b = 0;
  GPUOPT_RETURN_IF_ERROR(d2s_check(ctx, &b));
  const ValueInfo& in = ctx.in(0);
  if (!in.rank_known) {
    set_output_rank(ctx, 0, in.dtype, 4);
    return Status::Ok();
  }
  const std::string mode = ctx.node.attr_s("mode", "DCR");
  if (mode != "DCR" && mode != "CRD") return ctx.error("mode '{}' must be DCR or CRD", mode);
  const int64_t c = in.shape[1];
  if (c >= 0 && c % (b * b) != 0) return ctx.error("channels {} are not divisible by blocksize^2 = {}", c, b * b);
  set_output(ctx, 0, in.dtype, {in.shape[0], c >= 0 ? c / (b * b) : kUnknownDim, mul_dim(in.shape[2], b), mul_dim(in.shape[3], b)});
  return Status::Ok();
}
Status cpu_DepthToSpace(KernelContext& ctx) {
  const Shape& s = ctx.in(0).shape();
  const int64_t b = ctx.node.attr_i("blocksize", 1), n = s[0], c = s[1] / (b * b), h = s[2], w = s[3];
  if (ctx.node.attr_s("mode", "DCR") == "DCR")
    transpose_view(ctx.in(0), {n, b, b, c, h, w}, {0, 3, 4, 1, 5, 2}, ctx.out(0));
  else
    transpose_view(ctx.in(0), {n, c, b, b, h, w}, {0, 1, 4, 2, 5, 3}, ctx.out(0));
  return Status::Ok();
}
double flops_DepthToSpace(const FlopsContext&) { return 0.0; }

Status infer_SpaceToDepth(InferContext& ctx) {
  int64_t b = 0;
  GPUOPT_RETURN_IF_ERROR(d2s_check(ctx, &b));
  const ValueInfo& in = ctx.in(0);
  if (!in.rank_known) {
    set_output_rank(ctx, 0, in.dtype, 4);
    return Status::Ok();
  }
  Shape out = {in.shape[0], mul_dim(in.shape[1], b * b), kUnknownDim, kUnknownDim};
  for (int d = 2; d < 4; ++d) {
    if (in.shape[d] >= 0 && in.shape[d] % b != 0)
      return ctx.error("spatial dim {} of shape {} is not divisible by blocksize {}", d, shape_to_string(in.shape), b);
    if (in.shape[d] >= 0) out[d] = in.shape[d] / b;
  }
  set_output(ctx, 0, in.dtype, std::move(out));
  return Status::Ok();
}
Status cpu_SpaceToDepth(KernelContext& ctx) {
  const Shape& s = ctx.in(0).shape();
  const int64_t b = ctx.node.attr_i("blocksize", 1);
  transpose_view(ctx.in(0), {s[0], s[1], s[2] / b, b, s[3] / b, b}, {0, 3, 5, 1, 2, 4}, ctx.out(0));
  return Status::Ok();
}
double flops_SpaceToDepth(const FlopsContext&) { return 0.0; }

// --- Trilu --------------------------------------------------------------------------------

Status infer_Trilu(InferContext& ctx) {
  GPUOPT_RETURN_IF_ERROR(check_inputs(ctx, 1, 2));
  GPUOPT_RETURN_IF_ERROR(require_int_tensor(ctx, 1, "k"));
  const ValueInfo& in = ctx.in(0);
  if (in.rank_known && in.shape.size() < 2) return ctx.error("input must have rank >= 2, got {}", in.shape.size());
  if (ctx.has_input(1) && ctx.in(1).rank_known && shape_numel(ctx.in(1).shape) > 1)
    return ctx.error("k must be a scalar, got shape {}", shape_to_string(ctx.in(1).shape));
  ctx.outputs[0] = in;
  ctx.outputs[0].value = nullptr;
  return Status::Ok();
}
Status cpu_Trilu(KernelContext& ctx) {
  const Tensor& in = ctx.in(0);
  Tensor& out = ctx.out(0);
  const int64_t k = ctx.has_input(1) && ctx.in(1).numel() > 0 ? ctx.in(1).get_i64(0) : 0;
  const bool upper = ctx.node.attr_i("upper", 1) != 0;
  const int64_t rows = in.dim(-2), cols = in.dim(-1);
  const int64_t mats = rows * cols == 0 ? 0 : in.numel() / (rows * cols);
  const size_t es = dtype_size(in.dtype());
  if (out.nbytes()) std::memset(out.raw(), 0, out.nbytes());  // an empty output has no buffer
  for (int64_t m = 0; m < mats; ++m)
    for (int64_t i = 0; i < rows; ++i) {
      // Kept columns: j >= i + k (upper) or j <= i + k (lower).
      const int64_t lo = upper ? std::clamp<int64_t>(i + k, 0, cols) : 0;
      const int64_t hi = upper ? cols : std::clamp<int64_t>(i + k + 1, 0, cols);
      const int64_t row = (m * rows + i) * cols;
      if (hi > lo) std::memcpy(static_cast<char*>(out.raw()) + (row + lo) * es,
                               static_cast<const char*>(in.raw()) + (row + lo) * es, static_cast<size_t>(hi - lo) * es);
    }
  return Status::Ok();
}
double flops_Trilu(const FlopsContext&) { return 0.0; }

// --- Pad ----------------------------------------------------------------------------------

namespace {
// One element of `dtype` holding v (integers exactly, floats rounded once).
Tensor scalar_of(DType dtype, const Tensor* v, double attr_value) {
  Tensor t = Tensor::zeros(dtype, {});
  if (dtype == DType::String) return t;
  if (v && v->numel() > 0) {
    if (dtype_is_integer(dtype) && dtype_is_integer(v->dtype())) {
      dispatch_dtype(dtype, [&](auto tag) {
        using T = decltype(tag);
        if constexpr (std::is_integral_v<T>) *t.data<T>() = static_cast<T>(v->get_i64(0));
      });
    } else {
      t.set_f64(0, v->get_f64(0));
    }
  } else {
    t.set_f64(0, attr_value);
  }
  return t;
}

// Pads in ONNX layout [b_0..b_{n-1}, e_0..e_{n-1}] over `axes`, expanded to every dim.
Status pad_amounts(const Node& node, int opset, int64_t rank, const std::optional<std::vector<int64_t>>& pads_in,
                   const std::optional<std::vector<int64_t>>& axes_in, std::vector<int64_t>* begin,
                   std::vector<int64_t>* end, const std::function<Status(std::string)>& fail) {
  std::vector<int64_t> pads = opset < 11 ? node.attr_ints(opset < 2 ? "paddings" : "pads") : *pads_in;
  std::vector<int64_t> axes;
  if (axes_in) axes = *axes_in;
  else {
    axes.resize(static_cast<size_t>(rank));
    std::iota(axes.begin(), axes.end(), 0);
  }
  if (pads.size() != 2 * axes.size())
    return fail(fmt::format("pads {} must have 2 x {} entries", dims_string(pads), axes.size()));
  begin->assign(static_cast<size_t>(rank), 0);
  end->assign(static_cast<size_t>(rank), 0);
  for (size_t i = 0; i < axes.size(); ++i) {
    int64_t ax = axes[i];
    if (!normalize_axis(&ax, rank)) return fail(fmt::format("axes entry {} is out of range for rank {}", axes[i], rank));
    (*begin)[ax] = pads[i];
    (*end)[ax] = pads[i + axes.size()];
  }
  return Status::Ok();
}
}  // namespace

Status infer_Pad(InferContext& ctx) {
  GPUOPT_RETURN_IF_ERROR(check_inputs(ctx, ctx.opset < 11 ? 1 : 2, ctx.opset < 11 ? 1 : 4));
  GPUOPT_RETURN_IF_ERROR(require_int_tensor(ctx, 1, "pads"));
  GPUOPT_RETURN_IF_ERROR(require_int_tensor(ctx, 3, "axes"));
  const ValueInfo& in = ctx.in(0);
  const std::string mode = ctx.node.attr_s("mode", "constant");
  if (mode != "constant" && mode != "reflect" && mode != "edge" && mode != "wrap")
    return ctx.error("mode '{}' must be constant, reflect, edge or wrap", mode);
  auto pads = ctx.opset < 11 ? std::optional<std::vector<int64_t>>{} : const_ints(ctx, 1);
  auto axes = ctx.has_input(3) ? const_ints(ctx, 3) : std::nullopt;
  if (!in.rank_known || (ctx.opset >= 11 && !pads) || (ctx.has_input(3) && !axes)) {
    set_output_rank(ctx, 0, in.dtype, in.rank_known ? static_cast<int64_t>(in.shape.size()) : -1);
    return Status::Ok();
  }
  const int64_t r = static_cast<int64_t>(in.shape.size());
  std::vector<int64_t> b, e;
  GPUOPT_RETURN_IF_ERROR(pad_amounts(ctx.node, ctx.opset, r, pads, axes, &b, &e, [&](std::string m) { return ctx.error("{}", m); }));
  Shape out = in.shape;
  for (int64_t d = 0; d < r; ++d) {
    if (out[d] < 0) {
      if (b[d] != 0 || e[d] != 0) out[d] = kUnknownDim;
      continue;
    }
    if (mode != "constant" && out[d] == 0 && b[d] + e[d] > 0)
      return ctx.error("cannot {}-pad axis {} of extent 0", mode, d);
    if (!checked_add(out[d], b[d], &out[d]) || !checked_add(out[d], e[d], &out[d]))
      return ctx.error("pads overflow axis {} of shape {}", d, shape_to_string(in.shape));
    if (out[d] < 0) return ctx.error("pads {} crop axis {} of shape {} below 0", dims_string(*pads), d, shape_to_string(in.shape));
  }
  set_output(ctx, 0, in.dtype, std::move(out));
  return Status::Ok();
}

Status cpu_Pad(KernelContext& ctx) {
  const Tensor& in = ctx.in(0);
  const int64_t r = in.rank();
  std::optional<std::vector<int64_t>> pads, axes;
  if (ctx.opset >= 11) pads = ctx.in(1).to_i64_vector();
  if (ctx.has_input(3)) axes = ctx.in(3).to_i64_vector();
  std::vector<int64_t> b, e;
  GPUOPT_RETURN_IF_ERROR(pad_amounts(ctx.node, ctx.opset, r, pads, axes, &b, &e, [&](std::string m) { return ctx.error("{}", m); }));
  const std::string mode = ctx.node.attr_s("mode", "constant");
  const std::vector<int64_t> st = shape_strides(in.shape());
  std::vector<std::vector<int64_t>> tables(static_cast<size_t>(r));
  for (int64_t d = 0; d < r; ++d) {
    const int64_t n = in.shape()[d];
    for (int64_t c = 0; c < ctx.out(0).shape()[d]; ++c) {
      int64_t i = c - b[d];
      if (i < 0 || i >= n) {
        if (mode == "constant") i = -1;
        else if (mode == "edge") i = std::clamp<int64_t>(i, 0, n - 1);
        else if (mode == "wrap") i = ((i % n) + n) % n;
        else {  // reflect (without repeating the edge), periodic for pads longer than the axis
          const int64_t p = 2 * (n - 1);
          i = p == 0 ? 0 : ((i % p) + p) % p;
          if (i >= n) i = p - i;
        }
      }
      tables[d].push_back(i < 0 ? -1 : i * st[d]);
    }
  }
  const Tensor fill = scalar_of(in.dtype(), ctx.has_input(2) ? &ctx.in(2) : nullptr, ctx.node.attr_f("value", 0.0f));
  std::string fill_str;
  if (in.dtype() == DType::String && ctx.has_input(2) && ctx.in(2).dtype() == DType::String && ctx.in(2).numel() > 0)
    fill_str = ctx.in(2).strings()[0];
  gather_by_tables(in, ctx.out(0), tables, fill.raw(), fill_str);
  return Status::Ok();
}
double flops_Pad(const FlopsContext&) { return 0.0; }

}  // namespace gpuopt

// --- Expand -------------------------------------------------------------------------------

namespace gpuopt {

Status infer_Expand(InferContext& ctx) {
  GPUOPT_RETURN_IF_ERROR(check_inputs(ctx, 2, 2));
  GPUOPT_RETURN_IF_ERROR(require_int_tensor(ctx, 1, "shape"));
  const ValueInfo& in = ctx.in(0);
  auto target = const_ints(ctx, 1);
  if (ctx.in(1).rank_known && ctx.in(1).shape.size() != 1)
    return ctx.error("shape input must be 1-D, got rank {}", ctx.in(1).shape.size());
  if (!in.rank_known || !target) {
    int64_t rank = -1;
    const ValueInfo& s = ctx.in(1);
    if (in.rank_known && target) rank = std::max<int64_t>(static_cast<int64_t>(in.shape.size()), static_cast<int64_t>(target->size()));
    else if (in.rank_known && s.rank_known && s.shape.size() == 1 && s.shape[0] >= 0)
      rank = std::max<int64_t>(static_cast<int64_t>(in.shape.size()), s.shape[0]);
    set_output_rank(ctx, 0, in.dtype, rank);
    return Status::Ok();
  }
  for (int64_t d : *target)
    if (d < 0) return ctx.error("shape {} has a negative dim", dims_string(*target));
  std::optional<Shape> out = broadcast_shapes(in.shape, *target);
  if (!out) return ctx.error("cannot expand {} to {}", shape_to_string(in.shape), dims_string(*target));
  set_output(ctx, 0, in.dtype, std::move(*out));
  return Status::Ok();
}
Status cpu_Expand(KernelContext& ctx) {
  const Tensor& in = ctx.in(0);
  Tensor& out = ctx.out(0);
  const std::vector<int64_t> st = broadcast_strides(in.shape(), out.shape());
  std::vector<std::vector<int64_t>> tables(out.shape().size());
  for (size_t d = 0; d < tables.size(); ++d)
    for (int64_t c = 0; c < out.shape()[d]; ++c) tables[d].push_back(c * st[d]);
  gather_by_tables(in, out, tables);
  return Status::Ok();
}
double flops_Expand(const FlopsContext&) { return 0.0; }

}  // namespace gpuopt
