// Tensor-construction and rearrangement ops beyond the engine-core list: OneHot, EyeLike,
// Compress, ReverseSequence, CenterCropPad, BitCast, TensorScatter. All are element copies
// (dtype-agnostic, String included where the op allows it); semantics follow
// onnx/reference/ops (the node tests were generated from it).
#include "ops/common/tensor_util.h"

#include <cmath>

namespace gpuopt {
using namespace tensor_util;

namespace {

// Scalar or one-element input as a double (OneHot's depth may be any numeric type).
Result<double> one_value(const Tensor& t, const KernelContext& ctx, const char* what) {
  if (t.numel() != 1) return ctx.error("{} must have exactly one element, got shape {}", what, dims_string(t.shape()));
  return t.get_f64(0);
}

// Row-major strides of a shape.
std::vector<int64_t> strides_of(const Shape& s) {
  std::vector<int64_t> st(s.size(), 1);
  for (size_t d = s.size(); d-- > 1;) st[d - 1] = st[d] * s[d];
  return st;
}

}  // namespace

// --- OneHot -------------------------------------------------------------------------------

Status infer_OneHot(InferContext& ctx) {
  GPUOPT_RETURN_IF_ERROR(check_inputs(ctx, 3, 3));
  const ValueInfo& idx = ctx.in(0);
  const ValueInfo& vals = ctx.in(2);
  if (vals.dtype == DType::String) return ctx.error("values of dtype string are not supported");
  if (vals.rank_known && shape_numel(vals.shape) >= 0 && shape_numel(vals.shape) != 2)
    return ctx.error("values must hold exactly 2 elements [off_value, on_value], got shape {}", dims_string(vals.shape));
  if (!idx.rank_known) {
    set_output_rank(ctx, 0, vals.dtype, -1);
    return Status::Ok();
  }
  const int64_t rank = static_cast<int64_t>(idx.shape.size()) + 1;
  int64_t axis = ctx.node.attr_i("axis", -1);
  GPUOPT_RETURN_IF_ERROR(norm_axis(ctx, &axis, rank));
  int64_t depth = kUnknownDim;
  if (const Tensor* d = const_input(ctx, 1)) {
    if (d->numel() != 1) return ctx.error("depth must have exactly one element, got shape {}", dims_string(d->shape()));
    const double dv = d->get_f64(0);
    if (!(dv >= 1)) return ctx.error("depth {} must be at least 1", dv);
    depth = static_cast<int64_t>(dv);
  }
  Shape out = idx.shape;
  out.insert(out.begin() + axis, depth);
  set_output(ctx, 0, vals.dtype, out);
  return Status::Ok();
}

// Like the reference: an index i selects class (i mod depth) (Python modulo, so -1 is the last
// class); a non-integral float index selects nothing.
Status cpu_OneHot(KernelContext& ctx) {
  const Tensor& idx = ctx.in(0);
  const Tensor& vals = ctx.in(2);
  Tensor& y = ctx.out(0);
  GPUOPT_ASSIGN_OR_RETURN(double depth_d, one_value(ctx.in(1), ctx, "depth"));
  const int64_t depth = static_cast<int64_t>(depth_d);
  int64_t axis = ctx.node.attr_i("axis", -1);
  if (axis < 0) axis += idx.rank() + 1;
  const int64_t outer = shape_numel(Shape(idx.shape().begin(), idx.shape().begin() + axis));
  const int64_t inner = idx.numel() / std::max<int64_t>(outer, 1);
  for (int64_t i = 0; i < y.numel(); ++i) copy_elems(vals, 0, y, i, 1);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t r = 0; r < inner; ++r) {
      const double v = idx.get_f64(o * inner + r);
      const double m = v - std::floor(v / static_cast<double>(depth)) * static_cast<double>(depth);
      if (m != std::floor(m) || m < 0 || m >= static_cast<double>(depth)) continue;
      copy_elems(vals, 1, y, (o * depth + static_cast<int64_t>(m)) * inner + r, 1);
    }
  return Status::Ok();
}
double flops_OneHot(const FlopsContext&) { return 0.0; }

