// Creation and small elementwise ops on the GPU: Range, ConstantOfShape, Cosh, CastLike
// (kernels in kernels/index.cu and the generic cast of elementwise.h).
#include "backends/cuda/cuda_ops.h"
#include "ops/index/cuda/index_ops.h"
#include "core/cuda_check.h"

#include <cuda_runtime.h>

namespace gpuopt::cuda {
namespace {

// Range: start/limit/delta are host scalars; the output length is already inferred.
Status run_range(CudaKernelContext& k) {
  Tensor& out = k.out(0);
  const Tensor &start = *k.host[0], &delta = *k.host[2];
  if (start.numel() != 1 || delta.numel() != 1) return k.error("start and delta must be scalars");
  return launch_range(out.dtype(), start.get_f64(0), delta.get_f64(0), start.get_i64(0), delta.get_i64(0), out.raw(),
                      out.numel(), k.ctx.stream);
}
bool range_supported(const Node&, const std::vector<DType>& in) {
  if (in.size() != 3 || in[1] != in[0] || in[2] != in[0]) return false;
  switch (in[0]) {
    case DType::F32: case DType::F16: case DType::BF16: case DType::F64: case DType::I32: case DType::I64: return true;
    default: return false;
  }
}

// ConstantOfShape: the `value` attribute's bytes repeated (zeros, as f32, without it).
Status run_constant_of_shape(CudaKernelContext& k) {
  Tensor& out = k.out(0);
  if (out.nbytes() == 0) return Status::Ok();
  const Attribute* a = k.node.attr("value");
  if (!a) {
    GPUOPT_CHECK_CALL(cudaMemsetAsync(out.raw(), 0, out.nbytes(), k.ctx.stream));
    return Status::Ok();
  }
  if (a->t.numel() < 1 || a->t.dtype() != out.dtype()) return k.error("attribute 'value' must hold one {}", dtype_name(out.dtype()));
  return launch_fill(dtype_size(out.dtype()), a->t.raw(), out.raw(), out.numel(), k.ctx.stream);
}
bool constant_of_shape_supported(const Node& n, const std::vector<DType>&) {
  const Attribute* a = n.attr("value");
  if (!a) return true;
  if (a->kind != Attribute::Kind::kTensor || a->t.dtype() == DType::String || a->t.numel() < 1) return false;
  const size_t es = dtype_size(a->t.dtype());
  return es == 1 || es == 2 || es == 4 || es == 8;
}

Status run_cosh(CudaKernelContext& k) {
  return launch_cosh(k.in(0).dtype(), k.in(0).raw(), k.out(0).raw(), k.in(0).numel(), k.ctx.stream);
}
bool float_input(const Node&, const std::vector<DType>& in) {
  return !in.empty() && (in[0] == DType::F32 || in[0] == DType::F16 || in[0] == DType::BF16);
}

// CastLike: Cast to the second input's dtype (the same device conversion as Cast).
Status run_cast_like(CudaKernelContext& k) {
  const Tensor& x = k.in(0);
  if (x.dtype() == k.out(0).dtype())
    return launch_unary(UnaryOp::kIdentity, x.dtype(), x.raw(), k.out(0).raw(), x.numel(), {}, k.ctx.stream);
  return launch_cast(x.dtype(), k.out(0).dtype(), x.raw(), k.out(0).raw(), x.numel(), k.ctx.stream);
}
bool cast_like_supported(const Node& n, const std::vector<DType>& in) {
  return in.size() == 2 && !n.has_attr("saturate") && float_or_int_types(n, in) && in[0] != DType::F64 &&
         in[1] != DType::F64 && in[0] != DType::Undefined && in[1] != DType::Undefined;
}

}  // namespace

GPUOPT_CUDA_OP(Range, &run_range, &range_supported, host_inputs_mask({0, 1, 2}));
GPUOPT_CUDA_OP(ConstantOfShape, &run_constant_of_shape, &constant_of_shape_supported, host_inputs_mask({0}));
GPUOPT_CUDA_OP(Cosh, &run_cosh, &float_input);
GPUOPT_CUDA_OP(CastLike, &run_cast_like, &cast_like_supported);

}  // namespace gpuopt::cuda
