#include "llm/cuda/quant_gemm.h"

#include <algorithm>

namespace gpuopt::llm::cuda {

Status quant_linear(LtGemm& lt, const void* x, const QuantWeightArgs& w, const void* bias, void* y, int64_t T,
                    int64_t N, int64_t K, DType dt, void* scratch, cudaStream_t stream,
                    const GemvSplitScratch* split) {
  if (T == 0) return Status::Ok();
  if (!gemv_quant_supported(w, 1, N, K, dt))
    return Status::Unimplemented("no quantized kernel for a {}x{} int{} weight in {}", N, K, w.bits, dtype_name(dt));
  if (T <= kQuantGemvMaxTokens) {
    gemv_quant(x, w, bias, y, T, N, K, dt, stream, split);
    GPUOPT_CUDA_RETURN(cudaGetLastError());
    return Status::Ok();
  }
  if (T <= kQuantMmaMaxTokens && quant_gemv_default_kernel() == QuantGemvKernel::Mma &&
      gemv_quant_mma_runs(w, kQuantGemvMaxTokens, N, K, dt, split)) {
    const int64_t es = static_cast<int64_t>(dtype_size(dt));
    for (int64_t t0 = 0; t0 < T; t0 += kQuantGemvMaxTokens) {
      const int64_t n = std::min<int64_t>(kQuantGemvMaxTokens, T - t0);
      gemv_quant(static_cast<const char*>(x) + t0 * K * es, w, bias, static_cast<char*>(y) + t0 * N * es, n, N, K, dt,
                 stream, split, QuantGemvKernel::Mma);
    }
    GPUOPT_CUDA_RETURN(cudaGetLastError());
    return Status::Ok();
  }
  if (!scratch) return Status::InvalidArgument("a {}-token quantized product needs a dequantization scratch", T);
  dequantize_weight(w, scratch, N, K, dt, stream);
  GPUOPT_CUDA_RETURN(cudaGetLastError());
  return lt.linear(x, scratch, bias, y, T, N, K, dt, dt, stream);
}

Fp8Gemm::~Fp8Gemm() {
  for (auto& [k, p] : plans_) {
    if (p.a) cublasLtMatrixLayoutDestroy(p.a);
    if (p.b) cublasLtMatrixLayoutDestroy(p.b);
    if (p.c) cublasLtMatrixLayoutDestroy(p.c);
    if (p.desc) cublasLtMatmulDescDestroy(p.desc);
  }
  if (handle_) cublasLtDestroy(handle_);
}

Status Fp8Gemm::init(size_t workspace_bytes) {
  GPUOPT_CUBLAS_RETURN(cublasLtCreate(&handle_));
  return workspace_.allocate(workspace_bytes, "the FP8 GEMM workspace");
}

bool Fp8Gemm::supported(const Fp8LinearArgs& a) {
  auto al = [](const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; };
  return (a.dt == DType::F16 || a.dt == DType::BF16) && a.T >= 1 && a.N % 16 == 0 && a.K % 16 == 0 && a.N > 0 &&
         a.K > 0 && a.x && a.w && a.w_scale && a.y && a.xq && a.row_scale && a.acc && al(a.w) && al(a.xq) &&
         al(a.acc);
}

Result<Fp8Gemm::Plan*> Fp8Gemm::plan_for(int64_t T, int64_t N, int64_t K) {
  const auto key = std::make_tuple(T, N, K);
  auto it = plans_.find(key);
  if (it != plans_.end()) return &it->second;
  Plan& p = plans_[key];
  GPUOPT_CUBLAS_RETURN(cublasLtMatmulDescCreate(&p.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  // Column-major view of the row-major product, as LtGemm: y^T[N, T] = W[N, K] · x^T — the "TN"
  // form cuBLASLt requires for FP8.
  const cublasOperation_t opT = CUBLAS_OP_T, opN = CUBLAS_OP_N;
  GPUOPT_CUBLAS_RETURN(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, &opT, sizeof(opT)));
  GPUOPT_CUBLAS_RETURN(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, &opN, sizeof(opN)));
  GPUOPT_CUBLAS_RETURN(cublasLtMatrixLayoutCreate(&p.a, CUDA_R_8F_E4M3, K, N, K));
  GPUOPT_CUBLAS_RETURN(cublasLtMatrixLayoutCreate(&p.b, CUDA_R_8F_E4M3, K, T, K));
  cublasLtMatmulPreference_t pref = nullptr;
  GPUOPT_CUBLAS_RETURN(cublasLtMatmulPreferenceCreate(&pref));
  const size_t ws = workspace_.bytes();
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws));
  cublasLtMatmulHeuristicResult_t r{};
  int found = 0;
  // f32 products first (no rounding before the scales); bf16 where f32 output is not offered.
  for (DType acc : {DType::F32, DType::BF16}) {
    if (p.c) cublasLtMatrixLayoutDestroy(p.c);
    p.c = nullptr;
    GPUOPT_CUBLAS_RETURN(cublasLtMatrixLayoutCreate(&p.c, acc == DType::F32 ? CUDA_R_32F : CUDA_R_16BF, N, T, N));
    if (cublasLtMatmulAlgoGetHeuristic(handle_, p.desc, p.a, p.b, p.c, p.c, pref, 1, &r, &found) ==
            CUBLAS_STATUS_SUCCESS &&
        found > 0) {
      p.acc_dt = acc;
      break;
    }
    found = 0;
  }
  cublasLtMatmulPreferenceDestroy(pref);
  if (found == 0) {
    if (p.a) cublasLtMatrixLayoutDestroy(p.a);
    if (p.b) cublasLtMatrixLayoutDestroy(p.b);
    if (p.c) cublasLtMatrixLayoutDestroy(p.c);
    cublasLtMatmulDescDestroy(p.desc);
    plans_.erase(key);
    return Status::Unimplemented("cuBLASLt has no FP8 algorithm for a {}x{}x{} product (needs sm_89+)", T, N, K);
  }
  p.algo = r.algo;
  return &p;
}

