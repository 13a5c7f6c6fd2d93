#include "ops/matmul/cuda/matmul_lt.h"
#include "ops/matmul/cuda/lt_tune.h"

#include "core/cuda_check.h"

#include <cublasLt.h>
#include <cuda_runtime.h>
#include <fmt/format.h>

#include <map>
#include <memory>
#include <mutex>
#include <tuple>

namespace gpuopt::cuda {
namespace {

struct PlanKey {
  int device;  // plans are chosen for one GPU
  MatmulShape s;
  DType dt;
  Epilogue epi;
  bool has_beta;
  bool separate_c;  // beta's C is read from its own buffer, not from the output: timing may run
  size_t workspace;
  int candidates;  // lt::candidates(ctx): the session's GPUOPT_MATMUL_AUTOTUNE / _CANDIDATES
  auto tie() const {
    return std::tie(device, s.m, s.n, s.k, s.batch, s.trans_a, s.trans_b, s.stride_a, s.stride_b, s.stride_c, dt, epi, has_beta,
                    separate_c, workspace, candidates);
  }
  bool operator<(const PlanKey& o) const { return tie() < o.tie(); }
};

struct Plan {
  Status status;  // a failed plan is cached with its reason
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr;
  lt::AlgoChoice choice;  // the algorithm, and candidates to time on the first eager run (lt_tune.h)
  ~Plan() {
    if (la) cublasLtMatrixLayoutDestroy(la);
    if (lb) cublasLtMatrixLayoutDestroy(lb);
    if (lc) cublasLtMatrixLayoutDestroy(lc);
    if (op) cublasLtMatmulDescDestroy(op);
  }
};

std::mutex g_mu;
std::map<PlanKey, std::unique_ptr<Plan>> g_plans;
size_t g_built = 0;

cudaDataType_t cuda_type(DType dt) {
  switch (dt) {
    case DType::F16: return CUDA_R_16F;
    case DType::BF16: return CUDA_R_16BF;
    default: return CUDA_R_32F;
  }
}

Status layout(cublasLtMatrixLayout_t* l, cudaDataType_t t, int64_t rows, int64_t cols, int64_t ld, int64_t batch,
              int64_t stride) {
  GPUOPT_CHECK_CALL(cublasLtMatrixLayoutCreate(l, t, static_cast<uint64_t>(rows), static_cast<uint64_t>(cols), ld));
  if (batch > 1) {
    int32_t b = static_cast<int32_t>(batch);
    GPUOPT_CHECK_CALL(cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &b, sizeof(b)));
    GPUOPT_CHECK_CALL(cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof(stride)));
  }
  return Status::Ok();
}

// The plan cache's key of a matmul plan (its value: the algorithm, lt_tune.h).
std::string entry_key(const PlanKey& k) {
  const MatmulShape& s = k.s;
  return fmt::format("matmul {},{},{},{},{},{},{},{},{},{},{},{},{}", s.m, s.n, s.k, s.batch, s.trans_a ? 1 : 0,
                     s.trans_b ? 1 : 0, s.stride_a, s.stride_b, s.stride_c, dtype_name(k.dt), static_cast<int>(k.epi),
                     k.has_beta ? 1 : 0, k.workspace);
}

// Column-major view: row-major C[m,n] = A[m,k] B[k,n]  <=>  C^T[n,m] = B^T[n,k] A^T[k,m], so
// cuBLASLt's "A" is our B and its "B" is our A, with m and n swapped.
Status build(Plan* p, const PlanKey& key, ExecContext& ctx, const void* bias) {
  const MatmulShape& s = key.s;
  const cudaDataType_t t = cuda_type(key.dt);
  const cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  GPUOPT_CHECK_CALL(cublasLtMatmulDescCreate(&p->op, compute, CUDA_R_32F));
  const cublasOperation_t op_first = s.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;   // our B
  const cublasOperation_t op_second = s.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;  // our A
  GPUOPT_CHECK_CALL(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSA, &op_first, sizeof(op_first)));
  GPUOPT_CHECK_CALL(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSB, &op_second, sizeof(op_second)));
  if (key.epi != Epilogue::kNone) {
    const cublasLtEpilogue_t e = key.epi == Epilogue::kBias       ? CUBLASLT_EPILOGUE_BIAS
                                 : key.epi == Epilogue::kBiasRelu ? CUBLASLT_EPILOGUE_RELU_BIAS
                                                                  : CUBLASLT_EPILOGUE_GELU_BIAS;
    GPUOPT_CHECK_CALL(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_EPILOGUE, &e, sizeof(e)));
    const cudaDataType_t bt = t;
    GPUOPT_CHECK_CALL(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, sizeof(bt)));
    GPUOPT_CHECK_CALL(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
  }
  // Our B: row-major [k,n] = col-major [n,k] (ld n); transposed storage [n,k] = col-major [k,n] (ld k).
  GPUOPT_RETURN_IF_ERROR(layout(&p->la, t, s.trans_b ? s.k : s.n, s.trans_b ? s.n : s.k, s.trans_b ? s.k : s.n, s.batch, s.stride_b));
  GPUOPT_RETURN_IF_ERROR(layout(&p->lb, t, s.trans_a ? s.m : s.k, s.trans_a ? s.k : s.m, s.trans_a ? s.m : s.k, s.batch, s.stride_a));
  GPUOPT_RETURN_IF_ERROR(layout(&p->lc, t, s.n, s.m, s.n, s.batch, s.stride_c));
  // Timing writes the output again and again: with beta != 0 only where C is read from elsewhere.
  return lt::choose(ctx, {p->op, p->la, p->lb, p->lc, p->lc}, key.workspace, entry_key(key),
                    !key.has_beta || key.separate_c,
                    fmt::format("{} matmul m={} n={} k={} batch={}", dtype_name(key.dt), s.m, s.n, s.k, s.batch), &p->choice);
}

