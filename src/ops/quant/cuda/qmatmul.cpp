// MatMulInteger and QLinearMatMul on the GPU (kernels/qmatmul.cu).
#include "backends/cuda/cuda_ops.h"
#include "ops/quant/cuda/qmatmul.h"

namespace gpuopt::cuda {
namespace {

bool is_q8(DType t) { return t == DType::U8 || t == DType::I8; }
bool is_f(DType t) { return t == DType::F32 || t == DType::F16 || t == DType::BF16; }

// Shapes as the CPU reference: a 1-D A is [1, K], a 1-D B is [K, 1]; batch dims broadcast.
Status make_desc(CudaKernelContext& k, const Tensor& a, const Tensor& b, IntMatMulDesc* d) {
  Shape sa = a.shape(), sb = b.shape();
  if (sa.empty() || sb.empty()) return k.error("operands must have rank >= 1");
  if (sa.size() == 1) sa.insert(sa.begin(), 1);
  if (sb.size() == 1) sb.push_back(1);
  d->M = sa[sa.size() - 2];
  d->K = sa.back();
  d->N = sb.back();
  if (sb[sb.size() - 2] != d->K)
    return k.error("inner dimensions do not match: A {} and B {}", shape_to_string(a.shape()), shape_to_string(b.shape()));
  const int ra = static_cast<int>(sa.size()) - 2, rb = static_cast<int>(sb.size()) - 2;
  const int r = std::max(ra, rb);
  if (r > kMaxBatchRank) return k.error("{} batch dims exceed the CUDA limit {}", r, kMaxBatchRank);
  d->batch_rank = r;
  int64_t st_a = 1, st_b = 1;
  for (int i = r - 1; i >= 0; --i) {
    const int ia = i - (r - ra), ib = i - (r - rb);
    const int64_t da = ia >= 0 ? sa[ia] : 1, db = ib >= 0 ? sb[ib] : 1;
    if (da != db && da != 1 && db != 1)
      return k.error("batch dimensions of A {} and B {} do not broadcast", shape_to_string(a.shape()),
                     shape_to_string(b.shape()));
    d->batch_dims[i] = std::max(da, db);
    d->a_batch_strides[i] = da == 1 ? 0 : st_a;
    d->b_batch_strides[i] = db == 1 ? 0 : st_b;
    st_a *= da;
    st_b *= db;
    d->batches *= d->batch_dims[i];
  }
  d->a_signed = a.dtype() == DType::I8;
  d->b_signed = b.dtype() == DType::I8;
  return Status::Ok();
}

// Zero point / scale counts: 1 (per tensor) or `allowed` (per row / column).
Status count_of(CudaKernelContext& k, size_t i, int64_t allowed, const char* what, int64_t* count) {
  if (!k.has_input(i)) {
    *count = 0;
    return Status::Ok();
  }
  const int64_t n = k.inputs[i] ? k.in(i).numel() : k.host[i]->numel();
  if (n != 1 && n != allowed) return k.error("{} has {} values; expected 1 or {}", what, n, allowed);
  *count = n;
  return Status::Ok();
}

Status run_matmul_integer(CudaKernelContext& k) {
  IntMatMulDesc d;
  GPUOPT_RETURN_IF_ERROR(make_desc(k, k.in(0), k.in(1), &d));
  GPUOPT_RETURN_IF_ERROR(count_of(k, 2, d.M, "a_zero_point", &d.a_zp_count));
  GPUOPT_RETURN_IF_ERROR(count_of(k, 3, d.N, "b_zero_point", &d.b_zp_count));
  return launch_int_matmul(d, k.in(0).raw(), k.in(1).raw(), d.a_zp_count ? k.in(2).raw() : nullptr,
                           d.b_zp_count ? k.in(3).raw() : nullptr, nullptr, k.out(0).raw(), k.ctx.stream);
}
bool matmul_integer_supported(const Node&, const std::vector<DType>& in) {
  if (in.size() < 2 || !is_q8(in[0]) || !is_q8(in[1])) return false;
  if (in.size() > 2 && in[2] != DType::Undefined && in[2] != in[0]) return false;
  return in.size() <= 3 || in[3] == DType::Undefined || in[3] == in[1];
}

// Inputs: a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale, y_zero_point (6, 7 on the host).
Status run_qlinear_matmul(CudaKernelContext& k) {
  IntMatMulDesc d;
  GPUOPT_RETURN_IF_ERROR(make_desc(k, k.in(0), k.in(3), &d));
  GPUOPT_RETURN_IF_ERROR(count_of(k, 2, d.M, "a_zero_point", &d.a_zp_count));
  GPUOPT_RETURN_IF_ERROR(count_of(k, 5, d.N, "b_zero_point", &d.b_zp_count));
  Requant rq;
  GPUOPT_RETURN_IF_ERROR(count_of(k, 1, d.M, "a_scale", &rq.a_scale_count));
  GPUOPT_RETURN_IF_ERROR(count_of(k, 4, d.N, "b_scale", &rq.b_scale_count));
  for (size_t i : {6, 7})
    if (!k.host[i] || k.host[i]->numel() != 1) return k.error("input {} must be a single value (per-tensor y quantization)", i);
  rq.scale_dt = k.in(1).dtype();
  rq.a_scale = k.in(1).raw();
  rq.b_scale = k.in(4).raw();
  rq.b_scale_dt = k.in(4).dtype();
  rq.y_scale = k.host[6]->get_f64(0);
  rq.y_zero_point = k.host[7]->get_f64(0);
  rq.y_signed = k.out(0).dtype() == DType::I8;
  return launch_int_matmul(d, k.in(0).raw(), k.in(3).raw(), d.a_zp_count ? k.in(2).raw() : nullptr,
                           d.b_zp_count ? k.in(5).raw() : nullptr, &rq, k.out(0).raw(), k.ctx.stream);
}
bool qlinear_matmul_supported(const Node&, const std::vector<DType>& in) {
  if (in.size() != 8) return false;
  for (size_t i : {0, 2, 3, 5, 7})
    if (!is_q8(in[i])) return false;
  for (size_t i : {1, 4, 6})
    if (!is_f(in[i])) return false;
  return in[2] == in[0] && in[5] == in[3];
}

}  // namespace

GPUOPT_CUDA_OP(MatMulInteger, &run_matmul_integer, &matmul_integer_supported);
GPUOPT_CUDA_OP(QLinearMatMul, &run_qlinear_matmul, &qlinear_matmul_supported, host_inputs_mask({6, 7}));

}  // namespace gpuopt::cuda
