// Value-creating ops: Constant, ConstantOfShape, Range, Cast, CastLike. Range and
// ConstantOfShape get their output shape from input values, known at run time (and at load
// time when constant folding has them).
#include "core/narrow_dtype.h"
#include "ops/common/broadcast.h"
#include "ops/common/tensor_util.h"

#include <cmath>
#include <limits>

namespace gpuopt {
using namespace tensor_util;

// --- Constant -----------------------------------------------------------------------------

namespace {
// The tensor a Constant node holds, or an error naming the attribute problem.
Result<Tensor> constant_value(const Node& node) {
  static const char* kForms[] = {"value", "value_float", "value_floats", "value_int", "value_ints",
                                 "value_string", "value_strings", "sparse_value"};
  const char* form = nullptr;
  for (const char* f : kForms) {
    if (!node.has_attr(f)) continue;
    if (form) return Status::InvalidArgument("{}: has both '{}' and '{}'; exactly one value attribute is allowed", node_label(node), form, f);
    form = f;
  }
  if (!form) return Status::InvalidArgument("{}: has no value attribute", node_label(node));
  const Attribute& a = *node.attr(form);
  const std::string f = form;
  if (f == "value") {
    if (a.kind != Attribute::Kind::kTensor || !a.t.defined())
      return Status::InvalidArgument("{}: attribute 'value' is not a tensor", node_label(node));
    return a.t;
  }
  if (f == "value_float") return Tensor::scalar_f32(a.f);
  if (f == "value_floats") return Tensor::from_vector(DType::F32, {static_cast<int64_t>(a.floats.size())}, a.floats);
  if (f == "value_int") return Tensor::scalar_i64(a.i);
  if (f == "value_ints") return Tensor::from_vector(DType::I64, {static_cast<int64_t>(a.ints.size())}, a.ints);
  if (f == "value_string") {
    Tensor t = Tensor::empty(DType::String, {});
    t.strings()[0] = a.s;
    return t;
  }
  if (f == "value_strings") {
    Tensor t = Tensor::empty(DType::String, {static_cast<int64_t>(a.strings.size())});
    t.strings() = a.strings;
    return t;
  }
  return Status::Unimplemented("{}: sparse_value constants are not supported", node_label(node));
}
}  // namespace

Status infer_Constant(InferContext& ctx) {
  if (ctx.num_inputs() != 0) return ctx.error("takes no inputs, got {}", ctx.num_inputs());
  GPUOPT_ASSIGN_OR_RETURN(Tensor t, constant_value(ctx.node));
  set_output(ctx, 0, t.dtype(), t.shape());
  return Status::Ok();
}
Status cpu_Constant(KernelContext& ctx) {
  GPUOPT_ASSIGN_OR_RETURN(Tensor t, constant_value(ctx.node));
  copy_all(t, ctx.out(0));
  return Status::Ok();
}
double flops_Constant(const FlopsContext&) { return 0.0; }

// --- ConstantOfShape ----------------------------------------------------------------------

Status infer_ConstantOfShape(InferContext& ctx) {
  GPUOPT_RETURN_IF_ERROR(check_inputs(ctx, 1, 1));
  GPUOPT_RETURN_IF_ERROR(require_int_tensor(ctx, 0, "shape"));
  DType dt = DType::F32;
  if (const Attribute* a = ctx.node.attr("value")) {
    if (a->kind != Attribute::Kind::kTensor || a->t.numel() != 1)
      return ctx.error("attribute 'value' must be a one-element tensor");
    dt = a->t.dtype();
  }
  const ValueInfo& s = ctx.in(0);
  if (s.rank_known && s.shape.size() != 1) return ctx.error("shape input must be 1-D, got rank {}", s.shape.size());
  auto dims = const_ints(ctx, 0);
  bool symbolic = false;
  if (!dims && s.dims_value && std::find(s.dims_value->begin(), s.dims_value->end(), -1) == s.dims_value->end()) {
    dims = s.dims_value;  // a shape computed from shapes: its dims and symbols
    symbolic = true;
  }
  if (!dims) {
    set_output_rank(ctx, 0, dt, s.rank_known && s.shape[0] >= 0 ? s.shape[0] : -1);
    return Status::Ok();
  }
  for (int64_t d : *dims)
    if (d < 0 && !symbolic) return ctx.error("shape {} has a negative dim", dims_string(*dims));
  set_output(ctx, 0, dt, *dims);
  // A small integer fill of rank 1 (torch's expand: ConstantOfShape(Shape(s)) * -1): a shape value.
  if (dims->size() == 1 && (*dims)[0] >= 0 && (*dims)[0] <= kMaxDimsValue && (dt == DType::I64 || dt == DType::I32)) {
    const Attribute* a = ctx.node.attr("value");
    const int64_t v = a ? a->t.get_i64(0) : 0;
    if (v >= -1) set_dims_value(ctx, 0, std::vector<int64_t>(static_cast<size_t>((*dims)[0]), v));
  }
  return Status::Ok();
}
Status cpu_ConstantOfShape(KernelContext& ctx) {
  Tensor& out = ctx.out(0);
  const Attribute* a = ctx.node.attr("value");
  if (!a) {
    if (out.nbytes()) std::memset(out.raw(), 0, out.nbytes());  // an empty output has no buffer
    return Status::Ok();
  }
  if (out.dtype() == DType::String) {
    for (auto& s : out.strings()) s = a->t.strings()[0];
    return Status::Ok();
  }
  const size_t es = dtype_size(out.dtype());
  for (int64_t i = 0; i < out.numel(); ++i) std::memcpy(static_cast<char*>(out.raw()) + i * es, a->t.raw(), es);
  return Status::Ok();
}
double flops_ConstantOfShape(const FlopsContext&) { return 0.0; }

// --- Range --------------------------------------------------------------------------------

namespace {
// Element count max(ceil((limit - start) / delta), 0); integers exactly, floats in double.
Result<int64_t> range_count(const Tensor& s, const Tensor& l, const Tensor& d) {
  if (dtype_is_integer(s.dtype())) {
    const int64_t a = s.get_i64(0), b = l.get_i64(0), st = d.get_i64(0);
    if (st == 0) return Status::InvalidArgument("delta must not be 0");
    // In 128 bits: limit - start and the rounding can pass int64 for hostile inputs.
    const __int128 span = static_cast<__int128>(b) - a;
    if ((span > 0) != (st > 0) || span == 0) return int64_t{0};
    const __int128 n = (span + st - (st > 0 ? 1 : -1)) / st;
    if (n > INT64_MAX) return Status::InvalidArgument("range of {} to {} by {} has too many elements", a, b, st);
    return static_cast<int64_t>(n);
  }
  const double a = s.get_f64(0), b = l.get_f64(0), st = d.get_f64(0);
  if (st == 0.0 || !std::isfinite(st) || !std::isfinite(a) || !std::isfinite(b))
    return Status::InvalidArgument("start {}, limit {} and delta {} must be finite and delta non-zero", a, b, st);
  const double n = std::ceil((b - a) / st);
  if (n > 1e10) return Status::InvalidArgument("range of {} elements is too large", n);
  return n > 0 ? static_cast<int64_t>(n) : int64_t{0};
}
}  // namespace

Status infer_Range(InferContext& ctx) {
  GPUOPT_RETURN_IF_ERROR(check_inputs(ctx, 3, 3));
  const DType dt = ctx.in(0).dtype;
  for (size_t i = 0; i < 3; ++i) {
    const ValueInfo& v = ctx.in(i);
    if (v.dtype != dt) return ctx.error("input {} has dtype {} but start has {}", i, dtype_name(v.dtype), dtype_name(dt));
    if (v.rank_known && shape_numel(v.shape) != 1 && shape_numel(v.shape) >= 0)
      return ctx.error("input {} must be a scalar, got shape {}", i, shape_to_string(v.shape));
  }
  if (!dtype_is_float(dt) && !dtype_is_integer(dt)) return ctx.error("dtype {} is not numeric", dtype_name(dt));
  const Tensor *s = const_input(ctx, 0), *l = const_input(ctx, 1), *d = const_input(ctx, 2);
  if (!s || !l || !d) {
    // Range(0, n, 1) with n a shape value (torch's arange(seq_len)): n elements, a symbol too.
    const auto lv = dims_value_of(ctx, 1);
    const bool count_is_limit = s && d && dtype_is_integer(dt) && s->get_i64(0) == 0 && d->get_i64(0) == 1 && lv &&
                                lv->size() == 1 && (*lv)[0] != -1;
    set_output(ctx, 0, dt, {count_is_limit ? (*lv)[0] : kUnknownDim});
    return Status::Ok();
  }
  Result<int64_t> n = range_count(*s, *l, *d);
  if (!n.ok()) return ctx.error("{}", n.status().message());
  set_output(ctx, 0, dt, {*n});
  return Status::Ok();
}
Status cpu_Range(KernelContext& ctx) {
  Tensor& out = ctx.out(0);
  dispatch_dtype(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* o = out.data<T>();
    if constexpr (std::is_integral_v<T>) {
      const int64_t a = ctx.in(0).get_i64(0), st = ctx.in(2).get_i64(0);
      // Two's-complement wraparound as numpy computes it, without signed-overflow UB.
      for (int64_t i = 0; i < out.numel(); ++i)
        o[i] = static_cast<T>(static_cast<uint64_t>(a) + static_cast<uint64_t>(i) * static_cast<uint64_t>(st));
    } else {
      // Accumulated in T as the spec's loop does (start, start+delta, ...): matters for f16.
      T v = from_f64<T>(ctx.in(0).get_f64(0));
      const double st = ctx.in(2).get_f64(0);
      for (int64_t i = 0; i < out.numel(); ++i) {
        o[i] = v;
        v = store_f64<T>(to_f64(v) + st);
      }
    }
  });
  return Status::Ok();
}
double flops_Range(const FlopsContext& ctx) { return numel_or_zero(ctx.outputs.empty() ? nullptr : ctx.outputs[0]); }

