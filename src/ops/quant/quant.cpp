// QuantizeLinear / DequantizeLinear (per-tensor, per-axis, blocked; u8/i8/u16/i16, u4/i4/u2/i2,
// float8 and float4, i32 input for Dequantize), MatMulInteger, QLinearMatMul, QLinearConv: CPU
// reference. Integer products are exact (int64 accumulation); requantisation follows the ONNX
// reference: the multiplier is computed in the scales' float type, applied in double, rounded
// half to even, then saturated.
#include "core/narrow_dtype.h"
#include "ops/common/broadcast.h"
#include "ops/common/nn_util.h"
#include "ops/matmul/matmul_shapes.h"

#include <cmath>
#include <limits>

namespace gpuopt {

using nn::Window;

namespace {

bool is_quant_int(DType t) {
  return t == DType::U8 || t == DType::I8 || t == DType::U16 || t == DType::I16 || t == DType::U4 ||
         t == DType::I4 || t == DType::U2 || t == DType::I2;
}
// Quantized float types: x / scale is rounded to them (no rint, no zero point for float8).
bool is_quant_float(DType t) {
  return t == DType::F8E4M3FN || t == DType::F8E4M3FNUZ || t == DType::F8E5M2 || t == DType::F8E5M2FNUZ ||
         t == DType::F4E2M1;
}
bool is_quant_type(DType t) { return is_quant_int(t) || is_quant_float(t); }
constexpr const char* kQuantTypes = "u8, i8, u16, i16, u4, i4, u2, i2, f8e4m3fn, f8e4m3fnuz, f8e5m2, f8e5m2fnuz, f4e2m1";

std::vector<double> values_of(const Tensor& t) {
  if (!dtype_is_narrow(t.dtype())) return nn::to_doubles(t);
  std::vector<double> v(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) v[static_cast<size_t>(i)] = t.get_f64(i);
  return v;
}

// Rounds v to the precision of float dtype t (emulates arithmetic done in that type).
double round_to(DType t, double v) {
  switch (t) {
    case DType::F32:
      return static_cast<double>(static_cast<float>(v));
    case DType::F16:
      return to_f64(Half(static_cast<float>(v)));
    case DType::BF16:
      return to_f64(BFloat16(static_cast<float>(v)));
    default:
      return v;
  }
}

void int_range(DType t, double* lo, double* hi) {
  if (dtype_is_narrow(t)) {
    *lo = narrow_min(t);
    *hi = narrow_max(t);
    return;
  }
  dispatch_dtype(t, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
      *lo = static_cast<double>(std::numeric_limits<T>::lowest());
      *hi = static_cast<double>(std::numeric_limits<T>::max());
    } else {
      *lo = -INFINITY;
      *hi = INFINITY;
    }
  });
}

std::vector<int64_t> ints_of(const Tensor& t) {
  std::vector<int64_t> v(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) v[static_cast<size_t>(i)] = t.get_i64(i);
  return v;
}

// Where each element of x finds its scale/zero point: per tensor, per axis or per block.
struct QuantLayout {
  int mode = 0;  // 0 tensor, 1 axis, 2 block
  int64_t axis = 0, block = 0, D = 1, inner = 1, Ds = 1;
  int64_t index(int64_t i) const {
    if (mode == 0) return 0;
    const int64_t a = (i / inner) % D;
    if (mode == 1) return a;
    const int64_t outer = i / (D * inner), in = i % inner;
    return (outer * Ds + a / block) * inner + in;
  }
};

