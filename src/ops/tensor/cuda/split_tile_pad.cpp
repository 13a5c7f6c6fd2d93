// Pad, Split and Tile on the GPU, built from the data-movement kernels of layout.h (strided
// copy; Pad's edge/reflect/wrap index kernel) and async copies.
#include "backends/cuda/cuda_ops.h"
#include "ops/index/cuda/index_ops.h"
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

// Pad. Edge, reflect and wrap: one index kernel (launch_pad_index). Constant: fill the output
// with the value, then copy the kept part of the input into its window with one 2-D copy per
// index of the leading dims (rows along the last two dims are evenly pitched). Negative pads crop.
// attr_form: pads and value are attributes (opsets 2-10); else host inputs 1..3.
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

  const std::string mode = k.node.attr_s("mode", "constant");
  if (mode != "constant") {
    if (r > kMaxRank) return k.error("rank {} exceeds the CUDA limit {}", r, kMaxRank);
    PadDesc d;
    d.rank = static_cast<int>(r);
    d.numel = y.numel();
    d.mode = mode == "edge" ? PadMode::kEdge : mode == "wrap" ? PadMode::kWrap : PadMode::kReflect;
    const auto st = shape_strides(x.shape());
    for (int64_t i = 0; i < r; ++i) {
      d.out_dims[i] = y.shape()[i];
      d.in_dims[i] = x.shape()[i];
      d.in_strides[i] = st[i];
      d.begin[i] = begin[i];
      if (x.shape()[i] == 0) return k.error("cannot {}-pad axis {} of extent 0", mode, i);
    }
    return launch_pad_index(es, x.raw(), y.raw(), d, k.ctx.stream);
  }

  // 1. Fill: memset for an all-zero bit pattern, else one fill kernel with the value as a
  // parameter (no host buffer for the copy to outlive, so the run can be a CUDA graph).
  Tensor host_value = Tensor::empty(x.dtype(), {1});
  host_value.set_f64(0, value);
  const auto* vb = static_cast<const unsigned char*>(host_value.raw());
  auto* yb = static_cast<char*>(y.raw());
  if (std::all_of(vb, vb + es, [](unsigned char c) { return c == 0; })) {
    GPUOPT_CHECK_CALL(cudaMemsetAsync(yb, 0, static_cast<size_t>(y.numel()) * es, k.ctx.stream));
  } else {
    GPUOPT_RETURN_IF_ERROR(launch_fill(es, vb, yb, y.numel(), k.ctx.stream));
  }

  // 2. The window: per axis, input range [in0, in0 + len) lands at output offset out0.
  std::vector<int64_t> in0(static_cast<size_t>(r)), out0(static_cast<size_t>(r)), len(static_cast<size_t>(r));
  for (int64_t i = 0; i < r; ++i) {
    in0[i] = std::max<int64_t>(-begin[i], 0);
    out0[i] = std::max<int64_t>(begin[i], 0);
    len[i] = x.shape()[i] - in0[i] - std::max<int64_t>(-end[i], 0);
    if (len[i] <= 0) return Status::Ok();  // everything cropped: the output is all fill
  }
  // View both as [outer..., rows, cols] with at least two dims.
  Shape xs = x.shape(), ys = y.shape();
  while (static_cast<int64_t>(xs.size()) < 2) {
    xs.insert(xs.begin(), 1);
    ys.insert(ys.begin(), 1);
    in0.insert(in0.begin(), 0);
    out0.insert(out0.begin(), 0);
    len.insert(len.begin(), 1);
  }
  const size_t R = xs.size();
  const auto xst = shape_strides(xs), yst = shape_strides(ys);
  const size_t width = static_cast<size_t>(len[R - 1]) * es;
  int64_t outer = 1;
  for (size_t i = 0; i + 2 < R; ++i) outer *= len[i];
  std::vector<int64_t> idx(R - 2, 0);
  for (int64_t o = 0; o < outer; ++o) {
    int64_t xo = 0, yo = 0;
    for (size_t i = 0; i + 2 < R; ++i) {
      xo += (in0[i] + idx[i]) * xst[i];
      yo += (out0[i] + idx[i]) * yst[i];
    }
    xo += in0[R - 2] * xst[R - 2] + in0[R - 1];
    yo += out0[R - 2] * yst[R - 2] + out0[R - 1];
    GPUOPT_CHECK_CALL(cudaMemcpy2DAsync(static_cast<char*>(y.raw()) + yo * es, static_cast<size_t>(yst[R - 2]) * es,
                                        static_cast<const char*>(x.raw()) + xo * es,
                                        static_cast<size_t>(xst[R - 2]) * es, width,
                                        static_cast<size_t>(len[R - 2]), cudaMemcpyDeviceToDevice, k.ctx.stream));
    for (int64_t i = static_cast<int64_t>(R) - 3; i >= 0; --i) {  // next outer index
      if (++idx[i] < len[i]) break;
      idx[i] = 0;
    }
  }
  return Status::Ok();
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