// --- Cast / CastLike ----------------------------------------------------------------------

namespace {
template <typename D>
D cast_from_f64(double v) {
  if constexpr (std::is_same_v<D, bool>) {
    return v != 0.0;  // NaN is true, like C++ and NumPy
  } else if constexpr (std::is_integral_v<D>) {
    // Out-of-range and NaN are undefined in ONNX; saturate instead of invoking C++ UB.
    if (std::isnan(v)) return D{0};
    if (v <= static_cast<double>(std::numeric_limits<D>::min())) return std::numeric_limits<D>::min();
    if (v >= static_cast<double>(std::numeric_limits<D>::max())) return std::numeric_limits<D>::max();
    return static_cast<D>(v);
  } else {
    return store_f64<D>(v);
  }
}

template <typename S>
std::string to_string_elem(S v) {
  if constexpr (std::is_same_v<S, bool>) return v ? "True" : "False";
  else if constexpr (std::is_same_v<S, Half> || std::is_same_v<S, BFloat16>) return fmt::format("{}", static_cast<float>(v));
  else if constexpr (std::is_integral_v<S>) return fmt::format("{}", v);
  else if constexpr (std::is_same_v<S, float> || std::is_same_v<S, double>) {
    if (std::isnan(v)) return "NaN";
    if (std::isinf(v)) return v > 0 ? "INF" : "-INF";
    return fmt::format("{}", v);
  }
  return {};
}

// Casts from or to a narrow type go element by element through double (exact for every source
// value a narrow type can hold or be rounded from: f64 and narrower).
Status cast_narrow(const Tensor& in, Tensor& out, NarrowCast how) {
  const DType from = in.dtype(), to = out.dtype();
  const int64_t n = in.numel();
  auto value = [&](int64_t i) -> Result<double> {
    if (from != DType::String) return in.get_f64(i);
    const std::string& s = in.strings()[i];
    char* end = nullptr;
    const double v = std::strtod(s.c_str(), &end);
    if (s.empty() || *end != '\0') return Status::InvalidArgument("cannot cast string '{}' to {}", s, dtype_name(to));
    return v;
  };
  if (to == DType::String) {
    for (int64_t i = 0; i < n; ++i) out.strings()[i] = to_string_elem(in.get_f64(i));
    return Status::Ok();
  }
  if (dtype_is_narrow(to)) {
    uint8_t* d = out.data<uint8_t>();
    for (int64_t i = 0; i < n; ++i) {
      GPUOPT_ASSIGN_OR_RETURN(const double v, value(i));
      d[i] = narrow_from_f64(to, v, how);
    }
    return Status::Ok();
  }
  dispatch_dtype(to, [&](auto dtag) {
    using D = decltype(dtag);
    D* d = out.data<D>();
    for (int64_t i = 0; i < n; ++i) d[i] = cast_from_f64<D>(in.get_f64(i));
  });
  return Status::Ok();
}

Status cast_tensor(const Tensor& in, Tensor& out, NarrowCast how) {
  const DType from = in.dtype(), to = out.dtype();
  const int64_t n = in.numel();
  if (from == to) {
    copy_all(in, out);
    return Status::Ok();
  }
  if (dtype_is_narrow(from) || dtype_is_narrow(to)) return cast_narrow(in, out, how);
  if (from == DType::String) {
    return dispatch_dtype(to, [&](auto tag) -> Status {
      using D = decltype(tag);
      for (int64_t i = 0; i < n; ++i) {
        const std::string& s = in.strings()[i];
        char* end = nullptr;
        const double v = std::strtod(s.c_str(), &end);
        if (s.empty() || *end != '\0') return Status::InvalidArgument("cannot cast string '{}' to {}", s, dtype_name(to));
        if constexpr (std::is_integral_v<D> && !std::is_same_v<D, bool>) out.data<D>()[i] = static_cast<D>(std::strtoll(s.c_str(), nullptr, 10));
        else out.data<D>()[i] = cast_from_f64<D>(v);
      }
      return Status::Ok();
    });
  }
  if (to == DType::String) {
    dispatch_dtype(from, [&](auto tag) {
      using S = decltype(tag);
      for (int64_t i = 0; i < n; ++i) out.strings()[i] = to_string_elem(in.data<S>()[i]);
    });
    return Status::Ok();
  }
  dispatch_dtype(from, [&](auto stag) {
    using S = decltype(stag);
    dispatch_dtype(to, [&](auto dtag) {
      using D = decltype(dtag);
      const S* s = in.data<S>();
      D* d = out.data<D>();
      for (int64_t i = 0; i < n; ++i) {
        if constexpr (std::is_integral_v<S> && std::is_integral_v<D> && !std::is_same_v<D, bool>) d[i] = static_cast<D>(s[i]);
        else if constexpr (std::is_same_v<S, float> && (std::is_same_v<D, Half> || std::is_same_v<D, BFloat16>)) d[i] = D(s[i]);
        else d[i] = cast_from_f64<D>(to_f64(s[i]));
      }
    });
  });
  return Status::Ok();
}

// Cast's saturate (float8) and round_mode (e8m0) attributes.
NarrowCast narrow_cast_of(const KernelContext& ctx) {
  NarrowCast how{.saturate = ctx.node.attr_i("saturate", 1) != 0};
  const std::string mode = ctx.node.attr_s("round_mode", "up");
  how.round = mode == "down" ? E8M0Round::kDown : mode == "nearest" ? E8M0Round::kNearest : E8M0Round::kUp;
  return how;
}

Status infer_cast_to(InferContext& ctx, DType to) {
  ctx.outputs[0] = ctx.in(0);
  ctx.outputs[0].value = nullptr;
  ctx.outputs[0].dtype = to;
  if (to != DType::I64 && to != DType::I32) ctx.outputs[0].dims_value.reset();  // shape values stay integers
  return Status::Ok();
}
}  // namespace

