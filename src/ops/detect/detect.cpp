// Data-dependent selection ops beyond the engine-core list: NonMaxSuppression and Unique. Their
// output extents depend on input values, so shape inference knows them only when the inputs are
// constant (always at run time).
#include "ops/common/nn_util.h"
#include "ops/common/tensor_util.h"

#include <algorithm>
#include <array>
#include <tuple>
#include <numeric>

namespace gpuopt {

// ---- NonMaxSuppression --------------------------------------------------------------------------

namespace {

struct NmsArgs {
  int64_t max_per_class = 0;
  double iou = 0;
  bool has_score = false;
  double score = 0;
  bool center = false;
};

// True when box a and box b overlap by IoU > threshold (the reference's suppress_by_iou).
bool suppress(const double* a, const double* b, bool center, double threshold) {
  double ax0, ax1, ay0, ay1, bx0, bx1, by0, by1;
  if (!center) {
    std::tie(ax0, ax1) = std::minmax(a[1], a[3]);
    std::tie(bx0, bx1) = std::minmax(b[1], b[3]);
    std::tie(ay0, ay1) = std::minmax(a[0], a[2]);
    std::tie(by0, by1) = std::minmax(b[0], b[2]);
  } else {
    ax0 = a[0] - a[2] / 2, ax1 = a[0] + a[2] / 2, ay0 = a[1] - a[3] / 2, ay1 = a[1] + a[3] / 2;
    bx0 = b[0] - b[2] / 2, bx1 = b[0] + b[2] / 2, by0 = b[1] - b[3] / 2, by1 = b[1] + b[3] / 2;
  }
  const double ix0 = std::max(ax0, bx0), ix1 = std::min(ax1, bx1);
  if (ix1 <= ix0) return false;
  const double iy0 = std::max(ay0, by0), iy1 = std::min(ay1, by1);
  if (iy1 <= iy0) return false;
  const double inter = (ix1 - ix0) * (iy1 - iy0);
  const double area_a = (ax1 - ax0) * (ay1 - ay0), area_b = (bx1 - bx0) * (by1 - by0);
  const double uni = area_a + area_b - inter;
  if (inter <= 0 || area_a <= 0 || area_b <= 0 || uni <= 0) return false;
  return inter / uni > threshold;
}

Result<std::vector<std::array<int64_t, 3>>> run_nms(const Node& node, const Tensor& boxes, const Tensor& scores,
                                                    const Tensor* max_t, const Tensor* iou_t, const Tensor* score_t) {
  NmsArgs a;
  a.center = node.attr_i("center_point_box", 0) != 0;
  if (max_t && max_t->numel() > 0) a.max_per_class = std::max<int64_t>(max_t->get_i64(0), 0);
  if (iou_t && iou_t->numel() > 0) a.iou = iou_t->get_f64(0);
  if (score_t && score_t->numel() > 0) a.has_score = true, a.score = score_t->get_f64(0);
  if (boxes.rank() != 3 || boxes.dim(2) != 4)
    return Status::InvalidArgument("{}: boxes must be [batch, boxes, 4], got {}", node_label(node), boxes.describe());
  if (scores.rank() != 3 || scores.dim(0) != boxes.dim(0) || scores.dim(2) != boxes.dim(1))
    return Status::InvalidArgument("{}: scores {} must be [batch, classes, boxes] for boxes {}", node_label(node),
                                   scores.describe(), boxes.describe());
  const int64_t B = boxes.dim(0), NB = boxes.dim(1), NC = scores.dim(1);
  const std::vector<double> bv = nn::to_doubles(boxes), sv = nn::to_doubles(scores);
  std::vector<std::array<int64_t, 3>> out;
  std::vector<int64_t> cand, kept;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t c = 0; c < NC; ++c) {
      const double* s = sv.data() + (b * NC + c) * NB;
      cand.clear();
      for (int64_t i = 0; i < NB; ++i)
        if (!a.has_score || s[i] > a.score) cand.push_back(i);
      // highest score first; ties: lower box index first
      std::stable_sort(cand.begin(), cand.end(), [&](int64_t x, int64_t y) { return s[x] > s[y]; });
      kept.clear();
      for (int64_t i : cand) {
        if (static_cast<int64_t>(kept.size()) >= a.max_per_class) break;
        bool ok = true;
        for (int64_t k : kept)
          if (suppress(bv.data() + (b * NB + i) * 4, bv.data() + (b * NB + k) * 4, a.center, a.iou)) {
            ok = false;
            break;
          }
        if (!ok) continue;
        kept.push_back(i);
        out.push_back({b, c, i});
      }
    }
  return out;
}

const Tensor* opt_in(const KernelContext& ctx, size_t i) { return ctx.has_input(i) ? &ctx.in(i) : nullptr; }

}  // namespace