template <class Ctx>
Result<QuantLayout> quant_layout(const Ctx& ctx, const Shape& x, const Shape& scale, const Shape* zp, bool concrete) {
  QuantLayout q;
  // One value each is per tensor whatever the ranks ([] and [1]: the reference takes both).
  const bool single = zp && shape_is_concrete(*zp) && shape_is_concrete(scale) && shape_numel(*zp) == 1 &&
                      shape_numel(scale) == 1;
  if (zp && !single && *zp != scale && (concrete || (shape_is_concrete(*zp) && shape_is_concrete(scale))))
    return ctx.error("zero point shape {} differs from scale shape {}", shape_to_string(*zp), shape_to_string(scale));
  const int64_t numel = shape_numel(scale);
  q.block = ctx.node.attr_i("block_size", 0);
  if (scale.empty() || (scale.size() == 1 && numel == 1 && q.block == 0)) return q;
  q.axis = ctx.node.attr_i("axis", 1);
  if (!normalize_axis(&q.axis, static_cast<int64_t>(x.size())))
    return ctx.error("axis {} is out of range for input rank {}", ctx.node.attr_i("axis", 1), x.size());
  q.D = x[static_cast<size_t>(q.axis)];
  q.inner = nn::known_product(x, static_cast<size_t>(q.axis) + 1, x.size());
  if (q.block > 0) {
    if (scale.size() != x.size())
      return ctx.error("blocked quantization needs a scale of rank {}; got {}", x.size(), shape_to_string(scale));
    q.Ds = scale[static_cast<size_t>(q.axis)];
    for (size_t d = 0; d < x.size(); ++d) {
      const int64_t want =
          static_cast<int64_t>(d) == q.axis && dim_is_known(x[d]) ? (x[d] + q.block - 1) / q.block : x[d];
      if (dim_is_known(want) && dim_is_known(scale[d]) && scale[d] != want)
        return ctx.error("scale {} does not match input {} with block_size {} on axis {}", shape_to_string(scale),
                         shape_to_string(x), q.block, q.axis);
    }
    q.mode = 2;
    return q;
  }
  if (scale.size() != 1)
    return ctx.error("scale must be a scalar or 1-D (per axis) without block_size; got {}", shape_to_string(scale));
  if (dim_is_known(q.D) && dim_is_known(scale[0]) && scale[0] != q.D)
    return ctx.error("scale has {} values for axis {} of extent {}", scale[0], q.axis, q.D);
  q.mode = 1;
  return q;
}

// Quantize/DequantizeLinear at load time: the output has x's shape in `out`; the scale's (and
// zero point's) layout is checked against x where the ranks are known.
Status infer_quant_output(InferContext& ctx, DType out) {
  ctx.outputs[0].dtype = out;
  ctx.outputs[0].rank_known = ctx.in(0).rank_known;
  ctx.outputs[0].shape = ctx.in(0).shape;
  if (ctx.in(0).rank_known && ctx.in(1).rank_known) {
    const Shape* zp = ctx.has_input(2) && ctx.in(2).rank_known ? &ctx.in(2).shape : nullptr;
    GPUOPT_RETURN_IF_ERROR(quant_layout(ctx, ctx.in(0).shape, ctx.in(1).shape, zp, false).status());
  }
  return Status::Ok();
}

// Quantize/DequantizeLinear at run time: x, scale and zero point (0 when absent) as doubles, and
// where each element of x finds its scale.
struct QuantArgs {
  QuantLayout q;
  std::vector<double> x, scale, zero_point;
};

Result<QuantArgs> load_quant_args(const KernelContext& ctx) {
  const Tensor& sc = ctx.in(1);
  const Shape zps = ctx.has_input(2) ? ctx.in(2).shape() : Shape{};
  QuantArgs a;
  GPUOPT_ASSIGN_OR_RETURN(a.q, quant_layout(ctx, ctx.in(0).shape(), sc.shape(), ctx.has_input(2) ? &zps : nullptr, true));
  a.x = values_of(ctx.in(0));
  a.scale = nn::to_doubles(sc);
  a.zero_point = ctx.has_input(2) ? values_of(ctx.in(2)) : std::vector<double>(a.scale.size(), 0.0);
  return a;
}

}  // namespace

