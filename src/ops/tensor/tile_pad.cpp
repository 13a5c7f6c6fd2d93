// Layout ops, part 2: Tile, DepthToSpace, SpaceToDepth, Trilu, Pad, Expand (part 1, layout.cpp:
// Transpose, Concat, Split, Slice). Most are "out[c] = in[sum_d table_d[c_d]]" for
// per-dimension offset tables, so one gather routine (ops/common/tensor_util.cpp) does the moving
// for every dtype.
#include "ops/common/broadcast.h"
#include "ops/common/tensor_util.h"

#include <algorithm>
#include <functional>
#include <numeric>

namespace gpuopt {
using namespace tensor_util;

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

// Where a form of Pad reads its pads: attribute `paddings` (opset 1), attribute `pads` (2-10),
// input 1 (11+).
enum class PadsFrom { kPaddingsAttr, kPadsAttr, kInput };

// Pads in ONNX layout [b_0..b_{n-1}, e_0..e_{n-1}] over `axes`, expanded to every dim.
Status pad_amounts(const Node& node, PadsFrom from, int64_t rank, const std::optional<std::vector<int64_t>>& pads_in,
                   const std::optional<std::vector<int64_t>>& axes_in, std::vector<int64_t>* begin,
                   std::vector<int64_t>* end, const std::function<Status(std::string)>& fail) {
  std::vector<int64_t> pads = from == PadsFrom::kInput ? *pads_in
                              : node.attr_ints(from == PadsFrom::kPaddingsAttr ? "paddings" : "pads");
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

Status infer_pad(InferContext& ctx, PadsFrom from) {
  const bool attr_form = from != PadsFrom::kInput;
  GPUOPT_RETURN_IF_ERROR(check_inputs(ctx, attr_form ? 1 : 2, attr_form ? 1 : 4));
  GPUOPT_RETURN_IF_ERROR(require_int_tensor(ctx, 1, "pads"));
  GPUOPT_RETURN_IF_ERROR(require_int_tensor(ctx, 3, "axes"));
  const ValueInfo& in = ctx.in(0);
  const std::string mode = ctx.node.attr_s("mode", "constant");
  if (mode != "constant" && mode != "reflect" && mode != "edge" && mode != "wrap")
    return ctx.error("mode '{}' must be constant, reflect, edge or wrap", mode);
  auto pads = attr_form ? std::optional<std::vector<int64_t>>{} : const_ints(ctx, 1);
  auto axes = ctx.has_input(3) ? const_ints(ctx, 3) : std::nullopt;
  if (!in.rank_known || (!attr_form && !pads) || (ctx.has_input(3) && !axes)) {
    set_output_rank(ctx, 0, in.dtype, in.rank_known ? static_cast<int64_t>(in.shape.size()) : -1);
    return Status::Ok();
  }
  const int64_t r = static_cast<int64_t>(in.shape.size());
  std::vector<int64_t> b, e;
  GPUOPT_RETURN_IF_ERROR(pad_amounts(ctx.node, from, r, pads, axes, &b, &e, [&](std::string m) { return ctx.error("{}", m); }));
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
    if (out[d] < 0) return ctx.error("pads begin {} end {} crop axis {} of shape {} below 0", b[d], e[d], d, shape_to_string(in.shape));
  }
  set_output(ctx, 0, in.dtype, std::move(out));
  return Status::Ok();
}

Status cpu_pad(KernelContext& ctx, PadsFrom from) {
  const Tensor& in = ctx.in(0);
  const int64_t r = in.rank();
  std::optional<std::vector<int64_t>> pads, axes;
  if (from == PadsFrom::kInput) pads = ctx.in(1).to_i64_vector();
  if (ctx.has_input(3)) axes = ctx.in(3).to_i64_vector();
  std::vector<int64_t> b, e;
  GPUOPT_RETURN_IF_ERROR(pad_amounts(ctx.node, from, r, pads, axes, &b, &e, [&](std::string m) { return ctx.error("{}", m); }));
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
}  // namespace

Status infer_Pad_v1(InferContext& ctx) { return infer_pad(ctx, PadsFrom::kPaddingsAttr); }
Status cpu_Pad_v1(KernelContext& ctx) { return cpu_pad(ctx, PadsFrom::kPaddingsAttr); }
Status infer_Pad_v2(InferContext& ctx) { return infer_pad(ctx, PadsFrom::kPadsAttr); }
Status cpu_Pad_v2(KernelContext& ctx) { return cpu_pad(ctx, PadsFrom::kPadsAttr); }
Status infer_Pad(InferContext& ctx) { return infer_pad(ctx, PadsFrom::kInput); }
Status cpu_Pad(KernelContext& ctx) { return cpu_pad(ctx, PadsFrom::kInput); }
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
  // A target computed from shapes (BERT's token-type ids expanded to Shape(input_ids)): its dims
  // and symbols, so the batch stays the input's symbol downstream. A -1 in it stays unknown.
  bool symbolic = false;
  if (!target && ctx.in(1).dims_value &&
      std::find(ctx.in(1).dims_value->begin(), ctx.in(1).dims_value->end(), -1) == ctx.in(1).dims_value->end()) {
    target = ctx.in(1).dims_value;
    symbolic = true;
  }
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
    if (d < 0 && !symbolic) return ctx.error("shape {} has a negative dim", dims_string(*target));
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