Status infer_Cast(InferContext& ctx) {
  GPUOPT_RETURN_IF_ERROR(check_inputs(ctx, 1, 1));
  if (!ctx.node.has_attr("to")) return ctx.error("attribute 'to' is required");
  const int64_t to_id = ctx.node.attr_i("to", 0);
  std::optional<DType> to = dtype_from_onnx(static_cast<int>(to_id));
  if (!to) return Status::Unimplemented("{}: cast to ONNX data type {} is not supported", node_label(ctx.node), to_id);
  const std::string mode = ctx.node.attr_s("round_mode", "up");
  if (mode != "up" && mode != "down" && mode != "nearest")
    return ctx.error("round_mode '{}' is not one of up, down, nearest", mode);
  return infer_cast_to(ctx, *to);
}
Status cpu_Cast(KernelContext& ctx) {
  Status st = cast_tensor(ctx.in(0), ctx.out(0), narrow_cast_of(ctx));
  return st.ok() ? st : ctx.error("{}", st.message());
}
double flops_Cast(const FlopsContext&) { return 0.0; }

Status infer_CastLike(InferContext& ctx) {
  GPUOPT_RETURN_IF_ERROR(check_inputs(ctx, 2, 2));
  return infer_cast_to(ctx, ctx.in(1).dtype);
}
Status cpu_CastLike(KernelContext& ctx) {
  Status st = cast_tensor(ctx.in(0), ctx.out(0), narrow_cast_of(ctx));
  return st.ok() ? st : ctx.error("{}", st.message());
}
double flops_CastLike(const FlopsContext&) { return 0.0; }

}  // namespace gpuopt
