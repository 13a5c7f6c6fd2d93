// Int8Gemm (ai.gpuopt, written by the fold_qdq pass) on the GPU: cuBLASLt int8 tensor-core GEMM
// with int32 accumulation into a scratch buffer, then the dequantize/bias/Relu epilogue
// (kernels/int8_gemm.cu). cuBLASLt's int8 kernels take "TN" (A transposed: our [N, K] weight)
// with K and N multiples of 4; other shapes, or no algorithm, use the simple kernel. Plans are
// cached by device and shape, failures too; each plan's algorithm is the fastest of cuBLASLt's
// candidates, timed on the shape's first eager call and kept in the plan cache
// (ops/matmul/cuda/lt_tune.h, GPUOPT_MATMUL_AUTOTUNE as the float GEMMs). The epilogue also
// takes fuse_int8_epilogue's parts: Gelu, the residual and the int8 output (y_scale).
#include "backends/cuda/cuda_ops.h"
#include "backends/cuda/device_memory.h"
#include "ops/matmul/cuda/lt_tune.h"
#include "ops/quant/cuda/int8_gemm.h"
#include "ops/quant/int8_gemm_attrs.h"
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

struct Int8Plan {
  bool ok = false;
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr;
  lt::AlgoChoice choice;  // the algorithm, timed among the heuristic's candidates (lt_tune.h)
  ~Int8Plan() {
    if (la) cublasLtMatrixLayoutDestroy(la);
    if (lb) cublasLtMatrixLayoutDestroy(lb);
    if (lc) cublasLtMatrixLayoutDestroy(lc);
    if (op) cublasLtMatmulDescDestroy(op);
  }
};

std::mutex g_mu;
std::map<std::tuple<int, int64_t, int64_t, int64_t, size_t>, std::unique_ptr<Int8Plan>> g_plans;

std::string entry_key(int64_t m, int64_t n, int64_t k, size_t ws) { return fmt::format("int8gemm {},{},{},{}", m, n, k, ws); }

// Column-major view of row-major acc[m, n] = A[m, k] . W[n, k]^T: acc^T[n, m] = W (as col-major
// [k, n], transposed) times A^T (col-major [k, m]).
Status build(Int8Plan* p, ExecContext& ctx, int64_t m, int64_t n, int64_t k, size_t ws) {
  GPUOPT_CHECK_CALL(cublasLtMatmulDescCreate(&p->op, CUBLAS_COMPUTE_32I, CUDA_R_32I));
  const cublasOperation_t t = CUBLAS_OP_T, nn = CUBLAS_OP_N;
  GPUOPT_CHECK_CALL(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof(t)));
  GPUOPT_CHECK_CALL(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSB, &nn, sizeof(nn)));
  GPUOPT_CHECK_CALL(cublasLtMatrixLayoutCreate(&p->la, CUDA_R_8I, static_cast<uint64_t>(k), static_cast<uint64_t>(n), k));
  GPUOPT_CHECK_CALL(cublasLtMatrixLayoutCreate(&p->lb, CUDA_R_8I, static_cast<uint64_t>(k), static_cast<uint64_t>(m), k));
  GPUOPT_CHECK_CALL(cublasLtMatrixLayoutCreate(&p->lc, CUDA_R_32I, static_cast<uint64_t>(n), static_cast<uint64_t>(m), n));
  // No algorithm: p->ok stays false, and the simple kernel runs.
  p->ok = lt::choose(ctx, {p->op, p->la, p->lb, p->lc, p->lc}, ws, entry_key(m, n, k, ws), true,
                     fmt::format("int8 m={} n={} k={}", m, n, k), &p->choice)
              .ok();
  return Status::Ok();
}

