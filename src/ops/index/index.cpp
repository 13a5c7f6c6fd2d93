// Indexing ops: Gather, GatherElements, GatherND, ScatterND, ScatterElements (and the older
// Scatter), NonZero, TopK. Indices may be negative (counted from the end); an index out of
// range is a clear error naming the node, never a stray read.
#include "ops/common/tensor_util.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace gpuopt {
using namespace tensor_util;

namespace {

Status check_index_dtype(const InferContext& ctx, size_t i) { return require_int_tensor(ctx, i, "indices"); }

// Normalized index or an error: "index 7 is out of range for axis 1 of extent 5".
template <typename Ctx>
Status fix_index(const Ctx& ctx, int64_t* idx, int64_t extent, int64_t axis) {
  const int64_t orig = *idx;
  if (*idx < 0) *idx += extent;
  if (*idx < 0 || *idx >= extent)
    return ctx.error("index {} is out of range for axis {} of extent {}", orig, axis, extent);
  return Status::Ok();
}

int64_t prod(const Shape& s, size_t b, size_t e) {
  int64_t p = 1;
  for (size_t i = b; i < e && i < s.size(); ++i) p *= s[i];
  return p;
}

enum class Reduction { kNone, kAdd, kMul, kMax, kMin };

Result<Reduction> reduction_of(const Node& node) {
  const std::string r = node.attr_s("reduction", "none");
  if (r == "none") return Reduction::kNone;
  if (r == "add") return Reduction::kAdd;
  if (r == "mul") return Reduction::kMul;
  if (r == "max") return Reduction::kMax;
  if (r == "min") return Reduction::kMin;
  return Status::InvalidArgument("{}: reduction '{}' must be none, add, mul, max or min", node_label(node), r);
}

template <typename T>
T combine(T a, T b, Reduction r) {
  if constexpr (std::is_same_v<T, bool>) {
    return (r == Reduction::kAdd || r == Reduction::kMax) ? (a || b) : (a && b);
  } else if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
    const float x = static_cast<float>(a), y = static_cast<float>(b);
    switch (r) {
      case Reduction::kAdd: return T(x + y);
      case Reduction::kMul: return T(x * y);
      case Reduction::kMax: return T(std::max(x, y));
      case Reduction::kMin: return T(std::min(x, y));
      case Reduction::kNone: break;
    }
    return b;
  } else {
    switch (r) {
      case Reduction::kAdd: return static_cast<T>(a + b);
      case Reduction::kMul: return static_cast<T>(a * b);
      case Reduction::kMax: return std::max(a, b);
      case Reduction::kMin: return std::min(a, b);
      case Reduction::kNone: break;
    }
    return b;
  }
}

// dst[d] (op)= src[s]: plain copy for reduction none (any dtype), typed otherwise.
void scatter_one(const Tensor& src, int64_t s, Tensor& dst, int64_t d, int64_t n, Reduction r) {
  if (r == Reduction::kNone) {
    copy_elems(src, s, dst, d, n);
    return;
  }
  dispatch_dtype(dst.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* o = dst.data<T>();
    const T* u = src.data<T>();
    for (int64_t i = 0; i < n; ++i) o[d + i] = combine(o[d + i], u[s + i], r);
  });
}

}  // namespace

// --- Gather -------------------------------------------------------------------------------