// --- EyeLike ------------------------------------------------------------------------------

Status infer_EyeLike(InferContext& ctx) {
  GPUOPT_RETURN_IF_ERROR(check_inputs(ctx, 1, 1));
  const ValueInfo& x = ctx.in(0);
  DType dt = x.dtype;
  if (ctx.node.has_attr("dtype")) {
    const int64_t id = ctx.node.attr_i("dtype", 0);
    std::optional<DType> d = dtype_from_onnx(static_cast<int>(id));
    if (!d) return Status::Unimplemented("{}: dtype {} is not supported", node_label(ctx.node), id);
    dt = *d;
  }
  if (dt == DType::String) return ctx.error("dtype string is not supported");
  if (x.rank_known && x.shape.size() != 2) return ctx.error("input must be 2-D, got rank {}", x.shape.size());
  set_output(ctx, 0, dt, x.rank_known ? x.shape : Shape{kUnknownDim, kUnknownDim});
  return Status::Ok();
}
Status cpu_EyeLike(KernelContext& ctx) {
  Tensor& y = ctx.out(0);
  std::memset(y.raw(), 0, y.nbytes());
  const int64_t rows = y.dim(0), cols = y.dim(1), k = ctx.node.attr_i("k", 0);
  for (int64_t r = 0; r < rows; ++r)
    if (r + k >= 0 && r + k < cols) y.set_f64(r * cols + r + k, 1.0);
  return Status::Ok();
}
double flops_EyeLike(const FlopsContext&) { return 0.0; }

// --- Compress -----------------------------------------------------------------------------

namespace {
// Selected positions along the compressed extent `n` (numpy.compress: a shorter condition leaves
// the tail out; a longer one may only be false past n).
Result<std::vector<int64_t>> compress_positions(const Tensor& cond, int64_t n) {
  std::vector<int64_t> pos;
  for (int64_t i = 0; i < cond.numel(); ++i) {
    if (cond.get_f64(i) == 0.0) continue;
    if (i >= n) return Status::InvalidArgument("condition selects index {} but the axis has only {} elements", i, n);
    pos.push_back(i);
  }
  return pos;
}
}  // namespace

Status infer_Compress(InferContext& ctx) {
  GPUOPT_RETURN_IF_ERROR(check_inputs(ctx, 2, 2));
  const ValueInfo& x = ctx.in(0);
  const ValueInfo& c = ctx.in(1);
  if (c.rank_known && c.shape.size() != 1) return ctx.error("condition must be 1-D, got rank {}", c.shape.size());
  const bool has_axis = ctx.node.has_attr("axis");
  if (!x.rank_known) {
    set_output_rank(ctx, 0, x.dtype, has_axis ? -1 : 1);
    return Status::Ok();
  }
  int64_t axis = ctx.node.attr_i("axis", 0);
  if (has_axis) GPUOPT_RETURN_IF_ERROR(norm_axis(ctx, &axis, static_cast<int64_t>(x.shape.size())));
  int64_t count = kUnknownDim;
  const int64_t n = has_axis ? x.shape[axis] : shape_numel(x.shape);
  if (c.value && n >= 0) {
    Result<std::vector<int64_t>> pos = compress_positions(*c.value, n);
    if (!pos.ok()) return ctx.error("{}", pos.status().message());
    count = static_cast<int64_t>(pos->size());
  }
  Shape out = has_axis ? x.shape : Shape{0};
  out[has_axis ? axis : 0] = count;
  set_output(ctx, 0, x.dtype, out);
  return Status::Ok();
}
Status cpu_Compress(KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  Tensor& y = ctx.out(0);
  const bool has_axis = ctx.node.has_attr("axis");
  int64_t axis = ctx.node.attr_i("axis", 0);
  if (axis < 0) axis += x.rank();
  const Shape view = has_axis ? x.shape() : Shape{x.numel()};
  if (!has_axis) axis = 0;
  Result<std::vector<int64_t>> pos = compress_positions(ctx.in(1), view[axis]);
  if (!pos.ok()) return ctx.error("{}", pos.status().message());
  const int64_t outer = shape_numel(Shape(view.begin(), view.begin() + axis));
  const int64_t inner = shape_numel(Shape(view.begin() + axis + 1, view.end()));
  const int64_t n = view[axis], m = static_cast<int64_t>(pos->size());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < m; ++j) copy_elems(x, (o * n + (*pos)[j]) * inner, y, (o * m + j) * inner, inner);
  return Status::Ok();
}
double flops_Compress(const FlopsContext&) { return 0.0; }

