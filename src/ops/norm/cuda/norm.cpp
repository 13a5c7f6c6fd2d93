// Softmax, LayerNormalization, reductions, inference BatchNormalization, pooling and Gather on
// the GPU (kernels in kernels/norm.cu and kernels/layout.cu).
#include "backends/cuda/cuda_ops.h"
#include "backends/cuda/device_memory.h"
#include "ops/tensor/cuda/layout.h"
#include "ops/norm/cuda/norm.h"
#include "ops/pool/cuda/pool.h"
#include "backends/cuda/upload.h"
#include "core/cuda_check.h"

#include <cuda_runtime.h>

#include <cmath>

namespace gpuopt::cuda {
namespace {

bool first_float(const Node&, const std::vector<DType>& in) {
  return !in.empty() && (in[0] == DType::F32 || in[0] == DType::F16 || in[0] == DType::BF16);
}
bool all_same_float(const Node& n, const std::vector<DType>& in) {
  if (!first_float(n, in)) return false;
  for (DType t : in)
    if (t != DType::Undefined && t != in[0]) return false;
  return true;
}

// [outer, axis, inner] around `axis`; opset < 13 Softmax flattens to 2-D at `axis` instead.
Status run_softmax_impl(CudaKernelContext& k, bool log) {
  const Tensor& x = k.in(0);
  const int64_t r = x.rank();
  int64_t axis = k.node.attr_i("axis", k.opset < 13 ? 1 : -1);
  if (!normalize_axis(&axis, r)) return k.error("axis {} out of range for rank {}", axis, r);
  int64_t outer = 1, mid = 1, inner = 1;
  for (int64_t i = 0; i < r; ++i) (i < axis ? outer : i == axis ? mid : inner) *= x.shape()[i];
  if (k.opset < 13) {
    mid *= inner;
    inner = 1;
  }
  return launch_softmax(x.dtype(), x.raw(), k.out(0).raw(), outer, mid, inner, log, k.ctx.stream);
}
Status run_softmax(CudaKernelContext& k) { return run_softmax_impl(k, false); }
Status run_log_softmax(CudaKernelContext& k) { return run_softmax_impl(k, true); }

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

template <ReduceOp kOp>
Status run_reduce(CudaKernelContext& k) {
  const Tensor& x = k.in(0);
  const int64_t r = x.rank();
  std::vector<int64_t> axes;
  if (k.host.size() > 1 && k.host[1]) axes = k.host[1]->to_i64_vector();
  else axes = k.node.attr_ints("axes");
  std::vector<bool> reduced(static_cast<size_t>(r), axes.empty() && k.node.attr_i("noop_with_empty_axes", 0) == 0);
  for (int64_t a : axes) {
    if (!normalize_axis(&a, r)) return k.error("axis out of range");
    reduced[static_cast<size_t>(a)] = true;
  }
  return launch_reduce(kOp, x.dtype(), x.raw(), k.out(0).raw(), x.shape(), reduced, k.ctx.stream);
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

Status run_maxpool(CudaKernelContext& k) { return run_pool2d(k, true, false); }
Status run_avgpool(CudaKernelContext& k) { return run_pool2d(k, false, false); }
bool pool_supported(const Node& n, const std::vector<DType>& in) {
  if (!first_float(n, in) || n.attr_ints("kernel_shape").size() != 2) return false;
  if (n.attr_s("auto_pad", "NOTSET") != "NOTSET" && n.attr_s("auto_pad", "NOTSET") != "VALID") return false;
  // MaxPool's optional Indices output stays on the CPU.
  return n.outputs.size() < 2 || n.outputs[1] == kNoValue;
}

template <ReduceOp kOp>
Status run_global_pool(CudaKernelContext& k) {
  const Tensor& x = k.in(0);
  std::vector<bool> reduced(static_cast<size_t>(x.rank()), false);
  for (int64_t i = 2; i < x.rank(); ++i) reduced[static_cast<size_t>(i)] = true;
  return launch_reduce(kOp, x.dtype(), x.raw(), k.out(0).raw(), x.shape(), reduced, k.ctx.stream);
}

Status run_gather(CudaKernelContext& k) {
  const Tensor& data = k.in(0);
  const Tensor& idx = k.in(1);
  int64_t axis = k.node.attr_i("axis", 0);
  if (!normalize_axis(&axis, data.rank())) return k.error("axis out of range");
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < axis; ++i) outer *= data.shape()[i];
  for (int64_t i = axis + 1; i < data.rank(); ++i) inner *= data.shape()[i];
  return launch_gather(dtype_size(data.dtype()), data.raw(), outer, data.shape()[axis], inner, idx.raw(),
                       idx.dtype() == DType::I64, idx.numel(), k.out(0).raw(), nullptr, k.ctx.stream);
}
bool gather_supported(const Node& n, const std::vector<DType>& in) {
  return in.size() == 2 && in[0] != DType::String && (in[1] == DType::I64 || in[1] == DType::I32);
}

}  // namespace

Status run_pool2d(CudaKernelContext& k, bool max, bool nhwc) {
  const Tensor& x = k.in(0);
  Tensor& y = k.out(0);
  const auto ks = k.node.attr_ints("kernel_shape");
  const auto st = k.node.attr_ints("strides", {1, 1});
  const auto pads = k.node.attr_ints("pads", {0, 0, 0, 0});
  const auto dl = k.node.attr_ints("dilations", {1, 1});
  const int c = nhwc ? 3 : 1, h = nhwc ? 1 : 2;  // channel axis, first spatial axis
  Pool2d p{x.shape()[0], x.shape()[c], x.shape()[h], x.shape()[h + 1], y.shape()[h], y.shape()[h + 1],
           ks[0],        ks[1],        st[0],        st[1],            pads[0],      pads[1],
           dl[0],        dl[1],        max,          k.node.attr_i("count_include_pad", 0) != 0, nhwc};
  return launch_pool2d(x.dtype(), x.raw(), y.raw(), p, k.ctx.stream);
}

GPUOPT_CUDA_OP(Softmax, &run_softmax, &first_float);
GPUOPT_CUDA_OP(LogSoftmax, &run_log_softmax, &first_float);
GPUOPT_CUDA_OP(LayerNormalization, &run_layernorm, &all_same_float);
GPUOPT_CUDA_OP(ReduceMean, &run_reduce<ReduceOp::kMean>, &first_float, host_inputs_mask({1}));
GPUOPT_CUDA_OP(ReduceSum, &run_reduce<ReduceOp::kSum>, &first_float, host_inputs_mask({1}));
GPUOPT_CUDA_OP(ReduceMax, &run_reduce<ReduceOp::kMax>, &first_float, host_inputs_mask({1}));
GPUOPT_CUDA_OP(ReduceMin, &run_reduce<ReduceOp::kMin>, &first_float, host_inputs_mask({1}));
GPUOPT_CUDA_OP(ReduceProd, &run_reduce<ReduceOp::kProd>, &first_float, host_inputs_mask({1}));
GPUOPT_CUDA_OP(ReduceL2, &run_reduce<ReduceOp::kL2>, &first_float, host_inputs_mask({1}));
GPUOPT_CUDA_OP(ReduceSumSquare, &run_reduce<ReduceOp::kSumSquare>, &first_float, host_inputs_mask({1}));
GPUOPT_CUDA_OP(BatchNormalization, &run_batchnorm, &batchnorm_supported, host_inputs_mask({1, 2, 3, 4}));
GPUOPT_CUDA_OP(MaxPool, &run_maxpool, &pool_supported);
GPUOPT_CUDA_OP(AveragePool, &run_avgpool, &pool_supported);
GPUOPT_CUDA_OP(GlobalAveragePool, &run_global_pool<ReduceOp::kMean>, &first_float);
GPUOPT_CUDA_OP(GlobalMaxPool, &run_global_pool<ReduceOp::kMax>, &first_float);
GPUOPT_CUDA_OP(Gather, &run_gather, &gather_supported);

}  // namespace gpuopt::cuda
