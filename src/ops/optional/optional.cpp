// OptionalHasElement and OptionalGetElement for the values gpuopt has: tensors. gpuopt has no
// optional (or sequence) values, so an optional input is either a tensor, which "has an element",
// or absent (no input, or the empty name), which does not. Models whose graph inputs or outputs
// are optional- or sequence-typed are rejected at load time before these ops run.
#include "ops/common/tensor_util.h"

namespace gpuopt {
using namespace tensor_util;

Status infer_OptionalHasElement(InferContext& ctx) {
  if (ctx.num_inputs() > 1) return ctx.error("takes at most one input, got {}", ctx.num_inputs());
  set_output(ctx, 0, DType::Bool, {});
  return Status::Ok();
}
// true for a present (tensor) input, false for an absent one.
Status cpu_OptionalHasElement(KernelContext& ctx) {
  ctx.out(0).data<bool>()[0] = ctx.has_input(0);
  return Status::Ok();
}
double flops_OptionalHasElement(const FlopsContext&) { return 0.0; }

Status infer_OptionalGetElement(InferContext& ctx) {
  if (ctx.num_inputs() > 1) return ctx.error("takes one input, got {}", ctx.num_inputs());
  if (!ctx.has_input(0)) return ctx.error("the optional input is empty (absent); there is no element to get");
  ctx.outputs[0] = ctx.in(0);
  ctx.outputs[0].value = nullptr;
  return Status::Ok();
}
// A tensor is its own element (opset 18 accepts plain tensors): a copy.
Status cpu_OptionalGetElement(KernelContext& ctx) {
  copy_all(ctx.in(0), ctx.out(0));
  return Status::Ok();
}
double flops_OptionalGetElement(const FlopsContext&) { return 0.0; }

}  // namespace gpuopt