// Times the plan's candidates on this call's own buffers (beta is 0 or C is its own buffer, so the
// output is only written) and
// keeps the fastest: cuBLASLt's first heuristic answer is not always its fastest kernel for the
// shape. Called with g_mu held.
void tune(Plan* p, const PlanKey& key, ExecContext& ctx, const void* a, const void* b, const void* c_in, void* c, float alpha,
          float beta) {
  auto launch = [&](const cublasLtMatmulAlgo_t& algo) {
    return cublasLtMatmul(ctx.lt, p->op, &alpha, b, p->la, a, p->lb, &beta, c_in, p->lc, c, p->lc, &algo, ctx.workspace,
                          ctx.workspace_bytes, ctx.stream) == CUBLAS_STATUS_SUCCESS;
  };
  lt::tune(&p->choice, ctx, entry_key(key), launch,
           fmt::format("{} m={} n={} k={} batch={}", dtype_name(key.dt), key.s.m, key.s.n, key.s.k, key.s.batch));
}

}  // namespace

size_t matmul_plans_built() {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_built;
}

Status matmul(ExecContext& ctx, const MatmulShape& s, DType dt, const void* a, const void* b, void* c, float alpha,
              float beta, const void* bias, Epilogue epilogue, const void* c_in) {
  if (s.m == 0 || s.n == 0 || s.batch == 0) return Status::Ok();
  if (dt != DType::F32 && dt != DType::F16 && dt != DType::BF16)
    return Status::Unimplemented("CUDA matmul does not support dtype {}", dtype_name(dt));
  if (!c_in) c_in = c;
  const PlanKey key{ctx.device, s, dt, epilogue, beta != 0.f, beta != 0.f && c_in != c, ctx.workspace_bytes,
                    lt::candidates(ctx)};
  Plan* plan;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    auto& slot = g_plans[key];
    if (!slot) {
      slot = std::make_unique<Plan>();
      slot->status = build(slot.get(), key, ctx, bias);
      ++g_built;
    }
    plan = slot.get();
  }
  GPUOPT_RETURN_IF_ERROR(plan->status);
  if (epilogue != Epilogue::kNone)  // the pointer changes per call; the plan's descriptor is shared, so set under lock
  {
    std::lock_guard<std::mutex> lock(g_mu);
    GPUOPT_CHECK_CALL(cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
    if (plan->choice.pending.load()) tune(plan, key, ctx, a, b, c_in, c, alpha, beta);
    GPUOPT_CHECK_CALL(cublasLtMatmul(ctx.lt, plan->op, &alpha, b, plan->la, a, plan->lb, &beta, c_in, plan->lc, c, plan->lc,
                                     &plan->choice.algo, ctx.workspace, ctx.workspace_bytes, ctx.stream));
    return Status::Ok();
  }
  if (plan->choice.pending.load()) {
    std::lock_guard<std::mutex> lock(g_mu);
    tune(plan, key, ctx, a, b, c_in, c, alpha, beta);
  }
  GPUOPT_CHECK_CALL(cublasLtMatmul(ctx.lt, plan->op, &alpha, b, plan->la, a, plan->lb, &beta, c_in, plan->lc, c, plan->lc,
                                   &plan->choice.algo, ctx.workspace, ctx.workspace_bytes, ctx.stream));
  return Status::Ok();
}

}  // namespace gpuopt::cuda
