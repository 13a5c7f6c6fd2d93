// Index ops on the GPU: DepthToSpace/SpaceToDepth (a reshape + transpose through the strided
// copy), Trilu, GatherElements, GatherND, ScatterElements/Scatter, ScatterND (kernels in
// kernels/index.cu). Creation ops and Cosh/CastLike are in ops_create.cpp.
#include "backends/cuda/cuda_ops.h"
#include "ops/index/cuda/index_ops.h"
#include "ops/tensor/cuda/layout.h"
#include "core/cuda_check.h"

#include <cuda_runtime.h>

namespace gpuopt::cuda {

Result<ElementsDesc> make_elements_desc(const Shape& data, const Shape& ind, int64_t axis) {
  ElementsDesc d;
  const int64_t r = static_cast<int64_t>(data.size());
  if (static_cast<int64_t>(ind.size()) != r) return Status::InvalidArgument("indices rank {} != data rank {}", ind.size(), r);
  if (r > kMaxRank) return Status::Unimplemented("rank {} exceeds the CUDA limit {}", r, kMaxRank);
  if (!normalize_axis(&axis, r)) return Status::InvalidArgument("axis {} out of range for rank {}", axis, r);
  const auto st = shape_strides(data);
  d.rank = static_cast<int>(r);
  d.numel = shape_numel(ind);
  for (int64_t i = 0; i < r; ++i) {
    d.ind_dims[i] = ind[i];
    d.data_strides[i] = st[i];
  }
  d.axis = static_cast<int>(axis);
  d.axis_dim = data[axis];
  return d;
}

Result<NdDesc> make_nd_desc(const Shape& data, const Shape& ind, int64_t b) {
  NdDesc d;
  const int64_t r = static_cast<int64_t>(data.size()), q = static_cast<int64_t>(ind.size());
  if (q < 1 || r < 1) return Status::InvalidArgument("data and indices must have rank >= 1");
  const int64_t m = ind.back();
  if (b < 0 || b >= std::min(r, q)) return Status::InvalidArgument("batch_dims {} out of range", b);
  if (m < 1 || m > r - b) return Status::InvalidArgument("indices last dim {} must be in [1, {}]", m, r - b);
  if (m > kMaxRank) return Status::Unimplemented("index tuples of {} exceed the CUDA limit {}", m, kMaxRank);
  const auto st = shape_strides(data);
  d.m = static_cast<int>(m);
  for (int64_t i = 0; i < b; ++i) d.batches *= ind[i];
  d.tuples = 1;
  for (int64_t i = b; i < q - 1; ++i) d.tuples *= ind[i];
  for (int64_t i = b + m; i < r; ++i) d.slice *= data[i];
  d.batch_stride = 1;
  for (int64_t i = b; i < r; ++i) d.batch_stride *= data[i];
  for (int64_t j = 0; j < m; ++j) {
    d.dims[j] = data[b + j];
    d.strides[j] = st[b + j];
  }
  return d;
}

namespace {

// out = in viewed as `view` and transposed by `perm` (as the CPU reference's transpose_view).
Status transpose_view(const Tensor& in, const Shape& view, const std::vector<int>& perm, Tensor& out,
                      cudaStream_t s) {
  const auto st = shape_strides(view);
  StridedDesc d;
  d.rank = static_cast<int>(view.size());
  d.numel = in.numel();
  for (int i = 0; i < d.rank; ++i) {
    d.out_dims[i] = view[perm[i]];
    d.in_strides[i] = st[perm[i]];
  }
  return launch_strided_copy(dtype_size(in.dtype()), in.raw(), out.raw(), d, s);
}

Status run_depth_to_space(CudaKernelContext& k) {
  const Shape& s = k.in(0).shape();
  if (s.size() != 4) return k.error("input must be 4-D, got {}", shape_to_string(s));
  const int64_t b = k.node.attr_i("blocksize", 1), n = s[0], c = s[1] / (b * b), h = s[2], w = s[3];
  if (k.node.attr_s("mode", "DCR") == "DCR")
    return transpose_view(k.in(0), {n, b, b, c, h, w}, {0, 3, 4, 1, 5, 2}, k.out(0), k.ctx.stream);
  return transpose_view(k.in(0), {n, c, b, b, h, w}, {0, 1, 4, 2, 5, 3}, k.out(0), k.ctx.stream);
}

Status run_space_to_depth(CudaKernelContext& k) {
  const Shape& s = k.in(0).shape();
  if (s.size() != 4) return k.error("input must be 4-D, got {}", shape_to_string(s));
  const int64_t b = k.node.attr_i("blocksize", 1);
  return transpose_view(k.in(0), {s[0], s[1], s[2] / b, b, s[3] / b, b}, {0, 3, 5, 1, 2, 4}, k.out(0), k.ctx.stream);
}

bool d2s_supported(const Node& n, const std::vector<DType>& in) {
  const std::string mode = n.attr_s("mode", "DCR");
  return (n.op != Op::DepthToSpace || mode == "DCR" || mode == "CRD") && any_types(n, in);
}

Status run_trilu(CudaKernelContext& k) {
  const Tensor& x = k.in(0);
  if (x.rank() < 2) return k.error("input must have rank >= 2, got {}", x.rank());
  const int64_t kk = k.host.size() > 1 && k.host[1] && k.host[1]->numel() > 0 ? k.host[1]->get_i64(0) : 0;
  const int64_t rows = x.dim(-2), cols = x.dim(-1);
  const int64_t mats = rows * cols == 0 ? 0 : x.numel() / (rows * cols);
  return launch_trilu(dtype_size(x.dtype()), x.raw(), k.out(0).raw(), mats, rows, cols, kk,
                      k.node.attr_i("upper", 1) != 0, k.ctx.stream);
}

bool is_index(DType t) { return t == DType::I32 || t == DType::I64; }

// Data of any device dtype, indices i32/i64.
bool gather_supported(const Node& n, const std::vector<DType>& in) {
  return in.size() == 2 && is_index(in[1]) && any_types(n, in);
}

Status run_gather_elements(CudaKernelContext& k) {
  const Tensor &data = k.in(0), &ind = k.in(1);
  auto d = make_elements_desc(data.shape(), ind.shape(), k.node.attr_i("axis", 0));
  if (!d.ok()) return k.error("{}", d.status().message());
  return launch_gather_elements(dtype_size(data.dtype()), data.raw(), ind.raw(), ind.dtype() == DType::I64,
                                k.out(0).raw(), *d, k.ctx.stream);
}

Status run_gather_nd(CudaKernelContext& k) {
  const Tensor &data = k.in(0), &ind = k.in(1);
  auto d = make_nd_desc(data.shape(), ind.shape(), k.node.attr_i("batch_dims", 0));
  if (!d.ok()) return k.error("{}", d.status().message());
  return launch_gather_nd(dtype_size(data.dtype()), data.raw(), ind.raw(), ind.dtype() == DType::I64, k.out(0).raw(),
                          *d, k.ctx.stream);
}

std::optional<ScatterReduction> reduction_of(const Node& n) {
  const std::string r = n.attr_s("reduction", "none");
  if (r == "none") return ScatterReduction::kNone;
  if (r == "add") return ScatterReduction::kAdd;
  if (r == "mul") return ScatterReduction::kMul;
  if (r == "max") return ScatterReduction::kMax;
  if (r == "min") return ScatterReduction::kMin;
  return std::nullopt;
}

// reduction none: any dtype; the reductions: f32, f16, bf16, i32, i64 (bool's logical
// reductions stay on the CPU).
bool scatter_supported(const Node& n, const std::vector<DType>& in) {
  if (in.size() != 3 || !is_index(in[1]) || in[0] != in[2] || !any_types(n, in)) return false;
  const auto r = reduction_of(n);
  if (!r) return false;
  if (*r == ScatterReduction::kNone) return true;
  return in[0] == DType::F32 || in[0] == DType::F16 || in[0] == DType::BF16 || in[0] == DType::I32 ||
         in[0] == DType::I64;
}

Status copy_data(CudaKernelContext& k) {
  const Tensor& data = k.in(0);
  if (data.nbytes() == 0) return Status::Ok();
  GPUOPT_CHECK_CALL(cudaMemcpyAsync(k.out(0).raw(), data.raw(), data.nbytes(), cudaMemcpyDeviceToDevice, k.ctx.stream));
  return Status::Ok();
}

Status run_scatter_elements(CudaKernelContext& k) {
  const Tensor &data = k.in(0), &ind = k.in(1), &upd = k.in(2);
  if (upd.shape() != ind.shape())
    return k.error("updates shape {} must equal indices shape {}", shape_to_string(upd.shape()), shape_to_string(ind.shape()));
  auto d = make_elements_desc(data.shape(), ind.shape(), k.node.attr_i("axis", 0));
  if (!d.ok()) return k.error("{}", d.status().message());
  GPUOPT_RETURN_IF_ERROR(copy_data(k));
  return launch_scatter_elements(data.dtype(), *reduction_of(k.node), ind.raw(), ind.dtype() == DType::I64, upd.raw(),
                                 k.out(0).raw(), *d, k.ctx.stream);
}

Status run_scatter_nd(CudaKernelContext& k) {
  const Tensor &data = k.in(0), &ind = k.in(1), &upd = k.in(2);
  auto d = make_nd_desc(data.shape(), ind.shape(), 0);
  if (!d.ok()) return k.error("{}", d.status().message());
  if (upd.numel() != d->batches * d->tuples * d->slice)
    return k.error("updates {} do not match indices {} and data {}", shape_to_string(upd.shape()),
                   shape_to_string(ind.shape()), shape_to_string(data.shape()));
  GPUOPT_RETURN_IF_ERROR(copy_data(k));
  return launch_scatter_nd(data.dtype(), *reduction_of(k.node), ind.raw(), ind.dtype() == DType::I64, upd.raw(),
                           k.out(0).raw(), *d, k.ctx.stream);
}

}  // namespace

GPUOPT_CUDA_OP(DepthToSpace, &run_depth_to_space, &d2s_supported);
GPUOPT_CUDA_OP(SpaceToDepth, &run_space_to_depth, &d2s_supported);
GPUOPT_CUDA_OP(Trilu, &run_trilu, &any_types, host_inputs_mask({1}));
GPUOPT_CUDA_OP(GatherElements, &run_gather_elements, &gather_supported);
GPUOPT_CUDA_OP(GatherND, &run_gather_nd, &gather_supported);
GPUOPT_CUDA_OP(ScatterElements, &run_scatter_elements, &scatter_supported);
GPUOPT_CUDA_OP(Scatter, &run_scatter_elements, &scatter_supported);
GPUOPT_CUDA_OP(ScatterND, &run_scatter_nd, &scatter_supported);

}  // namespace gpuopt::cuda