Status infer_Gather(InferContext& ctx) {
  GPUOPT_RETURN_IF_ERROR(check_inputs(ctx, 2, 2));
  GPUOPT_RETURN_IF_ERROR(check_index_dtype(ctx, 1));
  const ValueInfo &data = ctx.in(0), &ind = ctx.in(1);
  if (!data.rank_known || !ind.rank_known) {
    set_output_rank(ctx, 0, data.dtype, -1);
    return Status::Ok();
  }
  if (data.shape.empty()) return ctx.error("data must have rank >= 1");
  int64_t axis = ctx.node.attr_i("axis", 0);
  GPUOPT_RETURN_IF_ERROR(norm_axis(ctx, &axis, static_cast<int64_t>(data.shape.size())));
  // Constant indices are checked here already (load time) so the error names the model, not a run.
  if (const Tensor* iv = ind.value; iv && data.shape[axis] >= 0)
    for (int64_t i = 0; i < iv->numel(); ++i) {
      int64_t idx = iv->get_i64(i);
      GPUOPT_RETURN_IF_ERROR(fix_index(ctx, &idx, data.shape[axis], axis));
    }
  Shape out(data.shape.begin(), data.shape.begin() + axis);
  out.insert(out.end(), ind.shape.begin(), ind.shape.end());
  out.insert(out.end(), data.shape.begin() + axis + 1, data.shape.end());
  set_output(ctx, 0, data.dtype, std::move(out));
  // Shape arithmetic: Shape(x)[i] with constant indices keeps its dims (symbols too).
  if (auto dv = dims_value_of(ctx, 0); dv && data.shape.size() == 1 && ind.value && ind.value->rank() <= 1) {
    std::vector<int64_t> picked;
    const int64_t n = static_cast<int64_t>(dv->size());
    for (int64_t i = 0; i < ind.value->numel(); ++i) {
      const int64_t idx = ind.value->get_i64(i);
      if (idx < -n || idx >= n) return Status::Ok();
      picked.push_back((*dv)[static_cast<size_t>(idx < 0 ? idx + n : idx)]);
    }
    set_dims_value(ctx, 0, std::move(picked));
  }
  return Status::Ok();
}
Status cpu_Gather(KernelContext& ctx) {
  const Tensor &data = ctx.in(0), &ind = ctx.in(1);
  int64_t axis = ctx.node.attr_i("axis", 0);
  normalize_axis(&axis, data.rank());
  const int64_t outer = prod(data.shape(), 0, axis), extent = data.shape()[axis];
  const int64_t inner = prod(data.shape(), axis + 1, data.shape().size());
  const int64_t n = ind.numel();
  std::vector<int64_t> idx = ind.to_i64_vector();
  for (int64_t& i : idx) GPUOPT_RETURN_IF_ERROR(fix_index(ctx, &i, extent, axis));
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < n; ++j) copy_elems(data, (o * extent + idx[j]) * inner, ctx.out(0), (o * n + j) * inner, inner);
  return Status::Ok();
}
double flops_Gather(const FlopsContext&) { return 0.0; }

// --- GatherElements -----------------------------------------------------------------------

namespace {
Status elements_check(const InferContext& ctx, const ValueInfo& data, const ValueInfo& ind, int64_t* axis) {
  if (data.shape.size() != ind.shape.size())
    return ctx.error("indices rank {} must equal data rank {}", ind.shape.size(), data.shape.size());
  if (data.shape.empty()) return ctx.error("data must have rank >= 1");
  *axis = ctx.node.attr_i("axis", 0);
  return norm_axis(ctx, axis, static_cast<int64_t>(data.shape.size()));
}

// Visits every element of `shape` with its offset in `shape` and, with `axis` replaced by the
// element's index value, its offset in a tensor of shape `target`.
template <typename Ctx, typename F>
Status for_each_element_index(const Ctx& ctx, const Shape& shape, const Tensor& ind, const Shape& target, int64_t axis,
                              F&& f) {
  const std::vector<int64_t> tst = shape_strides(target);
  const size_t r = shape.size();
  std::vector<int64_t> c(r, 0);
  const int64_t n = shape_numel(shape);
  for (int64_t e = 0; e < n; ++e) {
    int64_t idx = ind.get_i64(e);
    GPUOPT_RETURN_IF_ERROR(fix_index(ctx, &idx, target[axis], axis));
    int64_t off = 0;
    for (size_t d = 0; d < r; ++d) off += (static_cast<int64_t>(d) == axis ? idx : c[d]) * tst[d];
    f(e, off);
    for (int64_t d = static_cast<int64_t>(r) - 1; d >= 0; --d) {
      if (++c[d] < shape[d]) break;
      c[d] = 0;
    }
  }
  return Status::Ok();
}
}  // namespace

