// QuantizeLinear / DequantizeLinear on the GPU (kernels/quant.cu): per tensor and per axis, 8-bit.
// Blocked quantization (block_size), 16-bit types, i32 input to QuantizeLinear stay on the CPU.
#include "backends/cuda/cuda_ops.h"
#include "ops/quant/cuda/quant.h"

namespace gpuopt::cuda {
namespace {

bool is_float(DType t) { return t == DType::F32 || t == DType::F16 || t == DType::BF16; }
bool is_q8(DType t) { return t == DType::U8 || t == DType::I8; }

// Per tensor (scale of one element, rank <= 1) or per axis (1-D scale along `axis`).
Status quant_desc(CudaKernelContext& k, QuantDesc* d) {
  const Tensor &x = k.in(0), &sc = k.in(1);
  d->n = x.numel();
  if (k.has_input(2) && k.in(2).shape() != sc.shape())
    return k.error("zero point shape {} differs from scale shape {}", shape_to_string(k.in(2).shape()),
                   shape_to_string(sc.shape()));
  if (sc.rank() == 0 || (sc.rank() == 1 && sc.numel() == 1)) return Status::Ok();
  if (sc.rank() != 1) return k.error("scale must be a scalar or 1-D, got {}", shape_to_string(sc.shape()));
  int64_t axis = k.node.attr_i("axis", 1);
  if (!normalize_axis(&axis, x.rank())) return k.error("axis {} is out of range for input rank {}", axis, x.rank());
  d->axis_dim = x.shape()[axis];
  if (sc.numel() != d->axis_dim)
    return k.error("scale has {} values for axis {} of extent {}", sc.numel(), axis, d->axis_dim);
  d->inner = 1;
  for (int64_t i = axis + 1; i < x.rank(); ++i) d->inner *= x.shape()[i];
  return Status::Ok();
}

Status run_quantize(CudaKernelContext& k) {
  QuantDesc d;
  GPUOPT_RETURN_IF_ERROR(quant_desc(k, &d));
  const void* zp = k.has_input(2) ? k.in(2).raw() : nullptr;
  return launch_quantize(k.in(0).dtype(), k.in(1).dtype(), k.out(0).dtype(), k.in(0).raw(), k.in(1).raw(), zp,
                         k.out(0).raw(), d, k.ctx.stream);
}
bool quantize_supported(const Node& n, const std::vector<DType>& in) {
  if (in.size() < 2 || !is_float(in[0]) || !is_float(in[1]) || n.attr_i("block_size", 0) != 0) return false;
  if (n.has_attr("saturate")) return false;  // float8 outputs only
  if (in.size() > 2 && in[2] != DType::Undefined) return is_q8(in[2]);
  const int64_t od = n.attr_i("output_dtype", 0);
  if (od == 0) return true;  // u8
  const auto t = dtype_from_onnx(static_cast<int>(od));
  return t && is_q8(*t);
}

Status run_dequantize(CudaKernelContext& k) {
  QuantDesc d;
  GPUOPT_RETURN_IF_ERROR(quant_desc(k, &d));
  const void* zp = k.has_input(2) ? k.in(2).raw() : nullptr;
  return launch_dequantize(k.in(0).dtype(), k.in(1).dtype(), k.out(0).dtype(), k.in(0).raw(), k.in(1).raw(), zp,
                           k.out(0).raw(), d, k.ctx.stream);
}
bool dequantize_supported(const Node& n, const std::vector<DType>& in) {
  if (in.size() < 2 || !(is_q8(in[0]) || in[0] == DType::I32) || !is_float(in[1]) || n.attr_i("block_size", 0) != 0)
    return false;
  if (in.size() > 2 && in[2] != DType::Undefined && in[2] != in[0]) return false;
  const int64_t od = n.attr_i("output_dtype", 0);
  if (od == 0) return true;  // the scale's dtype
  const auto t = dtype_from_onnx(static_cast<int>(od));
  return t && is_float(*t);
}

}  // namespace

GPUOPT_CUDA_OP(QuantizeLinear, &run_quantize, &quantize_supported);
GPUOPT_CUDA_OP(DequantizeLinear, &run_dequantize, &dequantize_supported);

}  // namespace gpuopt::cuda