// ---- QuantizeLinear ---------------------------------------------------------------------------

Status infer_QuantizeLinear(InferContext& ctx) {
  GPUOPT_RETURN_IF_ERROR(nn::require_inputs(ctx, 2));
  const DType xt = ctx.in(0).dtype;
  if (xt != DType::Undefined && !nn::is_float_dtype(xt) && xt != DType::I32)
    return ctx.error("input dtype {} is not supported (float or i32)", dtype_name(xt));
  GPUOPT_RETURN_IF_ERROR(nn::require_float(ctx, 1, "y_scale"));
  DType out = DType::U8;
  if (ctx.has_input(2)) {
    out = ctx.in(2).dtype;
  } else if (const int64_t od = ctx.node.attr_i("output_dtype", 0); od != 0) {
    const std::optional<DType> d = dtype_from_onnx(static_cast<int>(od));
    if (!d) return ctx.error("output_dtype {} is not supported ({})", od, kQuantTypes);
    out = *d;
  }
  if (out != DType::Undefined && !is_quant_type(out))
    return Status::Unimplemented("{}: quantized dtype {} is not supported ({})", node_label(ctx.node),
                                 dtype_name(out), kQuantTypes);
  return infer_quant_output(ctx, out);
}

Status cpu_QuantizeLinear(KernelContext& ctx) {
  GPUOPT_ASSIGN_OR_RETURN(const QuantArgs a, load_quant_args(ctx));
  const auto& [q, xv, sv, zv] = a;
  const Tensor& x = ctx.in(0);
  const Tensor& sc = ctx.in(1);
  Tensor& y = ctx.out(0);
  // The division happens in the scale's float type (as in the ONNX reference), then rint.
  const DType calc = x.dtype() == DType::I32 ? DType::F32 : sc.dtype();
  if (is_quant_float(y.dtype())) {
    // Float8: x / scale rounded to nearest even, saturating unless saturate=0; the zero point
    // is zero by definition. Float4 adds it (in f32) and always saturates.
    const NarrowCast how{.saturate = ctx.node.attr_i("saturate", 1) != 0};
    uint8_t* yp = y.data<uint8_t>();
    for (size_t i = 0; i < xv.size(); ++i) {
      const int64_t p = q.index(static_cast<int64_t>(i));
      double v = round_to(calc, xv[i] / sv[p]);
      if (y.dtype() == DType::F4E2M1) v = round_to(DType::F32, v + zv[p]);
      yp[i] = narrow_from_f64(y.dtype(), v, how);
    }
    return Status::Ok();
  }
  double lo, hi;
  int_range(y.dtype(), &lo, &hi);
  std::vector<double> out(xv.size());
  for (size_t i = 0; i < xv.size(); ++i) {
    const int64_t p = q.index(static_cast<int64_t>(i));
    const double v = std::nearbyint(round_to(calc, xv[i] / sv[p])) + zv[p];
    out[i] = std::min(std::max(v, lo), hi);
  }
  if (dtype_is_narrow(y.dtype())) {
    for (size_t i = 0; i < out.size(); ++i) y.set_f64(static_cast<int64_t>(i), out[i]);
    return Status::Ok();
  }
  nn::from_doubles(y, out);
  return Status::Ok();
}

double flops_QuantizeLinear(const FlopsContext& ctx) {
  const double n = nn::est_numel(nn::flops_in(ctx, 0));
  return n < 0 ? 0 : 3 * n;
}

// ---- DequantizeLinear -------------------------------------------------------------------------