Status infer_NonMaxSuppression(InferContext& ctx) {
  GPUOPT_RETURN_IF_ERROR(tensor_util::check_inputs(ctx, 2, 5));
  GPUOPT_RETURN_IF_ERROR(nn::require_float(ctx, 0, "boxes"));
  GPUOPT_RETURN_IF_ERROR(nn::require_float(ctx, 1, "scores"));
  GPUOPT_RETURN_IF_ERROR(tensor_util::require_int_tensor(ctx, 2, "max_output_boxes_per_class"));
  const int64_t cpb = ctx.node.attr_i("center_point_box", 0);
  if (cpb != 0 && cpb != 1) return ctx.error("center_point_box {} must be 0 or 1", cpb);
  const ValueInfo& boxes = ctx.in(0);
  const ValueInfo& scores = ctx.in(1);
  if (boxes.rank_known && (boxes.shape.size() != 3 || (boxes.shape[2] >= 0 && boxes.shape[2] != 4)))
    return ctx.error("boxes must be [batch, boxes, 4], got {}", dims_string(boxes.shape));
  if (scores.rank_known && scores.shape.size() != 3)
    return ctx.error("scores must be [batch, classes, boxes], got rank {}", scores.shape.size());
  int64_t count = kUnknownDim;
  bool all_known = boxes.value && scores.value;
  for (size_t i = 2; i < 5; ++i) all_known = all_known && (!ctx.has_input(i) || ctx.in(i).value);
  if (all_known) {
    auto in = [&](size_t i) { return ctx.has_input(i) ? ctx.in(i).value : nullptr; };
    Result<std::vector<std::array<int64_t, 3>>> r = run_nms(ctx.node, *boxes.value, *scores.value, in(2), in(3), in(4));
    if (!r.ok()) return r.status();
    count = static_cast<int64_t>(r->size());
  }
  tensor_util::set_output(ctx, 0, DType::I64, {count, 3});
  return Status::Ok();
}

// Per batch and class: candidates above score_threshold (all when it is absent), greedily taken
// by descending score (ties: lower index first) unless their IoU with a taken box exceeds
// iou_threshold, up to max_output_boxes_per_class (0 when absent). Rows: [batch, class, box].
Status cpu_NonMaxSuppression(KernelContext& ctx) {
  GPUOPT_ASSIGN_OR_RETURN(auto sel, run_nms(ctx.node, ctx.in(0), ctx.in(1), opt_in(ctx, 2), opt_in(ctx, 3), opt_in(ctx, 4)));
  int64_t* o = ctx.out(0).data<int64_t>();
  if (ctx.out(0).numel() != static_cast<int64_t>(sel.size()) * 3)
    return ctx.error("output holds {} elements for {} selected boxes", ctx.out(0).numel(), sel.size());
  for (size_t i = 0; i < sel.size(); ++i)
    for (int k = 0; k < 3; ++k) o[i * 3 + k] = sel[i][k];
  return Status::Ok();
}
double flops_NonMaxSuppression(const FlopsContext& ctx) {
  const double n = nn::est_numel(nn::flops_in(ctx, 1));
  return n < 0 ? 0 : n * 16;
}

// ---- Unique -------------------------------------------------------------------------------------

