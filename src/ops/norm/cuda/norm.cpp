// LayerNormalization, SkipLayerNormalization and inference BatchNormalization on the GPU (kernels
// in layernorm.cu and norm.cu).
#include "backends/cuda/cuda_ops.h"
#include "ops/norm/cuda/norm.h"
#include "backends/cuda/upload.h"
#include "core/cuda_check.h"

#include <cuda_runtime.h>

#include <cmath>

namespace gpuopt::cuda {
namespace {

bool all_same_float(const Node& n, const std::vector<DType>& in) {
  if (!first_float(n, in)) return false;
  for (DType t : in)
    if (t != DType::Undefined && t != in[0]) return false;
  return true;
}

Status run_layernorm(CudaKernelContext& k) {
  const Tensor& x = k.in(0);
  int64_t axis = k.node.attr_i("axis", -1);
  if (!normalize_axis(&axis, x.rank())) return k.error("axis out of range");
  int64_t rows = 1, cols = 1;
  for (int64_t i = 0; i < x.rank(); ++i) (i < axis ? rows : cols) *= x.shape()[i];
  if (k.in(1).numel() != cols) return k.error("scale has {} elements, the normalised extent is {}", k.in(1).numel(), cols);
  const void* bias = k.inputs.size() > 2 && k.inputs[2] ? k.in(2).raw() : nullptr;
  if (bias && k.in(2).numel() != cols) return k.error("bias has {} elements, the normalised extent is {}", k.in(2).numel(), cols);
  // Mean / InvStdDev outputs are f32 per the spec's U type (stash_type 1).
  float* mean = k.outputs.size() > 1 && k.outputs[1] && k.out(1).dtype() == DType::F32 ? k.out(1).data<float>() : nullptr;
  float* inv = k.outputs.size() > 2 && k.outputs[2] && k.out(2).dtype() == DType::F32 ? k.out(2).data<float>() : nullptr;
  return launch_layernorm(x.dtype(), x.raw(), k.in(1).raw(), bias, k.out(0).raw(), rows, cols,
                          k.node.attr_f("epsilon", 1e-5f), mean, inv, k.ctx.stream);
}

// SkipLayerNormalization (com.microsoft): LayerNorm over the last axis of input + skip; skip is
// [rows, H] or repeats over the leading dims ([S, H], [1, S, H]); beta optional; ORT's bias input
// (4) runs on the CPU reference (skip_layernorm_supported).
Status run_skip_layernorm(CudaKernelContext& k) {
  const Tensor& x = k.in(0);
  const Tensor& skip = k.in(1);
  if (x.rank() == 0) return k.error("input is a scalar");
  const int64_t cols = x.shape().back(), rows = cols ? x.numel() / cols : 0;
  if (cols == 0 || skip.numel() % cols != 0 || skip.numel() == 0 || skip.shape().back() != cols)
    return k.error("skip {} does not fit input {}", shape_to_string(skip.shape()), shape_to_string(x.shape()));
  if (k.in(2).numel() != cols) return k.error("gamma has {} elements for the hidden size {}", k.in(2).numel(), cols);
  const void* beta = k.inputs.size() > 3 && k.inputs[3] ? k.in(3).raw() : nullptr;
  if (beta && k.in(3).numel() != cols) return k.error("beta has {} elements for the hidden size {}", k.in(3).numel(), cols);
  auto f32_out = [&](size_t o) -> float* {
    return k.outputs.size() > o && k.outputs[o] && k.out(o).dtype() == DType::F32 ? k.out(o).data<float>() : nullptr;
  };
  void* sum = k.outputs.size() > 3 && k.outputs[3] ? k.out(3).raw() : nullptr;
  // gpuopt's output 4: e4m3 codes of output 0 / fp8_scale, or int8 (QuantizeLinear by int8_scale)
  // (ops/norm/skip_layernorm.cpp).
  uint8_t* q = k.outputs.size() > 4 && k.outputs[4] ? static_cast<uint8_t*>(k.out(4).raw()) : nullptr;
  const bool q_int8 = k.node.has_attr("int8_scale");
  const float q_scale = k.node.attr_f(q_int8 ? "int8_scale" : "fp8_scale", 1.0f);
  if (q && !(std::isfinite(q_scale) && q_scale > 0)) return k.error("output 4's scale {} must be finite and > 0", q_scale);
  return launch_skip_layernorm(x.dtype(), x.raw(), skip.raw(), skip.numel() / cols, k.in(2).raw(), beta,
                               k.out(0).raw(), sum, rows, cols, k.node.attr_f("epsilon", 1e-12f), f32_out(1), f32_out(2),
                               k.ctx.stream, /*rms=*/false, q, q_scale, q_int8)
      .with_context(node_label(k.node));
}

bool skip_layernorm_supported(const Node& n, const std::vector<DType>& in) {
  return (in.size() <= 4 || in[4] == DType::Undefined) && all_same_float(n, in);
}

// Inference BatchNormalization: per-channel scale/shift folded on the host from the constant
// statistics (the executor keeps host copies of constants), then one affine pass.
Status run_batchnorm(CudaKernelContext& k) {
  const Tensor& x = k.in(0);
  for (int i = 1; i <= 4; ++i)
    if (!k.host[i]) return k.error("input {} must be a constant for the CUDA kernel", i);
  const int64_t c = x.shape()[1];
  const double eps = k.node.attr_f("epsilon", 1e-5f);
  std::vector<float> scale(static_cast<size_t>(c)), shift(static_cast<size_t>(c));
  for (int64_t i = 0; i < c; ++i) {
    const double s = k.host[1]->get_f64(i) / std::sqrt(k.host[4]->get_f64(i) + eps);
    scale[i] = static_cast<float>(s);
    shift[i] = static_cast<float>(k.host[2]->get_f64(i) - k.host[3]->get_f64(i) * s);
  }
  const size_t bytes = 2 * static_cast<size_t>(c) * sizeof(float);
  if (bytes > k.ctx.workspace_bytes) return k.error("{} channels exceed the workspace", c);
  float* dev = static_cast<float*>(k.ctx.workspace);
  std::vector<float> both(scale);
  both.insert(both.end(), shift.begin(), shift.end());
  if (bytes <= kInlineUploadMax) {
    // As kernel parameters: no host wait, and the run stays capturable as a CUDA graph.
    GPUOPT_RETURN_IF_ERROR(upload_inline(both.data(), dev, bytes, k.ctx.stream));
  } else {
    GPUOPT_CHECK_CALL(cudaMemcpyAsync(dev, both.data(), bytes, cudaMemcpyHostToDevice, k.ctx.stream));
    // The host vector must outlive the copy.
    GPUOPT_CHECK_CALL(cudaStreamSynchronize(k.ctx.stream));
  }
  int64_t spatial = 1;
  for (int64_t i = 2; i < x.rank(); ++i) spatial *= x.shape()[i];
  return launch_channel_affine(x.dtype(), x.raw(), dev, dev + c, k.out(0).raw(), x.shape()[0], c, spatial, k.ctx.stream);
}
bool batchnorm_supported(const Node& n, const std::vector<DType>& in) {
  return first_float(n, in) && n.attr_i("training_mode", 0) == 0;
}

}  // namespace

GPUOPT_CUDA_OP(LayerNormalization, &run_layernorm, &all_same_float);
GPUOPT_CUDA_OP(SkipLayerNormalization, &run_skip_layernorm, &skip_layernorm_supported);
GPUOPT_CUDA_OP(BatchNormalization, &run_batchnorm, &batchnorm_supported, host_inputs_mask({1, 2, 3, 4}));

}  // namespace gpuopt::cuda
