// MaxPool (Indices output, ceil_mode, dilations, storage_order), AveragePool (count_include_pad,
// ceil_mode, dilations), GlobalAveragePool, GlobalMaxPool: CPU reference over the shared window
// gather table (input offset or -1 per kernel tap and output position).
#include "ops/pool/pool_window.h"

#include <limits>

namespace gpuopt {

using nn::Window;

namespace {

bool pool_dtype_ok(DType t, bool max_pool) {
  return nn::is_float_dtype(t) || (max_pool && (t == DType::I8 || t == DType::U8));
}

Status check_pool_input(const InferContext& ctx, bool max_pool) {
  GPUOPT_RETURN_IF_ERROR(nn::require_inputs(ctx, 1));
  const ValueInfo& x = ctx.in(0);
  if (x.dtype != DType::Undefined && !pool_dtype_ok(x.dtype, max_pool))
    return ctx.error("dtype {} is not supported (f32, f16, bf16, f64{})", dtype_name(x.dtype),
                     max_pool ? ", i8, u8" : "");
  if (x.rank_known && x.shape.size() < 3)
    return ctx.error("input rank {} is below 3 (expected [N, C, spatial...])", x.shape.size());
  return Status::Ok();
}

// Sliding-window pools share shape inference: kernel_shape is required.
Status infer_window_pool(InferContext& ctx, bool max_pool) {
  GPUOPT_RETURN_IF_ERROR(check_pool_input(ctx, max_pool));
  const ValueInfo& x = ctx.in(0);
  ValueInfo& y = ctx.outputs[0];
  y.dtype = x.dtype;
  if (ctx.outputs.size() > 1) ctx.outputs[1].dtype = DType::I64;
  if (max_pool && ctx.node.attr_i("storage_order", 0) != 0 && ctx.node.attr_i("storage_order", 0) != 1)
    return ctx.error("storage_order {} must be 0 (row major) or 1 (column major)", ctx.node.attr_i("storage_order", 0));
  GPUOPT_ASSIGN_OR_RETURN(y.shape, pool::output_shape(ctx, x));
  y.rank_known = true;
  if (ctx.outputs.size() > 1) {
    ctx.outputs[1].rank_known = true;
    ctx.outputs[1].shape = y.shape;
  }
  return Status::Ok();
}

// Column-major offset of a row-major spatial offset (MaxPool storage_order=1 indices).
int64_t column_major(int64_t off, const std::vector<int64_t>& dims) {
  int64_t r = off, cm = 0, stride = 1;
  std::vector<int64_t> idx(dims.size());
  for (size_t d = dims.size(); d-- > 0;) {
    idx[d] = r % dims[d];
    r /= dims[d];
  }
  for (size_t d = 0; d < dims.size(); ++d) {
    cm += idx[d] * stride;
    stride *= dims[d];
  }
  return cm;
}

double global_flops(const FlopsContext& ctx) {
  const double n = nn::est_numel(nn::flops_in(ctx, 0));
  return n < 0 ? 0 : n;
}

Status infer_global_pool(InferContext& ctx, bool max_pool) {
  GPUOPT_RETURN_IF_ERROR(check_pool_input(ctx, max_pool));
  const ValueInfo& x = ctx.in(0);
  ValueInfo& y = ctx.outputs[0];
  y.dtype = x.dtype;
  y.rank_known = x.rank_known;
  y.shape = x.shape;
  for (size_t d = 2; d < y.shape.size(); ++d) y.shape[d] = 1;
  return Status::Ok();
}

}  // namespace

// ---- MaxPool ----------------------------------------------------------------------------------

Status infer_MaxPool(InferContext& ctx) {
  return infer_window_pool(ctx, true);
}

Status cpu_MaxPool(KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  GPUOPT_ASSIGN_OR_RETURN(Window w, pool::window_of(ctx, x.shape()));
  const int64_t NC = x.dim(0) * x.dim(1), K = w.kernel_size(), O = w.out_size(), I = w.in_size();
  const bool col_major = ctx.node.attr_i("storage_order", 0) == 1;
  const std::vector<int64_t> table = nn::window_gather_table(w);
  const std::vector<double> xv = nn::to_doubles(x);
  std::vector<double> y(static_cast<size_t>(NC * O));
  Tensor* ind = ctx.outputs.size() > 1 ? ctx.outputs[1] : nullptr;
  for (int64_t nc = 0; nc < NC; ++nc)
    for (int64_t o = 0; o < O; ++o) {
      double best = -std::numeric_limits<double>::infinity();
      int64_t arg = -1;
      for (int64_t t = 0; t < K; ++t) {
        const int64_t off = table[t * O + o];
        if (off >= 0 && (arg < 0 || xv[nc * I + off] > best)) best = xv[nc * I + off], arg = off;
      }
      y[nc * O + o] = best;
      if (ind) ind->data<int64_t>()[nc * O + o] = arg < 0 ? -1 : nc * I + (col_major ? column_major(arg, w.in) : arg);
    }
  nn::from_doubles(ctx.out(0), y);
  return Status::Ok();
}

// One comparison per tap.
double flops_MaxPool(const FlopsContext& ctx) {
  return pool::window_flops(ctx, 1);
}

// ---- AveragePool --------------------------------------------------------------------------------

Status infer_AveragePool(InferContext& ctx) {
  return infer_window_pool(ctx, false);
}

Status cpu_AveragePool(KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  GPUOPT_ASSIGN_OR_RETURN(Window w, pool::window_of(ctx, x.shape()));
  const int64_t NC = x.dim(0) * x.dim(1), K = w.kernel_size(), O = w.out_size();
  const bool include_pad = ctx.node.attr_i("count_include_pad", 0) != 0;
  const std::vector<int64_t> table = nn::window_gather_table(w);
  // With count_include_pad the divisor counts taps inside the explicitly padded extent
  // [-pad_begin, in + pad_end) but not the extra positions that ceil_mode adds past it.
  std::vector<double> divisor(static_cast<size_t>(O), 0.0);
  std::vector<int64_t> oidx(w.nd);
  for (int64_t o = 0; o < O; ++o) {
    if (!include_pad) {
      for (int64_t t = 0; t < K; ++t) divisor[o] += table[t * O + o] >= 0 ? 1 : 0;
      continue;
    }
    int64_t r = o;
    for (size_t d = w.nd; d-- > 0;) {
      oidx[d] = r % w.out[d];
      r /= w.out[d];
    }
    double cnt = 1;
    for (size_t d = 0; d < w.nd; ++d) {
      int64_t c = 0;
      for (int64_t k = 0; k < w.kernel[d]; ++k) {
        const int64_t p = oidx[d] * w.strides[d] - w.pad_begin[d] + k * w.dilations[d];
        c += (p >= -w.pad_begin[d] && p < w.in[d] + w.pad_end[d]) ? 1 : 0;
      }
      cnt *= static_cast<double>(c);
    }
    divisor[o] = cnt;
  }
  std::vector<double> y = pool::window_sums(w, table, nn::to_doubles(x), NC, [](double v) { return v; });
  for (int64_t nc = 0; nc < NC; ++nc)
    for (int64_t o = 0; o < O; ++o) {
      double& s = y[nc * O + o];
      s = divisor[o] > 0 ? s / divisor[o] : std::numeric_limits<double>::quiet_NaN();
    }
  nn::from_doubles(ctx.out(0), y);
  return Status::Ok();
}

double flops_AveragePool(const FlopsContext& ctx) {
  return flops_MaxPool(ctx);
}

// ---- GlobalAveragePool / GlobalMaxPool --------------------------------------------------------

Status infer_GlobalAveragePool(InferContext& ctx) {
  return infer_global_pool(ctx, false);
}
Status infer_GlobalMaxPool(InferContext& ctx) {
  return infer_global_pool(ctx, true);
}

namespace {
template <bool kMax>
Status global_pool(KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  const int64_t NC = x.dim(0) * x.dim(1), S = NC ? x.numel() / NC : 0;
  const std::vector<double> xv = nn::to_doubles(x);
  std::vector<double> y(static_cast<size_t>(NC));
  for (int64_t nc = 0; nc < NC; ++nc) {
    double acc = kMax ? -std::numeric_limits<double>::infinity() : 0.0;
    for (int64_t s = 0; s < S; ++s) {
      const double v = xv[nc * S + s];
      acc = kMax ? std::max(acc, v) : acc + v;
    }
    y[nc] = kMax ? acc : acc / static_cast<double>(S);
  }
  nn::from_doubles(ctx.out(0), y);
  return Status::Ok();
}
}  // namespace

Status cpu_GlobalAveragePool(KernelContext& ctx) {
  return global_pool<false>(ctx);
}
Status cpu_GlobalMaxPool(KernelContext& ctx) {
  return global_pool<true>(ctx);
}
double flops_GlobalAveragePool(const FlopsContext& ctx) {
  return global_flops(ctx);
}
double flops_GlobalMaxPool(const FlopsContext& ctx) {
  return global_flops(ctx);
}

}  // namespace gpuopt