Status Fp8Gemm::linear(const Fp8LinearArgs& a, cudaStream_t stream) {
  if (!supported(a)) return Status::Unimplemented("FP8 product {}x{}x{}: N and K must be multiples of 16", a.T, a.N, a.K);
  fp8_quantize_rows(a.x, a.T, a.K, a.dt, a.input_scale, a.xq, a.row_scale, stream);
  GPUOPT_CUDA_RETURN(cudaGetLastError());
  GPUOPT_ASSIGN_OR_RETURN(Plan * p, plan_for(a.T, a.N, a.K));
  const float alpha = 1.0f, beta = 0.0f;
  GPUOPT_CUBLAS_RETURN(cublasLtMatmul(handle_, p->desc, &alpha, a.w, p->a, a.xq, p->b, &beta, a.acc, p->c, a.acc, p->c,
                                      &p->algo, workspace_.get(), workspace_.bytes(), stream));
  fp8_scale_output(a.acc, p->acc_dt, a.row_scale, a.w_scale, a.per_channel, a.bias, a.y, a.T, a.N, a.dt, stream);
  GPUOPT_CUDA_RETURN(cudaGetLastError());
  return Status::Ok();
}

Status fp8_linear(Fp8Gemm& f8, const Fp8LinearArgs& a, const GemvSplitScratch* split, cudaStream_t stream) {
  if (a.T == 0) return Status::Ok();
  if (a.T <= kFp8GemvMaxTokens && a.w_scale && a.y && gemv_fp8_supported(a.x, a.w, a.T, a.N, a.K, a.dt)) {
    gemv_fp8(a.x, a.w, a.w_scale, a.per_channel, a.bias, a.y, a.T, a.N, a.K, a.dt, stream, split);
    GPUOPT_CUDA_RETURN(cudaGetLastError());
    return Status::Ok();
  }
  return f8.linear(a, stream);
}

}  // namespace gpuopt::llm::cuda
