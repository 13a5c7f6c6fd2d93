// Layout ops, part 1: Transpose, Concat, Split, Slice (part 2, tile_pad.cpp: Tile, DepthToSpace,
// SpaceToDepth, Trilu, Pad, Expand). Most are "out[c] = in[sum_d table_d[c_d]]" for
// per-dimension offset tables, so one gather routine (ops/common/tensor_util.cpp) does the moving
// for every dtype.
#include "ops/common/broadcast.h"
#include "ops/common/tensor_util.h"

#include <algorithm>
#include <functional>
#include <numeric>

namespace gpuopt {
using namespace tensor_util;


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

namespace {
// axis_required: from opset 4 (before, axis defaults to 1).
Status infer_concat(InferContext& ctx, bool axis_required) {
  if (ctx.num_inputs() == 0) return ctx.error("needs at least one input");
  for (size_t i = 0; i < ctx.num_inputs(); ++i)
    if (!ctx.has_input(i)) return ctx.error("input {} is missing", i);
  if (!ctx.node.has_attr("axis") && axis_required) return ctx.error("attribute 'axis' is required");
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
  if (rank == 1) {  // shape arithmetic: Concat(Shape(x)[0:2], [12, 64]) keeps its dims
    std::vector<int64_t> dims;
    for (size_t i = 0; i < ctx.num_inputs(); ++i) {
      auto dv = dims_value_of(ctx, i);
      if (!dv) return Status::Ok();
      dims.insert(dims.end(), dv->begin(), dv->end());
    }
    set_dims_value(ctx, 0, std::move(dims));
  }
  return Status::Ok();
}
}  // namespace
Status infer_Concat_v1(InferContext& ctx) { return infer_concat(ctx, false); }
Status infer_Concat(InferContext& ctx) { return infer_concat(ctx, true); }
Status cpu_Concat_v1(KernelContext& ctx) { return cpu_Concat(ctx); }
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

// attr_form (opsets 1-9, Slice_v1): attributes; 10+: inputs 1..4. Sets *known to false when some
// input value is unknown.
template <typename GetInts>
Status slice_args(const Node& node, bool attr_form, GetInts get, SliceArgs* a, bool* known,
                  const std::function<Status(std::string)>& fail) {
  *known = true;
  if (attr_form) {
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

Status infer_slice(InferContext& ctx, bool attr_form) {
  GPUOPT_RETURN_IF_ERROR(check_inputs(ctx, attr_form ? 1 : 3, attr_form ? 1 : 5));
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
      ctx.node, attr_form,
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
  // Shape arithmetic: Shape(x)[a:b] keeps its dims (symbols too).
  if (auto dv = dims_value_of(ctx, 0); dv && r == 1 && a.axes.size() == 1) {
    const SliceAxis s = slice_axis(static_cast<int64_t>(dv->size()), a.starts[0], a.ends[0], a.steps[0]);
    std::vector<int64_t> picked;
    for (int64_t i = 0; i < s.count; ++i) picked.push_back((*dv)[static_cast<size_t>(s.start + i * s.step)]);
    set_dims_value(ctx, 0, std::move(picked));
  }
  return Status::Ok();
}

Status cpu_slice(KernelContext& ctx, bool attr_form) {
  const Tensor& in = ctx.in(0);
  SliceArgs a;
  bool known = true;
  GPUOPT_RETURN_IF_ERROR(slice_args(
      ctx.node, attr_form,
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
}  // namespace

Status infer_Slice_v1(InferContext& ctx) { return infer_slice(ctx, true); }
Status cpu_Slice_v1(KernelContext& ctx) { return cpu_slice(ctx, true); }
Status infer_Slice(InferContext& ctx) { return infer_slice(ctx, false); }
Status cpu_Slice(KernelContext& ctx) { return cpu_slice(ctx, false); }
double flops_Slice(const FlopsContext&) { return 0.0; }

}  // namespace gpuopt
