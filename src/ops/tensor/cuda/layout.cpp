// Transpose, Slice, Expand (one strided-copy kernel) and Concat (2-D async copies) on the GPU.
#include "backends/cuda/cuda_ops.h"
#include "ops/tensor/cuda/layout.h"
#include "core/cuda_check.h"
#include "gpuopt/kernel_settings.h"

#include <cuda_runtime.h>

namespace gpuopt::cuda {
namespace {

std::vector<int64_t> strides_of(const Shape& s) { return shape_strides(s); }

Status run_transpose(CudaKernelContext& k) {
  const Tensor& x = k.in(0);
  const int r = static_cast<int>(x.rank());
  if (r > kMaxRank) return k.error("rank {} exceeds the CUDA limit {}", r, kMaxRank);
  std::vector<int64_t> perm = k.node.attr_ints("perm");
  if (perm.empty())
    for (int i = r - 1; i >= 0; --i) perm.push_back(i);
  std::vector<bool> seen(static_cast<size_t>(r), false);
  for (int64_t a : perm) {
    if (perm.size() != static_cast<size_t>(r) || a < 0 || a >= r || seen[static_cast<size_t>(a)])
      return k.error("perm is not a permutation of the {} input axes", r);
    seen[static_cast<size_t>(a)] = true;
  }
  const Status st = launch_transpose(dtype_size(x.dtype()), x.raw(), k.out(0).raw(), x.shape(), perm, k.ctx.stream,
                                     k.ctx.kernels().small_c_transpose);
  return st.ok() ? st : k.error("{}", st.message());
}

Status run_expand(CudaKernelContext& k) {
  const Tensor& x = k.in(0);
  const Shape& out = k.out(0).shape();
  const int r = static_cast<int>(out.size());
  if (r > kMaxRank) return k.error("rank {} exceeds the CUDA limit {}", r, kMaxRank);
  StridedDesc d;
  d.rank = r;
  d.numel = shape_numel(out);
  int64_t st = 1;
  for (int i = r - 1; i >= 0; --i) {
    const int xi = i - (r - static_cast<int>(x.rank()));
    const int64_t dim = xi >= 0 ? x.shape()[xi] : 1;
    d.out_dims[i] = out[i];
    d.in_strides[i] = dim == 1 ? 0 : st;
    st *= dim;
  }
  return launch_strided_copy(dtype_size(x.dtype()), x.raw(), k.out(0).raw(), d, k.ctx.stream);
}

// Start and step per axis by the ONNX Slice rules (the output shape is already inferred).
// attr_form: starts/axes are attributes (the form before opset 10); else host inputs 1..4.
Status run_slice_impl(CudaKernelContext& k, bool attr_form) {
  const Tensor& x = k.in(0);
  const int64_t r = x.rank();
  if (r > kMaxRank) return k.error("rank {} exceeds the CUDA limit {}", r, kMaxRank);
  std::vector<int64_t> starts, axes, steps;
  if (attr_form) {
    starts = k.node.attr_ints("starts");
    axes = k.node.attr_ints("axes");
  } else {
    starts = k.host[1]->to_i64_vector();
    if (k.host.size() > 3 && k.host[3]) axes = k.host[3]->to_i64_vector();
    if (k.host.size() > 4 && k.host[4]) steps = k.host[4]->to_i64_vector();
  }
  if (axes.empty())
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  std::vector<int64_t> start(static_cast<size_t>(r), 0), step(static_cast<size_t>(r), 1);
  for (size_t i = 0; i < axes.size(); ++i) {
    int64_t a = axes[i];
    if (!normalize_axis(&a, r)) return k.error("axis {} out of range for rank {}", axes[i], r);
    const int64_t dim = x.shape()[a];
    const int64_t stp = steps.empty() ? 1 : steps[i];
    int64_t s = starts[i];
    if (s < 0) s += dim;
    s = stp > 0 ? std::clamp<int64_t>(s, 0, dim) : std::clamp<int64_t>(s, 0, dim - 1);
    start[a] = s;
    step[a] = stp;
  }
  const auto st = strides_of(x.shape());
  StridedDesc d;
  d.rank = static_cast<int>(r);
  d.numel = k.out(0).numel();
  for (int64_t i = 0; i < r; ++i) {
    d.out_dims[i] = k.out(0).shape()[i];
    d.in_strides[i] = st[i] * step[i];
    d.in_offset += start[i] * st[i];
  }
  return launch_strided_copy(dtype_size(x.dtype()), x.raw(), k.out(0).raw(), d, k.ctx.stream);
}

Status run_concat(CudaKernelContext& k) {
  const Shape& out = k.out(0).shape();
  int64_t axis = k.node.attr_i("axis", 0);
  if (!normalize_axis(&axis, static_cast<int64_t>(out.size()))) return k.error("axis out of range");
  const size_t es = dtype_size(k.out(0).dtype());
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < axis; ++i) outer *= out[i];
  for (size_t i = static_cast<size_t>(axis) + 1; i < out.size(); ++i) inner *= out[i];
  const size_t out_pitch = static_cast<size_t>(out[axis] * inner) * es;
  size_t offset = 0;
  for (size_t i = 0; i < k.inputs.size(); ++i) {
    if (!k.inputs[i]) continue;
    const Tensor& x = k.in(i);
    const size_t width = static_cast<size_t>(x.shape()[axis] * inner) * es;
    if (width && outer)
      GPUOPT_CHECK_CALL(cudaMemcpy2DAsync(static_cast<char*>(k.out(0).raw()) + offset, out_pitch, x.raw(), width, width,
                                          static_cast<size_t>(outer), cudaMemcpyDeviceToDevice, k.ctx.stream));
    offset += width;
  }
  return Status::Ok();
}

Status run_slice_v1(CudaKernelContext& k) { return run_slice_impl(k, true); }
Status run_slice(CudaKernelContext& k) { return run_slice_impl(k, false); }

}  // namespace

GPUOPT_CUDA_OP(Transpose, &run_transpose, &any_types);
GPUOPT_CUDA_OP(Expand, &run_expand, &any_types, host_inputs_mask({1}));
GPUOPT_CUDA_OP_RANGE(Slice, 1, 9, &run_slice_v1, &any_types);
GPUOPT_CUDA_OP_RANGE(Slice, 10, kOpsetMax, &run_slice, &any_types, host_inputs_mask({1, 2, 3, 4}));
GPUOPT_CUDA_OP(Concat, &run_concat, &any_types);

}  // namespace gpuopt::cuda