// --- ReverseSequence ----------------------------------------------------------------------

Status infer_ReverseSequence(InferContext& ctx) {
  GPUOPT_RETURN_IF_ERROR(check_inputs(ctx, 2, 2));
  GPUOPT_RETURN_IF_ERROR(require_int_tensor(ctx, 1, "sequence_lens"));
  const ValueInfo& x = ctx.in(0);
  const int64_t batch_axis = ctx.node.attr_i("batch_axis", 1), time_axis = ctx.node.attr_i("time_axis", 0);
  if (!((batch_axis == 0 && time_axis == 1) || (batch_axis == 1 && time_axis == 0)))
    return ctx.error("batch_axis {} and time_axis {} must be 0 and 1 in some order", batch_axis, time_axis);
  if (x.rank_known && x.shape.size() < 2) return ctx.error("input rank {} is below 2", x.shape.size());
  const ValueInfo& l = ctx.in(1);
  if (l.rank_known && l.shape.size() != 1) return ctx.error("sequence_lens must be 1-D, got rank {}", l.shape.size());
  if (x.rank_known && l.rank_known && x.shape[batch_axis] >= 0 && l.shape[0] >= 0 && x.shape[batch_axis] != l.shape[0])
    return ctx.error("sequence_lens has {} entries for a batch of {}", l.shape[0], x.shape[batch_axis]);
  ctx.outputs[0] = x;
  ctx.outputs[0].value = nullptr;
  return Status::Ok();
}
Status cpu_ReverseSequence(KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  const Tensor& lens = ctx.in(1);
  Tensor& y = ctx.out(0);
  const int64_t batch_axis = ctx.node.attr_i("batch_axis", 1), time_axis = ctx.node.attr_i("time_axis", 0);
  const int64_t B = x.dim(batch_axis), T = x.dim(time_axis);
  const int64_t inner = x.numel() / std::max<int64_t>(B * T, 1);
  const std::vector<int64_t> st = strides_of(x.shape());
  for (int64_t b = 0; b < B; ++b) {
    const int64_t len = lens.get_i64(b);
    if (len < 0 || len > T) return ctx.error("sequence_lens[{}] = {} is outside [0, {}]", b, len, T);
    for (int64_t t = 0; t < T; ++t) {
      const int64_t src_t = t < len ? len - 1 - t : t;
      copy_elems(x, b * st[batch_axis] + src_t * st[time_axis], y, b * st[batch_axis] + t * st[time_axis], inner);
    }
  }
  return Status::Ok();
}
double flops_ReverseSequence(const FlopsContext&) { return 0.0; }

// --- CenterCropPad ------------------------------------------------------------------------

namespace {
// Target extent per dim (input extent where the op leaves a dim alone).
Result<Shape> crop_pad_shape(const Node& node, const Shape& in, const std::vector<int64_t>& target) {
  const int64_t rank = static_cast<int64_t>(in.size());
  std::vector<int64_t> axes = node.attr_ints("axes");
  if (axes.empty())
    for (int64_t d = 0; d < rank; ++d) axes.push_back(d);
  if (axes.size() != target.size())
    return Status::InvalidArgument("shape has {} values for {} axes", target.size(), axes.size());
  Shape out = in;
  std::vector<bool> seen(static_cast<size_t>(rank), false);
  for (size_t i = 0; i < axes.size(); ++i) {
    int64_t a = axes[i];
    if (!normalize_axis(&a, rank)) return Status::InvalidArgument("axis {} is out of range for rank {}", axes[i], rank);
    if (seen[a]) return Status::InvalidArgument("axis {} appears twice in axes", axes[i]);
    seen[a] = true;
    if (target[i] < 0) return Status::InvalidArgument("shape value {} is negative", target[i]);
    out[a] = target[i];
  }
  return out;
}
}  // namespace

