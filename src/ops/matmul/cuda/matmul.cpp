// MatMul (numpy semantics: batched, broadcast, 1-D operands), Gemm and FusedGemm through cuBLASLt.
#include "backends/cuda/cuda_ops.h"
#include "backends/cuda/elementwise.h"
#include "ops/tensor/cuda/layout.h"
#include "ops/matmul/cuda/matmul_lt.h"
#include "core/cuda_check.h"

#include <cuda_runtime.h>

namespace gpuopt::cuda {
namespace {

Status run_matmul(CudaKernelContext& k) {
  const Tensor& a = k.in(0);
  const Tensor& b = k.in(1);
  Shape as = a.shape(), bs = b.shape();
  if (as.size() == 1) as.insert(as.begin(), 1);
  if (bs.size() == 1) bs.push_back(1);
  const int64_t m = as[as.size() - 2], kk = as.back(), n = bs.back();
  const Shape a_batch(as.begin(), as.end() - 2), b_batch(bs.begin(), bs.end() - 2);
  const int64_t na = shape_numel(a_batch), nb = shape_numel(b_batch);
  const int64_t nout = std::max(na, nb);
  const DType dt = a.dtype();
  const size_t es = dtype_size(dt);
  // One strided-batched call when the batch dims match or one side is a single matrix.
  if (na == nb || na == 1 || nb == 1) {
    if (a_batch != b_batch && na != 1 && nb != 1) return k.error("batch dims {} and {} need a general broadcast", shape_to_string(a_batch), shape_to_string(b_batch));
    MatmulShape s{m, n, kk, nout, false, false, na == 1 ? 0 : m * kk, nb == 1 ? 0 : kk * n, m * n};
    return matmul(k.ctx, s, dt, a.raw(), b.raw(), k.out(0).raw(), 1.f, 0.f);
  }
  // General broadcast of batch dims: one call per output matrix.
  GPUOPT_ASSIGN_OR_RETURN(BroadcastDesc d, make_broadcast(a_batch, b_batch));
  MatmulShape s{m, n, kk, 1, false, false, 0, 0, 0};
  for (int64_t i = 0; i < d.numel; ++i) {
    int64_t rem = i, oa = 0, ob = 0;
    for (int r = d.rank - 1; r >= 0; --r) {
      const int64_t c = rem % d.out_dims[r];
      rem /= d.out_dims[r];
      oa += c * d.a_strides[r];
      ob += c * d.b_strides[r];
    }
    GPUOPT_RETURN_IF_ERROR(matmul(k.ctx, s, dt, static_cast<const char*>(a.raw()) + oa * m * kk * es,
                                  static_cast<const char*>(b.raw()) + ob * kk * n * es,
                                  static_cast<char*>(k.out(0).raw()) + i * m * n * es, 1.f, 0.f));
  }
  return Status::Ok();
}

// FusedGemm's activation (com.microsoft; ops/matmul/fused_gemm.cpp): the cuBLASLt epilogue when
// C is a bias row, else a pass over Y after the GEMM. cuBLASLt's GELU is the tanh form: for the
// exact (erf) Gelu it is used in f16/bf16 only, where the two differ by at most 4.7e-4 (at
// x = 2.70, below half an f16 ulp there); f32 keeps erf with a separate pass.
struct GemmActivation {
  Epilogue epilogue = Epilogue::kBias;
  bool pass = false;  // no epilogue for it: run `op` over Y after the GEMM
  UnaryOp op = UnaryOp::kIdentity;
};

GemmActivation gemm_activation(const Node& n, DType dt) {
  const std::string act = n.attr_s("activation", "");
  if (act == "Relu") return {Epilogue::kBiasRelu, false, UnaryOp::kRelu};
  if (act == "Gelu") {
    const bool tanh = n.attr_s("approximate", "none") == "tanh";
    const bool epilogue = tanh || dt != DType::F32;
    return {epilogue ? Epilogue::kBiasGelu : Epilogue::kBias, !epilogue, tanh ? UnaryOp::kGeluTanh : UnaryOp::kGelu};
  }
  return {};
}

// Y = act(alpha * op(A) op(B) + beta * C), C broadcast to [M, N]; act only for FusedGemm.
Status run_gemm(CudaKernelContext& k) {
  const Tensor& a = k.in(0);
  const Tensor& b = k.in(1);
  const bool ta = k.node.attr_i("transA", 0) != 0, tb = k.node.attr_i("transB", 0) != 0;
  const float alpha = k.node.attr_f("alpha", 1.f), beta = k.node.attr_f("beta", 1.f);
  const int64_t m = ta ? a.shape()[1] : a.shape()[0], kk = ta ? a.shape()[0] : a.shape()[1];
  const int64_t n = tb ? b.shape()[0] : b.shape()[1];
  const DType dt = a.dtype();
  Tensor& y = k.out(0);
  const GemmActivation act = gemm_activation(k.node, dt);
  const bool has_c = k.inputs.size() > 2 && k.inputs[2] && beta != 0.f;
  auto activate = [&]() -> Status {
    if (act.op == UnaryOp::kIdentity) return Status::Ok();
    return launch_unary(act.op, dt, y.raw(), y.raw(), y.numel(), {}, k.ctx.stream);
  };
  if (has_c) {
    const Tensor& c = k.in(2);
    if (c.rank() == 1 && c.shape()[0] == n && beta == 1.f) {
      // Bias row: the cuBLASLt epilogue adds it (and applies the activation) for free.
      GPUOPT_RETURN_IF_ERROR(matmul(k.ctx, {m, n, kk, 1, ta, tb, 0, 0, 0}, dt, a.raw(), b.raw(), y.raw(), alpha, 0.f,
                                    c.raw(), act.epilogue));
      return act.pass ? activate() : Status::Ok();
    }
    // Broadcast C into Y (stride 0 along broadcast axes), then accumulate with beta.
    Shape cs = c.shape();
    while (cs.size() < 2) cs.insert(cs.begin(), 1);
    StridedDesc d;
    d.rank = 2;
    d.numel = m * n;
    d.out_dims[0] = m;
    d.out_dims[1] = n;
    d.in_strides[0] = cs[0] == 1 ? 0 : cs[1];
    d.in_strides[1] = cs[1] == 1 ? 0 : 1;
    GPUOPT_RETURN_IF_ERROR(launch_strided_copy(dtype_size(dt), c.raw(), y.raw(), d, k.ctx.stream));
    GPUOPT_RETURN_IF_ERROR(matmul(k.ctx, {m, n, kk, 1, ta, tb, 0, 0, 0}, dt, a.raw(), b.raw(), y.raw(), alpha, beta));
    return activate();
  }
  GPUOPT_RETURN_IF_ERROR(matmul(k.ctx, {m, n, kk, 1, ta, tb, 0, 0, 0}, dt, a.raw(), b.raw(), y.raw(), alpha, 0.f));
  return activate();
}

bool matmul_types(const Node& n, const std::vector<DType>& in) {
  if (in.size() < 2 || in[0] != in[1]) return false;
  for (size_t i = 2; i < in.size(); ++i)
    if (in[i] != DType::Undefined && in[i] != in[0]) return false;
  return in[0] == DType::F32 || in[0] == DType::F16 || in[0] == DType::BF16;
}

}  // namespace

GPUOPT_CUDA_OP(MatMul, &run_matmul, &matmul_types);
GPUOPT_CUDA_OP(Gemm, &run_gemm, &matmul_types);
GPUOPT_CUDA_OP(FusedGemm, &run_gemm, &matmul_types);

}  // namespace gpuopt::cuda