Status run_int8_gemm(CudaKernelContext& k) {
  GPUOPT_ASSIGN_OR_RETURN(const quant::Int8GemmAttrs at, quant::Int8GemmAttrs::read(k));
  const Tensor& a = k.in(0);
  const Tensor& w = k.in(1);
  if (w.rank() != 2) return k.error("B {} must have rank 2 ([N, K])", w.describe());
  const int64_t n = w.dim(0), kk = w.dim(1);
  if (a.rank() < 1 || a.dim(-1) != kk) return k.error("A {} does not end in K = {}", a.describe(), kk);
  const int64_t m = a.numel() / std::max<int64_t>(kk, 1);
  const Tensor& bs = k.in(3);
  if (bs.numel() != 1 && bs.numel() != n) return k.error("b_scale has {} values; expected 1 or {}", bs.numel(), n);
  if (at.residual && k.in(5).numel() != m * n)
    return k.error("residual {} does not have the output's {} values", k.in(5).describe(), m * n);
  Tensor& y = k.out(0);
  if (m == 0 || n == 0) return Status::Ok();
  // The int32 accumulators: the front of the context's workspace when they leave cuBLASLt at
  // least 1 MiB of it, else a pool allocation held until the launches are queued.
  const size_t acc_bytes = (static_cast<size_t>(m * n) * sizeof(int32_t) + 255) / 256 * 256;
  Tensor hold;
  int32_t* acc = nullptr;
  void* ws = k.ctx.workspace;
  size_t ws_bytes = k.ctx.workspace_bytes;
  if (acc_bytes + (size_t{1} << 20) <= ws_bytes) {
    acc = static_cast<int32_t*>(ws);
    ws = static_cast<char*>(ws) + acc_bytes;
    ws_bytes -= acc_bytes;
  } else if (k.ctx.memory) {
    GPUOPT_ASSIGN_OR_RETURN(hold, k.ctx.memory->alloc(DType::I32, Shape{m, n}, k.ctx.stream, "int8 gemm accumulators"));
    acc = hold.data<int32_t>();
  } else {
    return k.error("{} bytes of int32 accumulators do not fit the workspace", acc_bytes);
  }
  Int8Plan* plan = nullptr;
  if (kk % 4 == 0 && n % 4 == 0) {
    std::lock_guard<std::mutex> lock(g_mu);
    auto& slot = g_plans[{k.ctx.device, m, n, kk, ws_bytes}];
    if (!slot) {
      slot = std::make_unique<Int8Plan>();
      GPUOPT_RETURN_IF_ERROR(build(slot.get(), k.ctx, m, n, kk, ws_bytes));
    }
    plan = slot.get();
  }
  if (plan && plan->ok) {
    const int32_t alpha = 1, beta = 0;
    auto run = [&](const cublasLtMatmulAlgo_t& algo) {
      return cublasLtMatmul(k.ctx.lt, plan->op, &alpha, w.raw(), plan->la, a.raw(), plan->lb, &beta, acc, plan->lc, acc,
                            plan->lc, &algo, ws, ws_bytes, k.ctx.stream);
    };
    cublasLtMatmulAlgo_t algo;
    {
      std::lock_guard<std::mutex> lock(g_mu);
      if (plan->choice.pending.load())  // the first eager call times the candidates (into acc, written again below)
        lt::tune(&plan->choice, k.ctx, entry_key(m, n, kk, ws_bytes),
                 [&](const cublasLtMatmulAlgo_t& c) { return run(c) == CUBLAS_STATUS_SUCCESS; },
                 fmt::format("int8 m={} n={} k={}", m, n, kk));
      algo = plan->choice.algo;
    }
    GPUOPT_CHECK_CALL(run(algo));
  } else {
    GPUOPT_RETURN_IF_ERROR(launch_int8_gemm_simple(m, n, kk, a.data<int8_t>(), w.data<int8_t>(), acc, k.ctx.stream));
  }
  Int8Epilogue e;
  e.m = m;
  e.n = n;
  e.dt = k.in(2).dtype();
  e.a_scale = k.in(2).raw();
  e.b_scale = bs.raw();
  e.b_per_channel = bs.numel() == n && n != 1;
  e.bias = at.bias ? k.in(4).raw() : nullptr;
  e.act = at.act;
  e.residual = at.residual ? k.in(5).raw() : nullptr;
  e.y_scale = at.int8_out ? k.in(6).raw() : nullptr;
  return launch_int8_epilogue(e, acc, y.raw(), k.ctx.stream);
}

bool int8_gemm_supported(const Node& node, const std::vector<DType>& in) {
  if (in.size() < 4 || in[0] != DType::I8 || in[1] != DType::I8) return false;
  if (in[2] != DType::F32 && in[2] != DType::F16) return false;
  for (size_t i = 3; i < in.size() && i < 7; ++i)  // b_scale, bias, residual, y_scale: the scales' type
    if (in[i] != in[2] && (i == 3 || in[i] != DType::Undefined)) return false;
  const std::string act = node.attr_s("activation", "");
  return act.empty() || act == "Relu" || act == "Gelu";
}

}  // namespace

GPUOPT_CUDA_OP(Int8Gemm, &run_int8_gemm, &int8_gemm_supported);

}  // namespace gpuopt::cuda
