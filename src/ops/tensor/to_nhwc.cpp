// ToNhwc (domain ai.gpuopt), written by the nhwc_entry pass at the edge of a channels-last region:
//
//   X [N, C, H, W] (f32, f16 or bf16), optional y_scale (one value, of Y's type) and y_zero_point
//   (one int8 or uint8 value)  ->  Y [N, H, W, channels]
//   attr to        ONNX data type of Y (f32, f16 or bf16; default X's): the Cast it replaces
//   attr channels  Y's channel count, >= C (default C); channels C.. are zero
//
// Y[n, h, w, c] = X[n, c, h, w] converted to Y's type (round to nearest even), 0 for c >= C: the
// input's Cast, the region's entry Transpose and, for an RGB stem conv, cuDNN's channel padding
// (C=3 -> 4, with zero weights for the fourth channel) in one pass (docs/cuda.md, "channels-last").
// With y_scale, each converted value v goes through the quantize round trip a QDQ model writes on
// its input: DequantizeLinear(QuantizeLinear(v, y_scale, y_zero_point), y_scale, y_zero_point),
// with ONNX's arithmetic (v / y_scale rounded to y_scale's type, half to even, saturated;
// (q - zp) * y_scale in f32, rounded to Y's type); zero channels stay 0.
#include "ops/common/nhwc_perm.h"
#include "ops/common/nn_util.h"
#include "ops/quant/quant_round.h"
#include "ops/tensor/to_nhwc.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace gpuopt {

Result<DType> to_nhwc_out_dtype(const Node& node, DType in) {
  if (!node.has_attr("to")) return in;
  const int64_t id = node.attr_i("to", 0);
  const std::optional<DType> to = dtype_from_onnx(static_cast<int>(id));
  if (!to || (*to != DType::F32 && *to != DType::F16 && *to != DType::BF16))
    return Status::InvalidArgument("{}: 'to' is ONNX data type {}; expected float, float16 or bfloat16", node_label(node), id);
  return *to;
}

Status infer_ToNhwc(InferContext& ctx) {
  GPUOPT_RETURN_IF_ERROR(nn::require_inputs(ctx, 1));
  if (ctx.num_inputs() > 3 || ctx.outputs.size() != 1) return ctx.error("takes 1 to 3 inputs and one output");
  const ValueInfo& x = ctx.in(0);
  if (x.dtype != DType::Undefined && x.dtype != DType::F32 && x.dtype != DType::F16 && x.dtype != DType::BF16)
    return ctx.error("X has dtype {}; expected f32, f16 or bf16", dtype_name(x.dtype));
  ValueInfo& y = ctx.outputs[0];
  GPUOPT_ASSIGN_OR_RETURN(y.dtype, to_nhwc_out_dtype(ctx.node, x.dtype));
  if (ctx.has_input(2) && !ctx.has_input(1)) return ctx.error("y_zero_point without y_scale");
  if (ctx.has_input(1) && ctx.in(1).dtype != DType::Undefined && y.dtype != DType::Undefined && ctx.in(1).dtype != y.dtype)
    return ctx.error("y_scale has dtype {}; expected Y's {}", dtype_name(ctx.in(1).dtype), dtype_name(y.dtype));
  if (ctx.has_input(2) && ctx.in(2).dtype != DType::Undefined && ctx.in(2).dtype != DType::I8 && ctx.in(2).dtype != DType::U8)
    return ctx.error("y_zero_point has dtype {}; expected i8 or u8", dtype_name(ctx.in(2).dtype));
  if (!x.rank_known) return Status::Ok();
  if (x.shape.size() != 4) return ctx.error("X has rank {}; expected 4 ([N, C, H, W])", x.shape.size());
  y.rank_known = true;
  y.shape = nhwc::permute(x.shape, nhwc::kToNhwc);
  if (ctx.node.has_attr("channels")) {
    const int64_t c = ctx.node.attr_i("channels", 0);
    if (c <= 0 || (dim_is_known(x.shape[1]) && c < x.shape[1]))
      return ctx.error("channels {} is below X's {} channels", c, x.shape[1]);
    y.shape[3] = c;
  }
  return Status::Ok();
}

Status cpu_ToNhwc(KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  Tensor& y = ctx.out(0);
  if (x.rank() != 4 || y.rank() != 4) return ctx.error("X {} and Y {} must be 4-D", x.describe(), y.describe());
  const int64_t n = x.dim(0), c = x.dim(1), h = x.dim(2), w = x.dim(3), cp = y.dim(3);
  if (y.dim(0) != n || y.dim(1) != h || y.dim(2) != w || cp < c)
    return ctx.error("Y {} does not hold X {} channels-last", y.describe(), x.describe());
  const Tensor xc = x.dtype() == y.dtype() ? x : x.cast(y.dtype());
  const size_t es = dtype_size(y.dtype());
  const char* src = static_cast<const char*>(xc.raw());
  char* dst = static_cast<char*>(y.raw());
  std::memset(dst, 0, y.nbytes());
  for (int64_t b = 0; b < n; ++b)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t p = 0; p < h * w; ++p)
        std::memcpy(dst + static_cast<size_t>((b * h * w + p) * cp + ch) * es,
                    src + static_cast<size_t>((b * c + ch) * h * w + p) * es, es);
  if (!ctx.has_input(1)) return Status::Ok();
  // The quantize round trip on the converted values (QuantizeLinear's and DequantizeLinear's
  // reference arithmetic).
  const Tensor& s = ctx.in(1);
  if (s.numel() != 1 || s.dtype() != y.dtype()) return ctx.error("y_scale {} must be one value of Y's type", s.describe());
  const double scale = s.get_f64(0);
  double zp = 0, lo = 0, hi = 255;  // no zero point: uint8, as QuantizeLinear
  if (ctx.has_input(2)) {
    const Tensor& z = ctx.in(2);
    if (z.numel() != 1 || (z.dtype() != DType::I8 && z.dtype() != DType::U8))
      return ctx.error("y_zero_point {} must be one int8 or uint8 value", z.describe());
    zp = z.get_f64(0);
    if (z.dtype() == DType::I8) lo = -128, hi = 127;
  }
  for (int64_t b = 0; b < n; ++b)
    for (int64_t p = 0; p < h * w; ++p)
      for (int64_t ch = 0; ch < c; ++ch) {
        const int64_t i = (b * h * w + p) * cp + ch;
        const double r = std::nearbyint(quant::round_to_float_type(s.dtype(), y.get_f64(i) / scale)) + zp;
        const double q = std::min(std::max(r, lo), hi);
        y.set_f64(i, static_cast<float>((q - zp) * scale));
      }
  return Status::Ok();
}

double flops_ToNhwc(const FlopsContext&) { return 0.0; }

}  // namespace gpuopt