Status infer_GatherElements(InferContext& ctx) {
  GPUOPT_RETURN_IF_ERROR(check_inputs(ctx, 2, 2));
  GPUOPT_RETURN_IF_ERROR(check_index_dtype(ctx, 1));
  const ValueInfo &data = ctx.in(0), &ind = ctx.in(1);
  if (data.rank_known && ind.rank_known) {
    int64_t axis = 0;
    GPUOPT_RETURN_IF_ERROR(elements_check(ctx, data, ind, &axis));
  }
  if (ind.rank_known) set_output(ctx, 0, data.dtype, ind.shape);
  else set_output_rank(ctx, 0, data.dtype, data.rank_known ? static_cast<int64_t>(data.shape.size()) : -1);
  return Status::Ok();
}
Status cpu_GatherElements(KernelContext& ctx) {
  const Tensor &data = ctx.in(0), &ind = ctx.in(1);
  int64_t axis = ctx.node.attr_i("axis", 0);
  normalize_axis(&axis, data.rank());
  Tensor& out = ctx.out(0);
  return for_each_element_index(ctx, ind.shape(), ind, data.shape(), axis,
                                [&](int64_t e, int64_t off) { copy_elems(data, off, out, e, 1); });
}
double flops_GatherElements(const FlopsContext&) { return 0.0; }

// --- ScatterElements / Scatter ------------------------------------------------------------

namespace {
Status infer_scatter_elements(InferContext& ctx) {
  GPUOPT_RETURN_IF_ERROR(check_inputs(ctx, 3, 3));
  GPUOPT_RETURN_IF_ERROR(check_index_dtype(ctx, 1));
  GPUOPT_RETURN_IF_ERROR(reduction_of(ctx.node).status());
  const ValueInfo &data = ctx.in(0), &ind = ctx.in(1), &upd = ctx.in(2);
  if (upd.dtype != data.dtype) return ctx.error("updates dtype {} must equal data dtype {}", dtype_name(upd.dtype), dtype_name(data.dtype));
  if (data.rank_known && ind.rank_known) {
    int64_t axis = 0;
    GPUOPT_RETURN_IF_ERROR(elements_check(ctx, data, ind, &axis));
    if (upd.rank_known && upd.shape != ind.shape && shape_is_concrete(upd.shape) && shape_is_concrete(ind.shape))
      return ctx.error("updates shape {} must equal indices shape {}", shape_to_string(upd.shape), shape_to_string(ind.shape));
  }
  ctx.outputs[0] = data;
  ctx.outputs[0].value = nullptr;
  return Status::Ok();
}
Status cpu_scatter_elements(KernelContext& ctx) {
  const Tensor &data = ctx.in(0), &ind = ctx.in(1), &upd = ctx.in(2);
  GPUOPT_ASSIGN_OR_RETURN(Reduction r, reduction_of(ctx.node));
  Tensor& out = ctx.out(0);
  copy_all(data, out);
  int64_t axis = ctx.node.attr_i("axis", 0);
  normalize_axis(&axis, data.rank());
  return for_each_element_index(ctx, ind.shape(), ind, data.shape(), axis,
                                [&](int64_t e, int64_t off) { scatter_one(upd, e, out, off, 1, r); });
}
}  // namespace

Status infer_ScatterElements(InferContext& ctx) { return infer_scatter_elements(ctx); }
Status cpu_ScatterElements(KernelContext& ctx) { return cpu_scatter_elements(ctx); }
double flops_ScatterElements(const FlopsContext& ctx) {
  return ctx.node.attr_s("reduction", "none") == "none" ? 0.0 : numel_or_zero(ctx.inputs.size() > 2 ? ctx.inputs[2] : nullptr);
}
// Scatter (opsets 9-10) is ScatterElements without reduction.
Status infer_Scatter(InferContext& ctx) { return infer_scatter_elements(ctx); }
Status cpu_Scatter(KernelContext& ctx) { return cpu_scatter_elements(ctx); }
double flops_Scatter(const FlopsContext&) { return 0.0; }

// --- GatherND / ScatterND -----------------------------------------------------------------