Status infer_CenterCropPad(InferContext& ctx) {
  GPUOPT_RETURN_IF_ERROR(check_inputs(ctx, 2, 2));
  GPUOPT_RETURN_IF_ERROR(require_int_tensor(ctx, 1, "shape"));
  const ValueInfo& x = ctx.in(0);
  auto target = const_ints(ctx, 1);
  if (!x.rank_known || !target) {
    set_output_rank(ctx, 0, x.dtype, x.rank_known ? static_cast<int64_t>(x.shape.size()) : -1);
    return Status::Ok();
  }
  Result<Shape> out = crop_pad_shape(ctx.node, x.shape, *target);
  if (!out.ok()) return ctx.error("{}", out.status().message());
  set_output(ctx, 0, x.dtype, *out);
  return Status::Ok();
}
// Output coordinate j reads input j + (in - out) / 2 when cropping, j - (out - in) / 2 when
// padding (floor division: an odd difference leaves the extra element at the end); outside
// the input is zero.
Status cpu_CenterCropPad(KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  Tensor& y = ctx.out(0);
  const std::vector<int64_t> st = strides_of(x.shape());
  std::vector<std::vector<int64_t>> tables(static_cast<size_t>(x.rank()));
  for (int64_t d = 0; d < x.rank(); ++d) {
    const int64_t in = x.dim(d), out = y.dim(d);
    const int64_t shift = in >= out ? (in - out) / 2 : -((out - in) / 2);
    for (int64_t j = 0; j < out; ++j) {
      const int64_t p = j + shift;
      tables[d].push_back(p >= 0 && p < in ? p * st[d] : -1);
    }
  }
  gather_by_tables(x, y, tables);
  return Status::Ok();
}
double flops_CenterCropPad(const FlopsContext&) { return 0.0; }

// --- BitCast ------------------------------------------------------------------------------

Status infer_BitCast(InferContext& ctx) {
  GPUOPT_RETURN_IF_ERROR(check_inputs(ctx, 1, 1));
  if (!ctx.node.has_attr("to")) return ctx.error("attribute 'to' is required");
  const int64_t id = ctx.node.attr_i("to", 0);
  std::optional<DType> to = dtype_from_onnx(static_cast<int>(id));
  if (!to) return Status::Unimplemented("{}: bit-cast to ONNX data type {} is not supported", node_label(ctx.node), id);
  const ValueInfo& x = ctx.in(0);
  if (*to == DType::String || x.dtype == DType::String) return ctx.error("string tensors cannot be bit-cast");
  if (x.dtype != DType::Undefined && dtype_size(x.dtype) != dtype_size(*to))
    return ctx.error("{} ({} bits) and {} ({} bits) differ in width", dtype_name(x.dtype), dtype_size(x.dtype) * 8,
                     dtype_name(*to), dtype_size(*to) * 8);
  ctx.outputs[0] = x;
  ctx.outputs[0].value = nullptr;
  ctx.outputs[0].dtype = *to;
  return Status::Ok();
}
// Bool is stored as one byte holding 0 or 1, as ONNX's BOOL is; a bit-cast *to* bool
// normalises any non-zero byte to true so the result is a valid C++ bool.
Status cpu_BitCast(KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  Tensor& y = ctx.out(0);
  if (y.dtype() == DType::Bool) {
    const uint8_t* s = static_cast<const uint8_t*>(x.raw());
    for (int64_t i = 0; i < y.numel(); ++i) y.data<bool>()[i] = s[i] != 0;
    return Status::Ok();
  }
  std::memcpy(y.raw(), x.raw(), y.nbytes());
  return Status::Ok();
}
double flops_BitCast(const FlopsContext&) { return 0.0; }

