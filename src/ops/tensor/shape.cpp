// Shape-only ops: Reshape, Flatten, Squeeze, Unsqueeze, Shape, Size, Identity, Dropout.
// Their kernels copy bytes; the work is in shape inference, which must be exact on partial
// information (symbolic batch dims) because constant folding resolves BERT's reshape chains.
#include "ops/common/tensor_util.h"

#include <algorithm>
#include <random>
#include <set>

namespace gpuopt {
using namespace tensor_util;

namespace {

// Resolves a Reshape target (0 = copy, -1 = infer) against the input shape, which may hold
// symbolic dims; a -1 is resolved when the dims on both sides cancel out to known factors.
// symbols: the target is a shape value (ValueInfo::dims_value), whose elements < -1 are symbolic
// dims rather than invalid.
Status reshape_target(const InferContext& ctx, const ValueInfo& in, std::vector<int64_t> target, bool allowzero,
                      bool symbols, Shape* out) {
  int infer_at = -1;
  for (size_t i = 0; i < target.size(); ++i) {
    const int64_t t = target[i];
    if (t == -1) {
      if (infer_at >= 0) return ctx.error("shape {} has more than one -1", dims_string(target));
      infer_at = static_cast<int>(i);
    } else if (t < -1 && !symbols) {
      return ctx.error("shape {} has invalid dim {}", dims_string(target), t);
    } else if (t == 0 && !allowzero) {
      if (in.rank_known && i >= in.shape.size())
        return ctx.error("shape {} copies dim {} (0) but the input has rank {}", dims_string(target), i,
                         in.shape.size());
      target[i] = in.rank_known ? in.shape[i] : kUnknownDim;
    }
  }
  if (allowzero && infer_at >= 0 && std::count(target.begin(), target.end(), 0) > 0)
    return ctx.error("shape {} has both 0 and -1 with allowzero=1", dims_string(target));
  if (!in.rank_known) {
    if (infer_at >= 0) target[infer_at] = kUnknownDim;
    *out = target;
    return Status::Ok();
  }
  // Cancel dims that appear on both sides (symbols included), then compare known products.
  std::vector<int64_t> in_rest = in.shape;
  int64_t in_known = 1, out_known = 1;
  bool in_unknown = false, out_unknown = false;
  std::vector<int64_t> out_syms;
  for (size_t i = 0; i < target.size(); ++i) {
    if (static_cast<int>(i) == infer_at) continue;
    const int64_t t = target[i];
    if (t >= 0) {
      if (!checked_mul(out_known, t, &out_known)) return ctx.error("shape {} overflows an int64 element count", dims_string(target));
      continue;
    }
    auto it = t == kUnknownDim ? in_rest.end() : std::find(in_rest.begin(), in_rest.end(), t);
    if (it != in_rest.end()) in_rest.erase(it);
    else out_unknown = true;
  }
  int64_t in_sym = 0;
  int in_sym_count = 0;
  for (int64_t d : in_rest) {
    if (d >= 0) {
      if (!checked_mul(in_known, d, &in_known)) return ctx.error("input shape {} overflows an int64 element count", shape_to_string(in.shape));
    } else if (d == kUnknownDim) in_unknown = true;
    else {
      ++in_sym_count;
      in_sym = d;
    }
  }
  if (infer_at < 0) {
    if (!in_unknown && !out_unknown && in_sym_count == 0 && in_known != out_known)
      return ctx.error("cannot reshape {} ({} elements) to {}", shape_to_string(in.shape), shape_numel(in.shape),
                       dims_string(target));
    *out = target;
    return Status::Ok();
  }
  if (in_unknown || out_unknown || in_sym_count > 1) {
    target[infer_at] = kUnknownDim;
  } else if (in_sym_count == 1) {
    target[infer_at] = (in_known == out_known) ? in_sym : kUnknownDim;
  } else {
    if (out_known == 0 || in_known % out_known != 0)
      return ctx.error("cannot reshape {} ({} elements) to {}", shape_to_string(in.shape), shape_numel(in.shape),
                       dims_string(target));
    target[infer_at] = in_known / out_known;
  }
  *out = target;
  return Status::Ok();
}

Status copy_kernel(KernelContext& ctx) {
  copy_all(ctx.in(0), ctx.out(0));
  return Status::Ok();
}

// Squeeze/Unsqueeze axes: the attribute in the form before opset 13 (_v1); from 13 the optional
// input (an `axes` attribute is still read when present).
enum class AxesForm { kAttribute, kInput };
std::optional<std::vector<int64_t>> axes_of(const InferContext& ctx, AxesForm form, bool* known) {
  *known = true;
  if (form == AxesForm::kAttribute || ctx.node.has_attr("axes")) {
    if (!ctx.node.has_attr("axes")) return std::nullopt;
    return ctx.node.attr_ints("axes");
  }
  if (!ctx.has_input(1)) return std::nullopt;
  auto v = const_ints(ctx, 1);
  if (!v) *known = false;
  return v;
}

}  // namespace

// --- Reshape ------------------------------------------------------------------------------

namespace {
// attr_form: the shape is the attribute (the form before opset 5, when the node has it).
Status infer_reshape(InferContext& ctx, bool attr_form) {
  GPUOPT_RETURN_IF_ERROR(check_inputs(ctx, attr_form ? 1 : 2, attr_form ? 1 : 2));
  GPUOPT_RETURN_IF_ERROR(require_int_tensor(ctx, 1, "shape"));
  const ValueInfo& in = ctx.in(0);
  const bool allowzero = ctx.node.attr_i("allowzero", 0) != 0;
  std::optional<std::vector<int64_t>> target = attr_form ? ctx.node.attr_ints("shape") : const_ints(ctx, 1);
  if (!attr_form && ctx.in(1).rank_known && ctx.in(1).shape.size() != 1)
    return ctx.error("shape input must be 1-D, got rank {}", ctx.in(1).shape.size());
  // A target computed from shapes (Concat(Shape(x)[0:2], [12, 64]), say): its known dims and
  // symbols, so the output keeps [batch, seq, 12, 64] instead of four unknown dims.
  const bool symbolic_target = !attr_form && !target && ctx.in(1).dims_value;
  if (symbolic_target) target = ctx.in(1).dims_value;
  if (!target) {
    const ValueInfo& s = ctx.in(1);
    set_output_rank(ctx, 0, in.dtype, s.rank_known && s.shape.size() == 1 && s.shape[0] >= 0 ? s.shape[0] : -1);
    return Status::Ok();
  }
  Shape out;
  GPUOPT_RETURN_IF_ERROR(reshape_target(ctx, in, *target, allowzero, symbolic_target, &out));
  const bool flat = out.size() <= 1;
  set_output(ctx, 0, in.dtype, std::move(out));
  if (flat) {  // a shape value keeps its elements (Reshape(Concat(b, s), [-1]))
    if (auto dv = in.dims_value) set_dims_value(ctx, 0, std::move(*dv));
  }
  return Status::Ok();
}
}  // namespace
Status infer_Reshape_v1(InferContext& ctx) { return infer_reshape(ctx, ctx.node.has_attr("shape")); }
Status cpu_Reshape_v1(KernelContext& ctx) { return copy_kernel(ctx); }
Status infer_Reshape(InferContext& ctx) { return infer_reshape(ctx, false); }
Status cpu_Reshape(KernelContext& ctx) { return copy_kernel(ctx); }
double flops_Reshape(const FlopsContext&) { return 0.0; }

// --- Flatten ------------------------------------------------------------------------------

Status infer_Flatten(InferContext& ctx) {
  GPUOPT_RETURN_IF_ERROR(check_inputs(ctx, 1, 1));
  const ValueInfo& in = ctx.in(0);
  if (!in.rank_known) {
    set_output_rank(ctx, 0, in.dtype, 2);
    return Status::Ok();
  }
  const int64_t r = static_cast<int64_t>(in.shape.size());
  int64_t axis = ctx.node.attr_i("axis", 1);
  if (axis < -r || axis > r) return ctx.error("axis {} is out of range [{}, {}] for rank {}", axis, -r, r, r);
  if (axis < 0) axis += r;
  set_output(ctx, 0, in.dtype,
             {dims_product(in.shape, 0, static_cast<size_t>(axis)), dims_product(in.shape, static_cast<size_t>(axis), in.shape.size())});
  return Status::Ok();
}
Status cpu_Flatten(KernelContext& ctx) { return copy_kernel(ctx); }
double flops_Flatten(const FlopsContext&) { return 0.0; }

// --- Squeeze ------------------------------------------------------------------------------

namespace {
Status infer_squeeze(InferContext& ctx, AxesForm form) {
  GPUOPT_RETURN_IF_ERROR(check_inputs(ctx, 1, 2));
  GPUOPT_RETURN_IF_ERROR(require_int_tensor(ctx, 1, "axes"));
  const ValueInfo& in = ctx.in(0);
  bool known = true;
  auto axes = axes_of(ctx, form, &known);
  if (!in.rank_known || !known) {
    int64_t rank = -1;
    if (in.rank_known && ctx.in(1).rank_known && ctx.in(1).shape.size() == 1 && ctx.in(1).shape[0] >= 0)
      rank = static_cast<int64_t>(in.shape.size()) - ctx.in(1).shape[0];
    set_output_rank(ctx, 0, in.dtype, rank);
    return Status::Ok();
  }
  const int64_t r = static_cast<int64_t>(in.shape.size());
  std::vector<bool> drop(in.shape.size(), false);
  if (axes && axes->empty()) axes.reset();  // an empty axes input squeezes every 1, as in ONNX Runtime
  if (!axes) {
    for (int64_t i = 0; i < r; ++i) {
      if (in.shape[i] == 1) drop[i] = true;
      else if (in.shape[i] < 0) {  // could be 1 at run time: the rank is not known yet
        set_output_rank(ctx, 0, in.dtype, -1);
        return Status::Ok();
      }
    }
  } else {
    const std::vector<int64_t> given = std::move(*axes);  // a plain vector: GCC 12 misreads the optional's
    for (int64_t a : given) {
      GPUOPT_RETURN_IF_ERROR(norm_axis(ctx, &a, r, "axes entry"));
      if (drop[a]) return ctx.error("axis {} is repeated in axes {}", a, dims_string(given));
      if (in.shape[a] >= 0 && in.shape[a] != 1)
        return ctx.error("cannot squeeze axis {} of shape {}: its extent is {}, not 1", a,
                         shape_to_string(in.shape), in.shape[a]);
      drop[a] = true;
    }
  }
  Shape out;
  for (int64_t i = 0; i < r; ++i)
    if (!drop[i]) out.push_back(in.shape[i]);
  set_output(ctx, 0, in.dtype, std::move(out));
  if (auto dv = dims_value_of(ctx, 0); dv && dv->size() == 1) set_dims_value(ctx, 0, std::move(*dv));
  return Status::Ok();
}
}  // namespace
Status infer_Squeeze_v1(InferContext& ctx) { return infer_squeeze(ctx, AxesForm::kAttribute); }
Status cpu_Squeeze_v1(KernelContext& ctx) { return copy_kernel(ctx); }
Status infer_Squeeze(InferContext& ctx) { return infer_squeeze(ctx, AxesForm::kInput); }
Status cpu_Squeeze(KernelContext& ctx) { return copy_kernel(ctx); }
double flops_Squeeze(const FlopsContext&) { return 0.0; }

// --- Unsqueeze ----------------------------------------------------------------------------

namespace {
Status infer_unsqueeze(InferContext& ctx, AxesForm form) {
  GPUOPT_RETURN_IF_ERROR(check_inputs(ctx, 1, 2));
  GPUOPT_RETURN_IF_ERROR(require_int_tensor(ctx, 1, "axes"));
  const ValueInfo& in = ctx.in(0);
  bool known = true;
  auto axes = axes_of(ctx, form, &known);
  if (known && !axes) return ctx.error("axes are required");
  if (!in.rank_known || !known) {
    int64_t rank = -1;
    if (in.rank_known && axes) rank = static_cast<int64_t>(in.shape.size() + axes->size());
    else if (in.rank_known && ctx.has_input(1) && ctx.in(1).rank_known && ctx.in(1).shape.size() == 1 &&
             ctx.in(1).shape[0] >= 0)
      rank = static_cast<int64_t>(in.shape.size()) + ctx.in(1).shape[0];
    set_output_rank(ctx, 0, in.dtype, rank);
    return Status::Ok();
  }
  const int64_t r = static_cast<int64_t>(in.shape.size() + axes->size());
  std::vector<bool> inserted(static_cast<size_t>(r), false);
  for (int64_t a : *axes) {
    GPUOPT_RETURN_IF_ERROR(norm_axis(ctx, &a, r, "axes entry"));
    if (inserted[a]) return ctx.error("axis {} is repeated in axes {}", a, dims_string(*axes));
    inserted[a] = true;
  }
  Shape out;
  size_t j = 0;
  for (int64_t i = 0; i < r; ++i) out.push_back(inserted[i] ? 1 : in.shape[j++]);
  set_output(ctx, 0, in.dtype, std::move(out));
  if (r == 1) {  // a scalar (or a 1-element vector's shape value) made 1-D
    if (auto dv = dims_value_of(ctx, 0); dv && dv->size() == 1) set_dims_value(ctx, 0, std::move(*dv));
  }
  return Status::Ok();
}
}  // namespace
Status infer_Unsqueeze_v1(InferContext& ctx) { return infer_unsqueeze(ctx, AxesForm::kAttribute); }
Status cpu_Unsqueeze_v1(KernelContext& ctx) { return copy_kernel(ctx); }
Status infer_Unsqueeze(InferContext& ctx) { return infer_unsqueeze(ctx, AxesForm::kInput); }
Status cpu_Unsqueeze(KernelContext& ctx) { return copy_kernel(ctx); }
double flops_Unsqueeze(const FlopsContext&) { return 0.0; }

// --- Shape / Size -------------------------------------------------------------------------

namespace {
void shape_range(const Node& node, int64_t rank, int64_t* b, int64_t* e) {
  int64_t start = node.attr_i("start", 0), end = node.attr_i("end", rank);
  if (start < 0) start += rank;
  if (end < 0) end += rank;
  *b = std::clamp<int64_t>(start, 0, rank);
  *e = std::clamp<int64_t>(end, 0, rank);
  if (*e < *b) *e = *b;
}
}  // namespace

Status infer_Shape(InferContext& ctx) {
  GPUOPT_RETURN_IF_ERROR(check_inputs(ctx, 1, 1));
  const ValueInfo& in = ctx.in(0);
  if (!in.rank_known) {
    set_output(ctx, 0, DType::I64, {kUnknownDim});
    return Status::Ok();
  }
  int64_t b, e;
  shape_range(ctx.node, static_cast<int64_t>(in.shape.size()), &b, &e);
  set_output(ctx, 0, DType::I64, {e - b});
  if (std::find(in.shape.begin() + b, in.shape.begin() + e, kUnknownDim) == in.shape.begin() + e)
    set_dims_value(ctx, 0, Shape(in.shape.begin() + b, in.shape.begin() + e));
  return Status::Ok();
}
Status cpu_Shape(KernelContext& ctx) {
  int64_t b, e;
  shape_range(ctx.node, ctx.in(0).rank(), &b, &e);
  int64_t* o = ctx.out(0).data<int64_t>();
  for (int64_t i = b; i < e; ++i) o[i - b] = ctx.in(0).shape()[i];
  return Status::Ok();
}
double flops_Shape(const FlopsContext&) { return 0.0; }

Status infer_Size(InferContext& ctx) {
  GPUOPT_RETURN_IF_ERROR(check_inputs(ctx, 1, 1));
  set_output(ctx, 0, DType::I64, {});
  return Status::Ok();
}
Status cpu_Size(KernelContext& ctx) {
  *ctx.out(0).data<int64_t>() = ctx.in(0).numel();
  return Status::Ok();
}
double flops_Size(const FlopsContext&) { return 0.0; }

// --- Identity / Dropout -------------------------------------------------------------------

Status infer_Identity(InferContext& ctx) {
  GPUOPT_RETURN_IF_ERROR(check_inputs(ctx, 1, 1));
  ctx.outputs[0] = ctx.in(0);
  ctx.outputs[0].value = nullptr;
  return Status::Ok();
}
Status cpu_Identity(KernelContext& ctx) { return copy_kernel(ctx); }
double flops_Identity(const FlopsContext&) { return 0.0; }

namespace {
// Opset 12+: ratio and training_mode are inputs; earlier, ratio is an attribute and the op is
// an identity at inference (is_test before opset 7).
struct DropoutArgs {
  double ratio = 0.5;
  bool training = false;
};
template <typename Ctx>
DropoutArgs dropout_args(const Ctx& ctx, const Tensor* ratio_t, const Tensor* train_t) {
  DropoutArgs a;
  a.ratio = ctx.node.attr_f("ratio", 0.5f);
  if (ratio_t && ratio_t->numel() == 1) a.ratio = ratio_t->get_f64(0);
  if (train_t && train_t->numel() == 1) a.training = train_t->get_f64(0) != 0.0;
  return a;
}
}  // namespace

namespace {
// mask_bool: the mask output is bool (from opset 10; before, it has the input's dtype).
Status infer_dropout(InferContext& ctx, bool mask_bool) {
  GPUOPT_RETURN_IF_ERROR(check_inputs(ctx, 1, 3));
  const ValueInfo& in = ctx.in(0);
  if (!dtype_is_float(in.dtype) && in.dtype != DType::Undefined)
    return ctx.error("input must be a float tensor, got {}", dtype_name(in.dtype));
  DropoutArgs a = dropout_args(ctx, const_input(ctx, 1), const_input(ctx, 2));
  if (a.training && (a.ratio < 0.0 || a.ratio >= 1.0)) return ctx.error("ratio {} must be in [0, 1)", a.ratio);
  ctx.outputs[0] = in;
  ctx.outputs[0].value = nullptr;
  if (ctx.outputs.size() > 1) {
    ctx.outputs[1] = in;
    ctx.outputs[1].value = nullptr;
    ctx.outputs[1].dtype = mask_bool ? DType::Bool : in.dtype;
  }
  return Status::Ok();
}
}  // namespace
Status infer_Dropout_v1(InferContext& ctx) { return infer_dropout(ctx, false); }
Status infer_Dropout(InferContext& ctx) { return infer_dropout(ctx, true); }
Status cpu_Dropout_v1(KernelContext& ctx) { return cpu_Dropout(ctx); }

Status cpu_Dropout(KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  DropoutArgs a = dropout_args(ctx, ctx.has_input(1) ? &ctx.in(1) : nullptr, ctx.has_input(2) ? &ctx.in(2) : nullptr);
  Tensor* mask = ctx.outputs.size() > 1 ? ctx.outputs[1] : nullptr;
  if (!a.training || a.ratio == 0.0) {
    copy_all(x, ctx.out(0));
    if (mask)
      for (int64_t i = 0; i < mask->numel(); ++i) mask->set_f64(i, 1.0);
    return Status::Ok();
  }
  // Training mode: keep each element with probability 1-ratio and scale it by 1/(1-ratio).
  const int64_t seed = ctx.node.attr_i("seed", static_cast<int64_t>(std::random_device{}()));
  std::mt19937_64 rng(static_cast<uint64_t>(seed));
  std::uniform_real_distribution<double> u(0.0, 1.0);
  const double scale = 1.0 / (1.0 - a.ratio);
  Tensor& y = ctx.out(0);
  for (int64_t i = 0; i < x.numel(); ++i) {
    const bool keep = u(rng) >= a.ratio;
    y.set_f64(i, keep ? x.get_f64(i) * scale : 0.0);
    if (mask) mask->set_f64(i, keep ? 1.0 : 0.0);
  }
  return Status::Ok();
}
double flops_Dropout(const FlopsContext&) { return 0.0; }

}  // namespace gpuopt