Status infer_GatherND(InferContext& ctx) {
  GPUOPT_RETURN_IF_ERROR(check_inputs(ctx, 2, 2));
  GPUOPT_RETURN_IF_ERROR(check_index_dtype(ctx, 1));
  const ValueInfo &data = ctx.in(0), &ind = ctx.in(1);
  const int64_t b = ctx.node.attr_i("batch_dims", 0);
  if (!data.rank_known || !ind.rank_known || ind.shape.back() < 0) {
    set_output_rank(ctx, 0, data.dtype, -1);
    return Status::Ok();
  }
  const int64_t r = static_cast<int64_t>(data.shape.size()), q = static_cast<int64_t>(ind.shape.size());
  if (r < 1 || q < 1) return ctx.error("data and indices must have rank >= 1");
  const int64_t m = ind.shape.back();
  if (b < 0 || b >= std::min(r, q)) return ctx.error("batch_dims {} must be in [0, {})", b, std::min(r, q));
  if (m < 1 || m > r - b) return ctx.error("indices last dim {} must be in [1, {}]", m, r - b);
  for (int64_t i = 0; i < b; ++i) {
    int64_t d;
    if (!merge_dim(data.shape[i], ind.shape[i], &d))
      return ctx.error("batch dim {} differs: data {} vs indices {}", i, shape_to_string(data.shape), shape_to_string(ind.shape));
  }
  Shape out(ind.shape.begin(), ind.shape.end() - 1);
  out.insert(out.end(), data.shape.begin() + b + m, data.shape.end());
  set_output(ctx, 0, data.dtype, std::move(out));
  return Status::Ok();
}

namespace {
// For GatherND/ScatterND: each index tuple's element offset into data (batch offset included).
template <typename Ctx>
Status nd_offsets(const Ctx& ctx, const Tensor& data, const Tensor& ind, int64_t b, std::vector<int64_t>* offs,
                  int64_t* slice) {
  const Shape& ds = data.shape();
  const Shape& is = ind.shape();
  const int64_t m = is.back(), q = ind.rank();
  const int64_t batches = prod(is, 0, b), tuples = prod(is, b, q - 1);
  *slice = prod(ds, b + m, ds.size());
  const int64_t batch_stride = prod(ds, b, ds.size());
  const std::vector<int64_t> st = shape_strides(ds);
  offs->resize(static_cast<size_t>(batches * tuples));
  for (int64_t bt = 0; bt < batches; ++bt)
    for (int64_t t = 0; t < tuples; ++t) {
      int64_t off = bt * batch_stride;
      for (int64_t k = 0; k < m; ++k) {
        int64_t idx = ind.get_i64((bt * tuples + t) * m + k);
        GPUOPT_RETURN_IF_ERROR(fix_index(ctx, &idx, ds[b + k], b + k));
        off += idx * st[b + k];
      }
      (*offs)[bt * tuples + t] = off;
    }
  return Status::Ok();
}
}  // namespace

Status cpu_GatherND(KernelContext& ctx) {
  std::vector<int64_t> offs;
  int64_t slice = 0;
  GPUOPT_RETURN_IF_ERROR(nd_offsets(ctx, ctx.in(0), ctx.in(1), ctx.node.attr_i("batch_dims", 0), &offs, &slice));
  for (size_t i = 0; i < offs.size(); ++i) copy_elems(ctx.in(0), offs[i], ctx.out(0), static_cast<int64_t>(i) * slice, slice);
  return Status::Ok();
}
double flops_GatherND(const FlopsContext&) { return 0.0; }