// --- TensorScatter ------------------------------------------------------------------------

Status infer_TensorScatter(InferContext& ctx) {
  GPUOPT_RETURN_IF_ERROR(check_inputs(ctx, 2, 3));
  GPUOPT_RETURN_IF_ERROR(require_int_tensor(ctx, 2, "write_indices"));
  const ValueInfo& past = ctx.in(0);
  const ValueInfo& upd = ctx.in(1);
  const std::string mode = ctx.node.attr_s("mode", "linear");
  if (mode != "linear" && mode != "circular") return ctx.error("mode '{}' is not 'linear' or 'circular'", mode);
  if (past.dtype != DType::Undefined && upd.dtype != DType::Undefined && past.dtype != upd.dtype)
    return ctx.error("update has dtype {} but past_cache has {}", dtype_name(upd.dtype), dtype_name(past.dtype));
  if (past.rank_known && upd.rank_known) {
    if (past.shape.size() != upd.shape.size())
      return ctx.error("update rank {} differs from past_cache rank {}", upd.shape.size(), past.shape.size());
    if (past.shape.empty()) return ctx.error("past_cache must have rank >= 1");
    int64_t axis = ctx.node.attr_i("axis", -2);
    GPUOPT_RETURN_IF_ERROR(norm_axis(ctx, &axis, static_cast<int64_t>(past.shape.size())));
    if (axis == 0) return ctx.error("axis must not be the batch axis 0");
    for (size_t d = 0; d < past.shape.size(); ++d) {
      const int64_t p = past.shape[d], u = upd.shape[d];
      if (p < 0 || u < 0) continue;
      if (static_cast<int64_t>(d) == axis ? u > p : u != p)
        return ctx.error("update shape {} does not fit past_cache shape {} (axis {})", dims_string(upd.shape),
                         dims_string(past.shape), axis);
    }
  }
  ctx.outputs[0] = past;
  ctx.outputs[0].value = nullptr;
  return Status::Ok();
}
// present = past with update's sequence slice written at write_indices[batch] along axis
// (modulo the cache length in circular mode).
Status cpu_TensorScatter(KernelContext& ctx) {
  const Tensor& past = ctx.in(0);
  const Tensor& upd = ctx.in(1);
  Tensor& y = ctx.out(0);
  copy_all(past, y);
  int64_t axis = ctx.node.attr_i("axis", -2);
  if (axis < 0) axis += past.rank();
  const bool circular = ctx.node.attr_s("mode", "linear") == "circular";
  const int64_t B = past.dim(0), L = past.dim(axis), S = upd.dim(axis);
  const int64_t per_batch = shape_numel(Shape(past.shape().begin() + 1, past.shape().begin() + axis));
  const int64_t inner = shape_numel(Shape(past.shape().begin() + axis + 1, past.shape().end()));
  if (ctx.has_input(2) && ctx.in(2).numel() != B)
    return ctx.error("write_indices has {} entries for a batch of {}", ctx.in(2).numel(), B);
  for (int64_t b = 0; b < B; ++b) {
    const int64_t w = ctx.has_input(2) ? ctx.in(2).get_i64(b) : 0;
    for (int64_t m = 0; m < per_batch; ++m)
      for (int64_t s = 0; s < S; ++s) {
        int64_t pos = w + s;
        if (circular) pos = ((pos % L) + L) % L;
        if (pos < 0 || pos >= L)
          return ctx.error("write position {} (write_indices[{}] = {} + {}) is outside the cache length {}", pos, b, w,
                           s, L);
        copy_elems(upd, ((b * per_batch + m) * S + s) * inner, y, ((b * per_batch + m) * L + pos) * inner, inner);
      }
  }
  return Status::Ok();
}
double flops_TensorScatter(const FlopsContext&) { return 0.0; }

}  // namespace gpuopt