namespace {

struct UniqueResult {
  Shape y_shape;
  std::vector<int64_t> first;    // index (along the axis, or flat) of each unique slice's first occurrence
  std::vector<int64_t> inverse;  // for each input slice, its unique slice's position
  std::vector<int64_t> counts;
  int64_t axis = -1;             // -1: flattened
};

// Slices along the axis are compared element by element (numbers through double, strings as
// strings), lexicographically, like numpy.unique.
Result<UniqueResult> run_unique(const Node& node, const Tensor& x) {
  UniqueResult r;
  const bool has_axis = node.has_attr("axis");
  int64_t axis = node.attr_i("axis", 0);
  if (has_axis && !normalize_axis(&axis, x.rank()))
    return Status::InvalidArgument("{}: axis {} is out of range for rank {}", node_label(node), node.attr_i("axis", 0), x.rank());
  const Shape view = has_axis ? x.shape() : Shape{x.numel()};
  if (!has_axis) axis = 0;
  r.axis = has_axis ? axis : -1;
  const int64_t outer = shape_numel(Shape(view.begin(), view.begin() + axis));
  const int64_t n = view[axis];
  const int64_t inner = shape_numel(Shape(view.begin() + axis + 1, view.end()));
  const bool str = x.dtype() == DType::String;
  const std::vector<double> xv = str ? std::vector<double>{} : nn::to_doubles(x);
  auto elem = [&](int64_t slice, int64_t k) { return ((k / inner) * n + slice) * inner + k % inner; };
  const int64_t len = outer * inner;
  auto cmp = [&](int64_t a, int64_t b) {  // <0, 0, >0
    for (int64_t k = 0; k < len; ++k) {
      const int64_t ia = elem(a, k), ib = elem(b, k);
      if (str) {
        const int c = x.strings()[ia].compare(x.strings()[ib]);
        if (c != 0) return c;
      } else if (xv[ia] != xv[ib]) {
        return xv[ia] < xv[ib] ? -1 : 1;
      }
    }
    return 0;
  };
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return cmp(a, b) < 0; });
  // Sorted groups of equal slices; each group's first member has the smallest index (stable).
  std::vector<int64_t> group_of(static_cast<size_t>(n));
  for (size_t i = 0; i < order.size(); ++i) {
    if (i == 0 || cmp(order[i - 1], order[i]) != 0) {
      r.first.push_back(order[i]);
      r.counts.push_back(0);
    }
    group_of[order[i]] = static_cast<int64_t>(r.first.size()) - 1;
    ++r.counts.back();
  }
  if (node.attr_i("sorted", 1) == 0) {  // order the groups by first occurrence instead
    std::vector<int64_t> perm(r.first.size());
    std::iota(perm.begin(), perm.end(), 0);
    std::sort(perm.begin(), perm.end(), [&](int64_t a, int64_t b) { return r.first[a] < r.first[b]; });
    std::vector<int64_t> rank(perm.size()), first, counts;
    for (size_t i = 0; i < perm.size(); ++i) {
      rank[perm[i]] = static_cast<int64_t>(i);
      first.push_back(r.first[perm[i]]);
      counts.push_back(r.counts[perm[i]]);
    }
    for (auto& g : group_of) g = rank[g];
    r.first = std::move(first);
    r.counts = std::move(counts);
  }
  r.inverse = group_of;
  r.y_shape = view;
  r.y_shape[axis] = static_cast<int64_t>(r.first.size());
  return r;
}

}  // namespace

Status infer_Unique(InferContext& ctx) {
  GPUOPT_RETURN_IF_ERROR(tensor_util::check_inputs(ctx, 1, 1));
  const ValueInfo& x = ctx.in(0);
  const bool has_axis = ctx.node.has_attr("axis");
  int64_t u = kUnknownDim, n = kUnknownDim;
  Shape y = {kUnknownDim};
  if (x.rank_known) {
    if (has_axis) {
      int64_t axis = ctx.node.attr_i("axis", 0);
      GPUOPT_RETURN_IF_ERROR(tensor_util::norm_axis(ctx, &axis, static_cast<int64_t>(x.shape.size())));
      y = x.shape;
      y[axis] = kUnknownDim;
      n = x.shape[axis];
    } else {
      n = shape_numel(x.shape);
    }
  }
  if (x.value) {
    Result<UniqueResult> r = run_unique(ctx.node, *x.value);
    if (!r.ok()) return r.status();
    y = r->y_shape;
    u = static_cast<int64_t>(r->first.size());
  }
  if (x.rank_known || x.value) tensor_util::set_output(ctx, 0, x.dtype, y);
  else tensor_util::set_output_rank(ctx, 0, x.dtype, has_axis ? -1 : 1);
  tensor_util::set_output(ctx, 1, DType::I64, {u});
  tensor_util::set_output(ctx, 2, DType::I64, {n < 0 ? kUnknownDim : n});
  tensor_util::set_output(ctx, 3, DType::I64, {u});
  return Status::Ok();
}

// Y: the unique slices (sorted, or in order of first occurrence when sorted = 0); indices: the
// first occurrence of each; inverse_indices: for each input slice its position in Y; counts.
Status cpu_Unique(KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  GPUOPT_ASSIGN_OR_RETURN(UniqueResult r, run_unique(ctx.node, x));
  Tensor& y = ctx.out(0);
  const int64_t axis = r.axis < 0 ? 0 : r.axis;
  const Shape view = r.axis < 0 ? Shape{x.numel()} : x.shape();
  const int64_t outer = shape_numel(Shape(view.begin(), view.begin() + axis));
  const int64_t n = view[axis], u = static_cast<int64_t>(r.first.size());
  const int64_t inner = shape_numel(Shape(view.begin() + axis + 1, view.end()));
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < u; ++j) tensor_util::copy_elems(x, (o * n + r.first[j]) * inner, y, (o * u + j) * inner, inner);
  auto put = [&](size_t i, const std::vector<int64_t>& v) {
    if (i < ctx.outputs.size() && ctx.outputs[i]) std::copy(v.begin(), v.end(), ctx.out(i).data<int64_t>());
  };
  put(1, r.first);
  put(2, r.inverse);
  put(3, r.counts);
  return Status::Ok();
}
double flops_Unique(const FlopsContext&) { return 0.0; }

}  // namespace gpuopt