Status infer_ScatterND(InferContext& ctx) {
  GPUOPT_RETURN_IF_ERROR(check_inputs(ctx, 3, 3));
  GPUOPT_RETURN_IF_ERROR(check_index_dtype(ctx, 1));
  GPUOPT_RETURN_IF_ERROR(reduction_of(ctx.node).status());
  const ValueInfo &data = ctx.in(0), &ind = ctx.in(1), &upd = ctx.in(2);
  if (upd.dtype != data.dtype) return ctx.error("updates dtype {} must equal data dtype {}", dtype_name(upd.dtype), dtype_name(data.dtype));
  if (data.rank_known && ind.rank_known && upd.rank_known && shape_is_concrete(data.shape) && shape_is_concrete(ind.shape)) {
    const int64_t m = ind.shape.empty() ? 0 : ind.shape.back();
    if (ind.shape.empty() || m < 1 || m > static_cast<int64_t>(data.shape.size()))
      return ctx.error("indices last dim must be in [1, {}], indices shape {}", data.shape.size(), shape_to_string(ind.shape));
    Shape want(ind.shape.begin(), ind.shape.end() - 1);
    want.insert(want.end(), data.shape.begin() + m, data.shape.end());
    if (shape_is_concrete(upd.shape) && upd.shape != want)
      return ctx.error("updates shape {} must be {}", shape_to_string(upd.shape), shape_to_string(want));
  }
  ctx.outputs[0] = data;
  ctx.outputs[0].value = nullptr;
  return Status::Ok();
}
Status cpu_ScatterND(KernelContext& ctx) {
  GPUOPT_ASSIGN_OR_RETURN(Reduction r, reduction_of(ctx.node));
  copy_all(ctx.in(0), ctx.out(0));
  std::vector<int64_t> offs;
  int64_t slice = 0;
  GPUOPT_RETURN_IF_ERROR(nd_offsets(ctx, ctx.in(0), ctx.in(1), 0, &offs, &slice));
  for (size_t i = 0; i < offs.size(); ++i) scatter_one(ctx.in(2), static_cast<int64_t>(i) * slice, ctx.out(0), offs[i], slice, r);
  return Status::Ok();
}
double flops_ScatterND(const FlopsContext& ctx) {
  return ctx.node.attr_s("reduction", "none") == "none" ? 0.0 : numel_or_zero(ctx.inputs.size() > 2 ? ctx.inputs[2] : nullptr);
}

// --- NonZero ------------------------------------------------------------------------------

namespace {
std::vector<int64_t> nonzero_positions(const Tensor& t) {
  std::vector<int64_t> pos;
  if (t.dtype() == DType::String) {
    for (int64_t i = 0; i < t.numel(); ++i)
      if (!t.strings()[i].empty()) pos.push_back(i);
    return pos;
  }
  dispatch_dtype(t.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* p = t.data<T>();
    for (int64_t i = 0; i < t.numel(); ++i) {
      bool nz;
      if constexpr (std::is_integral_v<T>) nz = p[i] != 0;
      else nz = to_f64(p[i]) != 0.0;
      if (nz) pos.push_back(i);
    }
  });
  return pos;
}
}  // namespace

Status infer_NonZero(InferContext& ctx) {
  GPUOPT_RETURN_IF_ERROR(check_inputs(ctx, 1, 1));
  const ValueInfo& x = ctx.in(0);
  const int64_t rank = x.rank_known ? static_cast<int64_t>(x.shape.size()) : kUnknownDim;
  const int64_t count = x.value ? static_cast<int64_t>(nonzero_positions(*x.value).size()) : kUnknownDim;
  set_output(ctx, 0, DType::I64, {rank == 0 ? 1 : rank, count});  // a scalar reports as rank 1
  return Status::Ok();
}
Status cpu_NonZero(KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  const std::vector<int64_t> pos = nonzero_positions(x);
  const int64_t n = static_cast<int64_t>(pos.size());
  const std::vector<int64_t> st = shape_strides(x.shape());
  int64_t* o = ctx.out(0).data<int64_t>();
  if (x.rank() == 0) {
    for (int64_t j = 0; j < n; ++j) o[j] = 0;
    return Status::Ok();
  }
  for (int64_t j = 0; j < n; ++j)
    for (int64_t d = 0; d < x.rank(); ++d) o[d * n + j] = (pos[j] / st[d]) % x.shape()[d];
  return Status::Ok();
}
double flops_NonZero(const FlopsContext&) { return 0.0; }

// --- TopK ---------------------------------------------------------------------------------

