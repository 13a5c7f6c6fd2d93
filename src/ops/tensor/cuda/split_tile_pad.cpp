// Pad, Split and Tile on the GPU, built from the data-movement kernels of layout.h (strided
// copy; the Pad index kernel) and async copies.
#include "backends/cuda/cuda_ops.h"
#include "ops/tensor/cuda/layout.h"
#include "core/cuda_check.h"

#include <cuda_runtime.h>

#include <algorithm>

namespace gpuopt::cuda {
namespace {

// Split: output j is the slice [off_j, off_j + out_j.shape[axis]) of the input along `axis`; the
// output shapes are already inferred (from `split`, num_outputs or an even split).
Status run_split(CudaKernelContext& k) {
  const Tensor& x = k.in(0);
  const int64_t r = x.rank();
  if (r > kMaxRank) return k.error("rank {} exceeds the CUDA limit {}", r, kMaxRank);
  int64_t axis = k.node.attr_i("axis", 0);
  if (!normalize_axis(&axis, r)) return k.error("axis {} out of range for rank {}", k.node.attr_i("axis", 0), r);
  const auto st = shape_strides(x.shape());
  int64_t off = 0;
  for (size_t j = 0; j < k.outputs.size(); ++j) {
    if (!k.outputs[j]) continue;
    Tensor& y = k.out(j);
    const int64_t len = y.shape()[axis];
    if (off + len > x.shape()[axis])
      return k.error("outputs take {} along axis {} but the input has {}", off + len, axis, x.shape()[axis]);
    if (y.numel() > 0) {
      StridedDesc d;
      d.rank = static_cast<int>(r);
      d.numel = y.numel();
      for (int64_t i = 0; i < r; ++i) {
        d.out_dims[i] = y.shape()[i];
        d.in_strides[i] = st[i];
      }
      d.in_offset = off * st[axis];
      GPUOPT_RETURN_IF_ERROR(launch_strided_copy(dtype_size(x.dtype()), x.raw(), y.raw(), d, k.ctx.stream));
    }
    off += len;
  }
  return Status::Ok();
}

// Tile: the output viewed as [rep_0, d_0, rep_1, d_1, ...] reads the input with stride 0 along
// each rep_k; pairs with rep 1 or d 1 collapse so that most shapes fit kMaxRank.
Status run_tile(CudaKernelContext& k) {
  const Tensor& x = k.in(0);
  const std::vector<int64_t> reps = k.host[1]->to_i64_vector();
  if (static_cast<int64_t>(reps.size()) != x.rank())
    return k.error("repeats has {} values for an input of rank {}", reps.size(), x.rank());
  const auto st = shape_strides(x.shape());
  StridedDesc d;
  d.numel = k.out(0).numel();
  if (d.numel == 0) return Status::Ok();
  for (int64_t i = 0; i < x.rank(); ++i) {
    const int64_t dim = x.shape()[i];
    auto push = [&](int64_t n, int64_t stride) -> bool {
      if (d.rank == kMaxRank) return false;
      d.out_dims[d.rank] = n;
      d.in_strides[d.rank++] = stride;
      return true;
    };
    bool ok = true;
    if (reps[i] != 1) ok = push(reps[i], 0);
    if (ok && dim != 1) ok = push(dim, st[i]);
    if (!ok) return k.error("input {} with repeats of rank {} needs more than {} strided dims", shape_to_string(x.shape()),
                            reps.size(), kMaxRank);
  }
  if (d.rank == 0) {  // a single element
    d.rank = 1;
    d.out_dims[0] = 1;
    d.in_strides[0] = 0;
  }
  return launch_strided_copy(dtype_size(x.dtype()), x.raw(), k.out(0).raw(), d, k.ctx.stream);
}

// Pad, every mode: one index kernel over the output (launch_pad_index); all-zero pads are one
// device copy. (One cudaMemcpy2DAsync per index of the leading dims took 9.5 ms for a
// [32, 56, 56, 96] channels-last map in torchvision's Swin-T: 1,792 copies of 56 rows.) Negative
// pads crop. attr_form: pads and value are attributes (opsets 2-10); else host inputs 1..3.
Status run_pad_impl(CudaKernelContext& k, bool attr_form) {
  const Tensor& x = k.in(0);
  Tensor& y = k.out(0);
  const int64_t r = x.rank();
  std::vector<int64_t> pads;
  double value = 0.0;
  std::vector<int64_t> axes;
  if (attr_form) {
    pads = k.node.attr_ints("pads");
    value = k.node.attr_f("value", 0.0f);
  } else {
    pads = k.host[1]->to_i64_vector();
    if (k.host.size() > 2 && k.host[2] && k.host[2]->numel() > 0) value = k.host[2]->get_f64(0);
    if (k.host.size() > 3 && k.host[3]) axes = k.host[3]->to_i64_vector();
  }
  if (axes.empty())
    for (int64_t i = 0; i < r; ++i) axes.push_back(i);
  if (pads.size() != 2 * axes.size()) return k.error("{} pads for {} axes", pads.size(), axes.size());
  std::vector<int64_t> begin(static_cast<size_t>(r), 0), end(static_cast<size_t>(r), 0);
  for (size_t i = 0; i < axes.size(); ++i) {
    int64_t a = axes[i];
    if (!normalize_axis(&a, r)) return k.error("axis {} out of range for rank {}", axes[i], r);
    begin[a] = pads[i];
    end[a] = pads[i + axes.size()];
  }
  const size_t es = dtype_size(x.dtype());
  if (y.numel() == 0) return Status::Ok();
  if (std::all_of(pads.begin(), pads.end(), [](int64_t p) { return p == 0; })) {
    GPUOPT_CHECK_CALL(cudaMemcpyAsync(y.raw(), x.raw(), static_cast<size_t>(y.numel()) * es, cudaMemcpyDeviceToDevice,
                                      k.ctx.stream));
    return Status::Ok();
  }
  const std::string mode = k.node.attr_s("mode", "constant");
  PadMode pm = PadMode::kConstant;
  if (mode != "constant") {
    pm = mode == "edge" ? PadMode::kEdge : mode == "wrap" ? PadMode::kWrap : PadMode::kReflect;
    for (int64_t i = 0; i < r; ++i)
      if (x.shape()[i] == 0) return k.error("cannot {}-pad axis {} of extent 0", mode, i);
  }
  // The value in the tensor's dtype, passed to the kernel by value (no host buffer for the
  // launch to outlive, so the run can be a CUDA graph).
  Tensor host_value = Tensor::empty(x.dtype(), {1});
  host_value.set_f64(0, value);
  // An empty input axis (constant mode) is all fill: every index lands outside it.
  auto d = make_pad_desc(es, x.shape(), y.shape(), begin, end, pm, host_value.raw(), x.raw(), y.raw());
  if (!d.ok()) return k.error("{}", d.status().message());
  return launch_pad_index(x.raw(), y.raw(), *d, k.ctx.stream);
}

Status run_pad_v2(CudaKernelContext& k) { return run_pad_impl(k, true); }
Status run_pad(CudaKernelContext& k) { return run_pad_impl(k, false); }

bool pad_supported(const Node& node, const std::vector<DType>& in) {
  const std::string mode = node.attr_s("mode", "constant");
  return (mode == "constant" || mode == "edge" || mode == "reflect" || mode == "wrap") && any_types(node, in);
}

}  // namespace

GPUOPT_CUDA_OP(Split, &run_split, &any_types, host_inputs_mask({1}));
GPUOPT_CUDA_OP(Tile, &run_tile, &any_types, host_inputs_mask({1}));
// Pad-1 (`paddings`) has no CUDA form: such a node runs on the CPU.
GPUOPT_CUDA_OP_RANGE(Pad, 2, 10, &run_pad_v2, &pad_supported);
GPUOPT_CUDA_OP_RANGE(Pad, 11, kOpsetMax, &run_pad, &pad_supported, host_inputs_mask({1, 2, 3}));

}  // namespace gpuopt::cuda
