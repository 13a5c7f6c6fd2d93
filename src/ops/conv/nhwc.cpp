// gpuopt's channels-last ops (domain ai.gpuopt), written by the layout_nhwc pass for the CUDA
// backend: NhwcFusedConv is FusedConv with X, Z and Y in [N, H, W, C] and W in [M, kH, kW, C/group];
// NhwcMaxPool is MaxPool (Y only) with X and Y in [N, H, W, C]. The reference transposes the
// 4-D inputs to NCHW, runs the NCHW kernel and transposes the result back: the oracle is the
// NCHW op itself, so the two layouts cannot drift apart. Shape inference does the same with shapes.
// NhwcFusedConv's `input_activation` (ops/conv/conv_activation.h) is applied to X first, rounded to
// X's dtype as the unfused graph's producer stored it, then the conv runs as above.
#include "ops/common/nn_util.h"
#include "ops/conv/conv_activation.h"
#include "ops/common/nhwc_perm.h"
#include "ops/common/tensor_util.h"

namespace gpuopt {
namespace {

using nhwc::kToNchw;
using nhwc::kToNhwc;
using nhwc::permute;

// Inputs 0 (X), 1 (W) and 3 (Z) of NhwcFusedConv, input 0 of NhwcMaxPool are channels-last;
// B stays [M].
bool is_nhwc_input(size_t i) {
  return i != 2;
}

Status infer_via_nchw(InferContext& ctx, InferFn nchw_infer, size_t max_outputs) {
  if (ctx.outputs.size() > max_outputs) return ctx.error("has {} outputs; at most {}", ctx.outputs.size(), max_outputs);
  std::vector<ValueInfo> infos(ctx.num_inputs());
  std::vector<const ValueInfo*> ptrs(ctx.num_inputs(), nullptr);
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    if (!ctx.has_input(i)) continue;
    infos[i] = ctx.in(i);
    infos[i].value = nullptr;  // the values are channels-last; the NCHW inference needs shapes only
    if (is_nhwc_input(i) && infos[i].rank_known) {
      if (infos[i].shape.size() != 4)
        return ctx.error("input {} has rank {}; channels-last inputs are 4-D", i, infos[i].shape.size());
      infos[i].shape = permute(infos[i].shape, kToNchw);
    }
    ptrs[i] = &infos[i];
  }
  InferContext nchw{ctx.node, ptrs, std::vector<ValueInfo>(ctx.outputs.size())};
  GPUOPT_RETURN_IF_ERROR(nchw_infer(nchw));
  for (size_t o = 0; o < ctx.outputs.size(); ++o) {
    ctx.outputs[o] = nchw.outputs[o];
    if (ctx.outputs[o].rank_known && ctx.outputs[o].shape.size() == 4)
      ctx.outputs[o].shape = permute(ctx.outputs[o].shape, kToNhwc);
  }
  return Status::Ok();
}

Status cpu_via_nchw(KernelContext& ctx, CpuKernelFn nchw_kernel) {
  std::vector<Tensor> held(ctx.num_inputs());
  std::vector<const Tensor*> ins(ctx.num_inputs(), nullptr);
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    if (!ctx.has_input(i)) continue;
    const Tensor& t = ctx.in(i);
    if (!is_nhwc_input(i) || t.rank() != 4) {
      ins[i] = &t;
      continue;
    }
    held[i] = Tensor::empty(t.dtype(), permute(t.shape(), kToNchw));
    tensor_util::transpose_view(t, t.shape(), kToNchw, held[i]);
    ins[i] = &held[i];
  }
  Tensor& y = ctx.out(0);
  Tensor y_nchw = Tensor::empty(y.dtype(), permute(y.shape(), kToNchw));
  KernelContext nchw{ctx.node, ins, {&y_nchw}};
  GPUOPT_RETURN_IF_ERROR(nchw_kernel(nchw));
  tensor_util::transpose_view(y_nchw, y_nchw.shape(), kToNhwc, y);
  return Status::Ok();
}