namespace {
// k_attr: K is the attribute `k` (opsets 1-9, TopK_v1); from 10 it is input 1.
std::optional<int64_t> topk_k(const Node& node, bool k_attr, const Tensor* k_input) {
  if (k_attr) return node.attr_i("k", -1);
  if (!k_input) return std::nullopt;
  return k_input->numel() == 1 ? k_input->get_i64(0) : -1;
}

Status infer_topk(InferContext& ctx, bool k_attr) {
  GPUOPT_RETURN_IF_ERROR(check_inputs(ctx, k_attr ? 1 : 2, k_attr ? 1 : 2));
  GPUOPT_RETURN_IF_ERROR(require_int_tensor(ctx, 1, "K"));
  const ValueInfo& x = ctx.in(0);
  if (!x.rank_known) {
    set_output_rank(ctx, 0, x.dtype, -1);
    set_output_rank(ctx, 1, DType::I64, -1);
    return Status::Ok();
  }
  if (x.shape.empty()) return ctx.error("input must have rank >= 1");
  int64_t axis = ctx.node.attr_i("axis", -1);
  GPUOPT_RETURN_IF_ERROR(norm_axis(ctx, &axis, static_cast<int64_t>(x.shape.size())));
  std::optional<int64_t> k = topk_k(ctx.node, k_attr, const_input(ctx, 1));
  if (k && (*k < 0 || (x.shape[axis] >= 0 && *k > x.shape[axis])))
    return ctx.error("k = {} must be in [0, {}] (axis {} of shape {})", *k, x.shape[axis], axis, shape_to_string(x.shape));
  Shape out = x.shape;
  out[axis] = k ? *k : kUnknownDim;
  set_output(ctx, 0, x.dtype, out);
  set_output(ctx, 1, DType::I64, out);
  return Status::Ok();
}
}  // namespace

Status infer_TopK_v1(InferContext& ctx) { return infer_topk(ctx, true); }
Status infer_TopK(InferContext& ctx) { return infer_topk(ctx, false); }
Status cpu_TopK_v1(KernelContext& ctx) { return cpu_TopK(ctx); }
Status cpu_TopK(KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  int64_t axis = ctx.node.attr_i("axis", -1);
  normalize_axis(&axis, x.rank());
  const bool largest = ctx.node.attr_i("largest", 1) != 0;
  const int64_t n = x.shape()[axis];
  const int64_t k = ctx.outputs[0] ? ctx.out(0).shape()[axis] : ctx.out(1).shape()[axis];
  const int64_t outer = prod(x.shape(), 0, axis), inner = prod(x.shape(), axis + 1, x.shape().size());
  dispatch_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using K = std::conditional_t<std::is_integral_v<T>, T, double>;  // exact for 64-bit ints
    const T* p = x.data<T>();
    std::vector<std::pair<K, int64_t>> line(static_cast<size_t>(n));
    // Order: larger (or smaller) first; NaN counts as the largest; ties by lower index.
    auto before = [&](const std::pair<K, int64_t>& a, const std::pair<K, int64_t>& b) {
      if constexpr (!std::is_integral_v<T>) {
        const bool an = std::isnan(a.first), bn = std::isnan(b.first);
        if (an || bn) return an != bn ? (largest ? an : bn) : a.second < b.second;
      }
      if (a.first != b.first) return largest ? a.first > b.first : a.first < b.first;
      return a.second < b.second;
    };
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) {
        for (int64_t j = 0; j < n; ++j) {
          const T v = p[(o * n + j) * inner + i];
          if constexpr (std::is_integral_v<T>) line[j] = {v, j};
          else line[j] = {to_f64(v), j};
        }
        std::partial_sort(line.begin(), line.begin() + k, line.end(), before);
        for (int64_t j = 0; j < k; ++j) {
          const int64_t at = (o * k + j) * inner + i;
          if (ctx.outputs[0]) ctx.out(0).data<T>()[at] = p[(o * n + line[j].second) * inner + i];
          if (ctx.outputs.size() > 1 && ctx.outputs[1]) ctx.out(1).data<int64_t>()[at] = line[j].second;
        }
      }
  });
  return Status::Ok();
}
double flops_TopK(const FlopsContext& ctx) {
  // About n log2 k comparisons per line.
  const double n = numel_or_zero(ctx.inputs.empty() ? nullptr : ctx.inputs[0]);
  const double out = numel_or_zero(ctx.outputs.empty() ? nullptr : ctx.outputs[0]);
  return out > 0 && n > 0 ? n * std::log2(std::max(2.0, out)) : n;
}

}  // namespace gpuopt