Status infer_DequantizeLinear(InferContext& ctx) {
  GPUOPT_RETURN_IF_ERROR(nn::require_inputs(ctx, 2));
  const DType xt = ctx.in(0).dtype;
  if (xt != DType::Undefined && !is_quant_type(xt) && xt != DType::I32)
    return Status::Unimplemented("{}: quantized dtype {} is not supported ({}, i32)", node_label(ctx.node),
                                 dtype_name(xt), kQuantTypes);
  GPUOPT_RETURN_IF_ERROR(nn::require_float(ctx, 1, "x_scale"));
  if (ctx.has_input(2)) GPUOPT_RETURN_IF_ERROR(nn::require_same_dtype(ctx, 0, 2));
  DType out = ctx.in(1).dtype;
  if (const int64_t od = ctx.node.attr_i("output_dtype", 0); od != 0) {
    const std::optional<DType> d = dtype_from_onnx(static_cast<int>(od));
    if (!d || !nn::is_float_dtype(*d)) return ctx.error("output_dtype {} is not a float type", od);
    out = *d;
  }
  return infer_quant_output(ctx, out);
}

Status cpu_DequantizeLinear(KernelContext& ctx) {
  GPUOPT_ASSIGN_OR_RETURN(const QuantArgs a, load_quant_args(ctx));
  const auto& [q, xv, sv, zv] = a;
  // Float8's zero point is zero by definition; the reference ignores float4's too.
  const bool use_zero_point = !is_quant_float(ctx.in(0).dtype());
  std::vector<double> out(xv.size());
  for (size_t i = 0; i < xv.size(); ++i) {
    const int64_t p = q.index(static_cast<int64_t>(i));
    out[i] = round_to(DType::F32, (xv[i] - (use_zero_point ? zv[p] : 0.0)) * sv[p]);  // computed in f32, then cast (reference)
  }
  nn::from_doubles(ctx.out(0), out);
  return Status::Ok();
}

double flops_DequantizeLinear(const FlopsContext& ctx) {
  const double n = nn::est_numel(nn::flops_in(ctx, 0));
  return n < 0 ? 0 : 2 * n;
}

// ---- MatMulInteger / QLinearMatMul ------------------------------------------------------------

namespace {

// The matmul shapes (ops/matmul/matmul_shapes.h) and the output shape they give.
struct IntMatMul : MatMulShapes {
  Shape out;
};

template <class Ctx>
Result<IntMatMul> int_matmul_shapes(const Ctx& ctx, Shape a, Shape b, bool concrete) {
  IntMatMul s;
  GPUOPT_ASSIGN_OR_RETURN(static_cast<MatMulShapes&>(s), matmul_shapes(ctx, std::move(a), std::move(b), concrete));
  s.out = matmul_out_shape(s);
  return s;
}

// sum_k (a[m,k] - azp[m]) * (b[k,n] - bzp[n]) per batch; zero points scalar or per row/column.
std::vector<int64_t> int_matmul(const IntMatMul& s, const Tensor& a, const Tensor& b, const Tensor* azp,
                                const Tensor* bzp) {
  const std::vector<int64_t> av = ints_of(a), bv = ints_of(b);
  const std::vector<int64_t> az = azp ? ints_of(*azp) : std::vector<int64_t>{0};
  const std::vector<int64_t> bz = bzp ? ints_of(*bzp) : std::vector<int64_t>{0};
  const std::vector<int64_t> oa = broadcast_offsets(s.batch_a, s.batch), ob = broadcast_offsets(s.batch_b, s.batch);
  std::vector<int64_t> c(static_cast<size_t>(shape_numel(s.batch) * s.M * s.N), 0);
  for (size_t bi = 0; bi < oa.size(); ++bi) {
    const int64_t* pa = av.data() + oa[bi] * s.M * s.K;
    const int64_t* pb = bv.data() + ob[bi] * s.K * s.N;
    int64_t* pc = c.data() + static_cast<int64_t>(bi) * s.M * s.N;
    for (int64_t m = 0; m < s.M; ++m) {
      const int64_t za = az.size() == 1 ? az[0] : az[static_cast<size_t>(m)];
      for (int64_t k = 0; k < s.K; ++k) {
        const int64_t x = pa[m * s.K + k] - za;
        for (int64_t n = 0; n < s.N; ++n) pc[m * s.N + n] += x * (pb[k * s.N + n] - (bz.size() == 1 ? bz[0] : bz[n]));
      }
    }
  }
  return c;
}

template <class Ctx>
Status check_zero_point(const Ctx& ctx, size_t i, int64_t allowed, const char* what) {
  if (!ctx.has_input(i)) return Status::Ok();
  const int64_t n = shape_numel(ctx.in(i).shape());
  if (n != 1 && n != allowed) return ctx.error("{} has {} values; expected 1 or {}", what, n, allowed);
  return Status::Ok();
}

bool is_8bit(DType t) {
  return t == DType::U8 || t == DType::I8;
}

}  // namespace

