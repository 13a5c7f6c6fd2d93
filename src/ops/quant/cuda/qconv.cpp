// QLinearConv on the GPU (kernels/qconv.cu). The window (pads, auto_pad, strides, dilations) is
// resolved by the CPU reference's own helper, so both backends see the same geometry.
#include "ops/common/nn_util.h"
#include "backends/cuda/cuda_ops.h"
#include "ops/quant/cuda/qconv_plan.h"

namespace gpuopt::cuda {
namespace {

// What nn::resolve_window needs from its context.
struct PlanCtx {
  const Node& node;
  template <typename... Args>
  Status error(fmt::format_string<Args...> f, Args&&... args) const {
    return Status::InvalidArgument("{}: {}", node_label(node), fmt::format(f, std::forward<Args>(args)...));
  }
};

bool is_q8(DType t) { return t == DType::U8 || t == DType::I8; }

}  // namespace

Result<QConvDesc> make_qconv_desc(const Node& node, const QConvInputs& q) {
  PlanCtx ctx{node};
  const Shape &xs = q.x_shape, &ws = q.w_shape;
  if (xs.size() < 3 || xs.size() > 2 + kQConvMaxSpatial || ws.size() != xs.size())
    return ctx.error("input {} and weight {}: 1 to {} spatial dims on CUDA", shape_to_string(xs), shape_to_string(ws),
                     kQConvMaxSpatial);
  const size_t nd = xs.size() - 2;
  GPUOPT_ASSIGN_OR_RETURN(nn::Window win, nn::conv_window(ctx, xs, ws));
  QConvDesc d;
  d.nd = static_cast<int>(nd);
  d.N = xs[0];
  d.C = xs[1];
  d.M = ws[0];
  d.G = node.attr_i("group", 1);
  if (d.G < 1 || d.C % d.G != 0 || d.M % d.G != 0 || ws[1] * d.G != d.C)
    return ctx.error("weight {} does not fit input {} with group {}", shape_to_string(ws), shape_to_string(xs), d.G);
  d.numel = d.N * d.M;
  for (size_t i = 0; i < nd; ++i) {
    d.in[i] = win.in[i];
    d.out[i] = win.out[i];
    d.kernel[i] = win.kernel[i];
    if (d.kernel[i] != ws[2 + i]) return ctx.error("kernel_shape does not match the weight {}", shape_to_string(ws));
    d.stride[i] = win.strides[i];
    d.dilation[i] = win.dilations[i];
    d.pad_begin[i] = win.pad_begin[i];
    d.numel *= d.out[i];
  }
  if ((q.w_zp_count != 1 && q.w_zp_count != d.M) || (q.w_scale_count != 1 && q.w_scale_count != d.M))
    return ctx.error("w_scale/w_zero_point have {}/{} values; expected 1 or {}", q.w_scale_count, q.w_zp_count, d.M);
  if (q.bias_count != 0 && q.bias_count != d.M) return ctx.error("bias has {} values for {} channels", q.bias_count, d.M);
  d.w_zp_count = q.w_zp_count;
  d.w_scale_count = q.w_scale_count;
  d.x_signed = q.x_dt == DType::I8;
  d.w_signed = q.w_dt == DType::I8;
  d.y_signed = q.y_dt == DType::I8;
  d.x_zp = q.x_zp;
  d.x_scale = q.x_scale;
  d.y_scale = q.y_scale;
  d.y_zp = q.y_zp;
  d.scale_t = QFloat::kF32;
  return d;
}

namespace {

// Inputs: x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale, y_zero_point, B; the
// single-value ones (1, 2, 6, 7) on the host.
Status run_qlinear_conv(CudaKernelContext& k) {
  for (size_t i : {1, 2, 6, 7})
    if (!k.host[i] || k.host[i]->numel() != 1) return k.error("input {} must be a single value", i);
  QConvInputs q;
  q.x_shape = k.in(0).shape();
  q.w_shape = k.in(3).shape();
  q.x_dt = k.in(0).dtype();
  q.w_dt = k.in(3).dtype();
  q.y_dt = k.out(0).dtype();
  q.x_scale = k.host[1]->get_f64(0);
  q.x_zp = k.host[2]->get_i64(0);
  q.w_scale_count = k.in(4).numel();
  q.w_zp_count = k.in(5).numel();
  q.y_scale = k.host[6]->get_f64(0);
  q.y_zp = k.host[7]->get_f64(0);
  const bool bias = k.inputs.size() > 8 && k.inputs[8];
  q.bias_count = bias ? k.in(8).numel() : 0;
  GPUOPT_ASSIGN_OR_RETURN(QConvDesc d, make_qconv_desc(k.node, q));
  return launch_qlinear_conv(d, k.in(0).raw(), k.in(3).raw(), k.in(5).raw(), static_cast<const float*>(k.in(4).raw()),
                             bias ? static_cast<const int32_t*>(k.in(8).raw()) : nullptr, k.out(0).raw(), k.ctx.stream);
}

// u8/i8 data with zero points of the same type, f32 scales, i32 bias.
bool qlinear_conv_supported(const Node&, const std::vector<DType>& in) {
  if (in.size() < 8 || in.size() > 9) return false;
  if (!is_q8(in[0]) || in[2] != in[0] || !is_q8(in[3]) || in[5] != in[3] || !is_q8(in[7])) return false;
  for (size_t i : {1, 4, 6})
    if (in[i] != DType::F32) return false;
  return in.size() < 9 || in[8] == DType::Undefined || in[8] == DType::I32;
}

}  // namespace

GPUOPT_CUDA_OP(QLinearConv, &run_qlinear_conv, &qlinear_conv_supported, host_inputs_mask({1, 2, 6, 7}));

}  // namespace gpuopt::cuda