// NhwcFusedConv's prologue activation: absent or "" = none; anything else than the CUDA
// epilogue's names is refused by name.
template <class Ctx>
Result<ConvAct> input_activation(const Ctx& ctx) {
  const std::string name = ctx.node.attr_s(kConvInputActivation, "");
  const std::optional<ConvAct> a = conv_act_from_name(name);
  if (!a) return ctx.error("{} '{}' is not one of Relu, HardSwish, Swish or \"\"", kConvInputActivation, name);
  return *a;
}

}  // namespace

// NhwcFusedConv's optional second output (the se_mean pass writes it for squeeze-excitation):
// Y's mean over H and W per image and channel, [N, 1, 1, M] (ReduceMean over axes 1, 2 with
// keepdims), computed from Y as stored.
Status infer_NhwcFusedConv(InferContext& ctx) {
  if (ctx.outputs.size() > 2) return ctx.error("has {} outputs; at most 2 (Y, and its spatial mean)", ctx.outputs.size());
  GPUOPT_RETURN_IF_ERROR(input_activation(ctx).status());
  InferContext conv{ctx.node, ctx.inputs, std::vector<ValueInfo>(1)};
  GPUOPT_RETURN_IF_ERROR(infer_via_nchw(conv, &infer_FusedConv, 1));
  ctx.outputs[0] = conv.outputs[0];
  if (ctx.outputs.size() < 2) return Status::Ok();
  const ValueInfo& y = ctx.outputs[0];
  ValueInfo& mean = ctx.outputs[1];
  mean.dtype = y.dtype;
  mean.rank_known = y.rank_known;
  if (y.rank_known) mean.shape = {y.shape[0], 1, 1, y.shape[3]};
  return Status::Ok();
}
Status cpu_NhwcFusedConv(KernelContext& ctx) {
  GPUOPT_ASSIGN_OR_RETURN(const ConvAct in_act, input_activation(ctx));
  std::vector<const Tensor*> ins = ctx.inputs;
  Tensor x_act;
  if (in_act != ConvAct::kNone && !ins.empty() && ins[0]) {
    std::vector<double> xv = nn::to_doubles(*ins[0]);
    for (double& v : xv) v = conv_act_apply(in_act, v);
    x_act = Tensor::empty(ins[0]->dtype(), ins[0]->shape());
    nn::from_doubles(x_act, xv.data());
    ins[0] = &x_act;
  }
  KernelContext conv{ctx.node, ins, {ctx.outputs[0]}};
  GPUOPT_RETURN_IF_ERROR(cpu_via_nchw(conv, &cpu_FusedConv));
  if (ctx.outputs.size() < 2 || !ctx.outputs[1]) return Status::Ok();
  const Tensor& y = ctx.out(0);
  const int64_t n = y.shape()[0], hw = y.shape()[1] * y.shape()[2], c = y.shape()[3];
  if (hw == 0) return ctx.error("the spatial mean of an empty output {}", shape_to_string(y.shape()));
  const std::vector<double> yv = nn::to_doubles(y);
  std::vector<double> mean(static_cast<size_t>(n * c), 0.0);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t p = 0; p < hw; ++p)
      for (int64_t ch = 0; ch < c; ++ch) mean[static_cast<size_t>(i * c + ch)] += yv[static_cast<size_t>((i * hw + p) * c + ch)];
  for (double& m : mean) m /= static_cast<double>(hw);
  nn::from_doubles(ctx.out(1), mean.data());
  return Status::Ok();
}
// FusedConv's count reads only output element counts and W's trailing dims (C/group x kernel
// taps in either layout).
double flops_NhwcFusedConv(const FlopsContext& ctx) {
  return flops_FusedConv(ctx);
}

// The Indices output is not offered: the layout pass converts only MaxPools without it.
Status infer_NhwcMaxPool(InferContext& ctx) {
  return infer_via_nchw(ctx, &infer_MaxPool, 1);
}
Status cpu_NhwcMaxPool(KernelContext& ctx) {
  return cpu_via_nchw(ctx, &cpu_MaxPool);
}
double flops_NhwcMaxPool(const FlopsContext& ctx) {
  return flops_MaxPool(ctx);
}

}  // namespace gpuopt