Status infer_MatMulInteger(InferContext& ctx) {
  GPUOPT_RETURN_IF_ERROR(nn::require_inputs(ctx, 2));
  for (size_t i = 0; i < 4; ++i)
    if (ctx.has_input(i) && ctx.in(i).dtype != DType::Undefined && !is_8bit(ctx.in(i).dtype))
      return ctx.error("input {} has dtype {}; expected u8 or i8", i, dtype_name(ctx.in(i).dtype));
  if (ctx.has_input(2)) GPUOPT_RETURN_IF_ERROR(nn::require_same_dtype(ctx, 0, 2));
  if (ctx.has_input(3)) GPUOPT_RETURN_IF_ERROR(nn::require_same_dtype(ctx, 1, 3));
  ctx.outputs[0].dtype = DType::I32;
  if (!ctx.in(0).rank_known || !ctx.in(1).rank_known) return Status::Ok();
  GPUOPT_ASSIGN_OR_RETURN(IntMatMul s, int_matmul_shapes(ctx, ctx.in(0).shape, ctx.in(1).shape, false));
  ctx.outputs[0].rank_known = true;
  ctx.outputs[0].shape = s.out;
  return Status::Ok();
}

Status cpu_MatMulInteger(KernelContext& ctx) {
  GPUOPT_ASSIGN_OR_RETURN(IntMatMul s, int_matmul_shapes(ctx, ctx.in(0).shape(), ctx.in(1).shape(), true));
  GPUOPT_RETURN_IF_ERROR(check_zero_point(ctx, 2, s.M, "a_zero_point"));
  GPUOPT_RETURN_IF_ERROR(check_zero_point(ctx, 3, s.N, "b_zero_point"));
  const std::vector<int64_t> c = int_matmul(s, ctx.in(0), ctx.in(1), ctx.has_input(2) ? &ctx.in(2) : nullptr,
                                            ctx.has_input(3) ? &ctx.in(3) : nullptr);
  int32_t* y = ctx.out(0).data<int32_t>();
  for (size_t i = 0; i < c.size(); ++i) y[i] = static_cast<int32_t>(c[i]);
  return Status::Ok();
}

double flops_MatMulInteger(const FlopsContext& ctx) {
  const double out = nn::est_numel(nn::flops_out(ctx, 0));
  return out < 0 ? 0 : 2 * out * nn::est_dim(nn::flops_in(ctx, 0), -1);
}

// Inputs: a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale, y_zero_point.
Status infer_QLinearMatMul(InferContext& ctx) {
  GPUOPT_RETURN_IF_ERROR(nn::require_inputs(ctx, 8));
  for (size_t i : {0, 2, 3, 5, 7})
    if (ctx.in(i).dtype != DType::Undefined && !is_8bit(ctx.in(i).dtype))
      return ctx.error("input {} has dtype {}; expected u8 or i8", i, dtype_name(ctx.in(i).dtype));
  for (size_t i : {1, 4, 6}) GPUOPT_RETURN_IF_ERROR(nn::require_float(ctx, i, "scale"));
  GPUOPT_RETURN_IF_ERROR(nn::require_same_dtype(ctx, 0, 2));
  GPUOPT_RETURN_IF_ERROR(nn::require_same_dtype(ctx, 3, 5));
  ctx.outputs[0].dtype = ctx.in(7).dtype;
  if (!ctx.in(0).rank_known || !ctx.in(3).rank_known) return Status::Ok();
  GPUOPT_ASSIGN_OR_RETURN(IntMatMul s, int_matmul_shapes(ctx, ctx.in(0).shape, ctx.in(3).shape, false));
  ctx.outputs[0].rank_known = true;
  ctx.outputs[0].shape = s.out;
  return Status::Ok();
}

Status cpu_QLinearMatMul(KernelContext& ctx) {
  GPUOPT_ASSIGN_OR_RETURN(IntMatMul s, int_matmul_shapes(ctx, ctx.in(0).shape(), ctx.in(3).shape(), true));
  GPUOPT_RETURN_IF_ERROR(check_zero_point(ctx, 2, s.M, "a_zero_point"));
  GPUOPT_RETURN_IF_ERROR(check_zero_point(ctx, 5, s.N, "b_zero_point"));
  // a_scale may be per row (M values), b_scale per column (N values); y's are single values.
  GPUOPT_RETURN_IF_ERROR(check_zero_point(ctx, 1, s.M, "a_scale"));
  GPUOPT_RETURN_IF_ERROR(check_zero_point(ctx, 4, s.N, "b_scale"));
  for (size_t i : {6, 7})
    if (ctx.in(i).numel() != 1) return ctx.error("input {} must be a single value (per-tensor y quantization)", i);
  const std::vector<int64_t> c = int_matmul(s, ctx.in(0), ctx.in(3), &ctx.in(2), &ctx.in(5));
  // Multiplier in the scales' float type: (a_scale * b_scale) / y_scale, as the reference does.
  const DType st = ctx.in(1).dtype();
  const std::vector<double> as = nn::to_doubles(ctx.in(1)), bs = nn::to_doubles(ctx.in(4));
  const double ys = ctx.in(6).get_f64(0), zp = ctx.in(7).get_f64(0);
  double lo, hi;
  int_range(ctx.out(0).dtype(), &lo, &hi);
  std::vector<double> y(c.size());
  for (size_t i = 0; i < c.size(); ++i) {
    const int64_t n = static_cast<int64_t>(i) % s.N, m = (static_cast<int64_t>(i) / s.N) % s.M;
    const double mult = round_to(st, round_to(st, as[as.size() == 1 ? 0 : m] * bs[bs.size() == 1 ? 0 : n]) / ys);
    y[i] = std::min(std::max(std::nearbyint(static_cast<double>(c[i]) * mult + zp), lo), hi);
  }
  nn::from_doubles(ctx.out(0), y);
  return Status::Ok();
}

double flops_QLinearMatMul(const FlopsContext& ctx) {
  const double out = nn::est_numel(nn::flops_out(ctx, 0));
  return out < 0 ? 0 : 2 * out * nn::est_dim(nn::flops_in(ctx, 0), -1);
}

// ---- QLinearConv ------------------------------------------------------------------------------
// Inputs: x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale, y_zero_point, B (i32).

Status infer_QLinearConv(InferContext& ctx) {
  GPUOPT_RETURN_IF_ERROR(nn::require_inputs(ctx, 8));
  for (size_t i : {0, 2, 3, 5, 7})
    if (ctx.in(i).dtype != DType::Undefined && !is_8bit(ctx.in(i).dtype))
      return ctx.error("input {} has dtype {}; expected u8 or i8", i, dtype_name(ctx.in(i).dtype));
  for (size_t i : {1, 4, 6}) GPUOPT_RETURN_IF_ERROR(nn::require_float(ctx, i, "scale"));
  if (ctx.has_input(8) && ctx.in(8).dtype != DType::Undefined && ctx.in(8).dtype != DType::I32)
    return ctx.error("bias has dtype {}; expected i32", dtype_name(ctx.in(8).dtype));
  const ValueInfo& x = ctx.in(0);
  const ValueInfo& w = ctx.in(3);
  ValueInfo& y = ctx.outputs[0];
  y.dtype = ctx.in(7).dtype;
  return nn::infer_integer_conv_shape(ctx, x, w, &y);
}

Status cpu_QLinearConv(KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  const Tensor& wt = ctx.in(3);
  GPUOPT_ASSIGN_OR_RETURN(Window win, nn::conv_window(ctx, x.shape(), wt.shape()));
  const int64_t N = x.dim(0), C = x.dim(1), M = wt.dim(0), G = ctx.node.attr_i("group", 1), Cg = C / G, Mg = M / G;
  const int64_t K = win.kernel_size(), O = win.out_size(), I = win.in_size();
  if (ctx.in(1).numel() != 1 || ctx.in(2).numel() != 1 || ctx.in(6).numel() != 1 || ctx.in(7).numel() != 1)
    return ctx.error("x and y scales/zero points must be single values");
  const int64_t nws = ctx.in(4).numel(), nwz = ctx.in(5).numel();
  if ((nws != 1 && nws != M) || (nwz != 1 && nwz != M))
    return ctx.error("w_scale/w_zero_point have {}/{} values; expected 1 or {} (output channels)", nws, nwz, M);
  if (ctx.has_input(8) && ctx.in(8).numel() != M)
    return ctx.error("bias has {} values for {} output channels", ctx.in(8).numel(), M);
  const std::vector<int64_t> xv = ints_of(x), wv = ints_of(wt), wz = ints_of(ctx.in(5));
  const std::vector<int64_t> bias = ctx.has_input(8) ? ints_of(ctx.in(8)) : std::vector<int64_t>(M, 0);
  const int64_t xz = ctx.in(2).get_i64(0);
  const std::vector<int64_t> table = nn::window_gather_table(win);
  const DType st = ctx.in(1).dtype();
  const double xs = ctx.in(1).get_f64(0), ys = ctx.in(6).get_f64(0), yz = ctx.in(7).get_f64(0);
  double lo, hi;
  int_range(ctx.out(0).dtype(), &lo, &hi);
  std::vector<double> y(static_cast<size_t>(N * M * O));
  std::vector<int64_t> acc(static_cast<size_t>(O));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t m = 0; m < M; ++m) {
      const int64_t g = m / Mg, wzero = wz.size() == 1 ? wz[0] : wz[m];
      std::fill(acc.begin(), acc.end(), bias[m]);
      for (int64_t c = 0; c < Cg; ++c) {
        const int64_t* xin = xv.data() + (n * C + g * Cg + c) * I;
        const int64_t* wk = wv.data() + (m * Cg + c) * K;
        for (int64_t t = 0; t < K; ++t) {
          const int64_t wq = wk[t] - wzero;
          const int64_t* tab = table.data() + t * O;
          // padding holds the zero point, so padded taps contribute (xz - xz) * w = 0
          for (int64_t o = 0; o < O; ++o)
            if (tab[o] >= 0) acc[o] += (xin[tab[o]] - xz) * wq;
        }
      }
      const double mult = round_to(st, round_to(st, xs * ctx.in(4).get_f64(nws == 1 ? 0 : m)) / ys);
      for (int64_t o = 0; o < O; ++o)
        y[(n * M + m) * O + o] = std::min(std::max(std::nearbyint(static_cast<double>(acc[o]) * mult + yz), lo), hi);
    }
  nn::from_doubles(ctx.out(0), y);
  return Status::Ok();
}

double flops_QLinearConv(const FlopsContext& ctx) {
  return nn::conv_flops(nn::est_numel(nn::flops_out(ctx, 0)), nn::flops_in(ctx, 3));
}

}  // namespace gpuopt
