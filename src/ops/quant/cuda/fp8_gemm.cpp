// Fp8Gemm (ai.gpuopt, written by the fp8 rewrite, passes/fp8.h) on the GPU: the activation
// quantized to e4m3 (fp8_gemm.cu), then cuBLASLt's FP8 tensor-core GEMM: e4m3 x e4m3, f32
// accumulation, alpha = a_scale * b_scale, output and bias in A's type (f16 or bf16) with the
// bias (and Relu) in the BIAS / RELU_BIAS epilogue. FP8 takes "TN" only: cuBLASLt's A is our
// [N, K] weight, transposed, and its B our row-major [M, K] activation, both K-major. Needs
// compute capability 8.9 or newer (Ada, Hopper) and K, N multiples of 16 (the rewrite writes
// nothing else). Plans are cached by device and shape, failures too.
#include "backends/cuda/cuda_ops.h"
#include "backends/cuda/device_memory.h"
#include "ops/quant/cuda/fp8_gemm.h"
#include "ops/quant/fp8_gemm_attrs.h"
#include "core/cuda_check.h"

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <map>
#include <memory>
#include <mutex>
#include <tuple>

namespace gpuopt::cuda {
namespace {

struct Fp8Key {
  int device;
  int64_t m, n, k;
  DType dt;
  bool bias;
  quant::Fp8GemmAttrs::Act act;
  size_t workspace;
  auto tie() const { return std::tie(device, m, n, k, dt, bias, act, workspace); }
  bool operator<(const Fp8Key& o) const { return tie() < o.tie(); }
};

struct Fp8Plan {
  Status status;  // a failed plan is kept with its reason
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr;
  cublasLtMatmulAlgo_t algo{};
  ~Fp8Plan() {
    if (la) cublasLtMatrixLayoutDestroy(la);
    if (lb) cublasLtMatrixLayoutDestroy(lb);
    if (lc) cublasLtMatrixLayoutDestroy(lc);
    if (op) cublasLtMatmulDescDestroy(op);
  }
};

std::mutex g_mu;
std::map<Fp8Key, std::unique_ptr<Fp8Plan>> g_plans;

// Column-major view of row-major Y[m, n] = Aq[m, k] . W[n, k]^T: Y^T[n, m] = W (col-major
// [k, n], transposed) times Aq^T (col-major [k, m]).
Status build(Fp8Plan* p, const Fp8Key& key, ExecContext& ctx) {
  const cudaDataType_t out = key.dt == DType::BF16 ? CUDA_R_16BF : CUDA_R_16F;
  GPUOPT_CHECK_CALL(cublasLtMatmulDescCreate(&p->op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t t = CUBLAS_OP_T, nn = CUBLAS_OP_N;
  GPUOPT_CHECK_CALL(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof(t)));
  GPUOPT_CHECK_CALL(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSB, &nn, sizeof(nn)));
  using Act = quant::Fp8GemmAttrs::Act;
  const bool relu = key.act == Act::kRelu, gelu = key.act == Act::kGelu || key.act == Act::kGeluTanh;
  if (key.bias || relu || gelu) {
    const cublasLtEpilogue_t e = key.bias ? (relu ? CUBLASLT_EPILOGUE_RELU_BIAS : gelu ? CUBLASLT_EPILOGUE_GELU_BIAS
                                                                                       : CUBLASLT_EPILOGUE_BIAS)
                                          : (relu ? CUBLASLT_EPILOGUE_RELU : CUBLASLT_EPILOGUE_GELU);
    GPUOPT_CHECK_CALL(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_EPILOGUE, &e, sizeof(e)));
    if (key.bias)
      GPUOPT_CHECK_CALL(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &out, sizeof(out)));
  }
  const auto u = [](int64_t v) { return static_cast<uint64_t>(v); };
  GPUOPT_CHECK_CALL(cublasLtMatrixLayoutCreate(&p->la, CUDA_R_8F_E4M3, u(key.k), u(key.n), key.k));
  GPUOPT_CHECK_CALL(cublasLtMatrixLayoutCreate(&p->lb, CUDA_R_8F_E4M3, u(key.k), u(key.m), key.k));
  GPUOPT_CHECK_CALL(cublasLtMatrixLayoutCreate(&p->lc, out, u(key.n), u(key.m), key.n));
  cublasLtMatmulPreference_t pref = nullptr;
  GPUOPT_CHECK_CALL(cublasLtMatmulPreferenceCreate(&pref));
  std::unique_ptr<std::remove_pointer_t<cublasLtMatmulPreference_t>, decltype(&cublasLtMatmulPreferenceDestroy)> guard(
      pref, &cublasLtMatmulPreferenceDestroy);
  const size_t ws = key.workspace;
  GPUOPT_CHECK_CALL(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
  cublasLtMatmulHeuristicResult_t res{};
  int found = 0;
  const cublasStatus_t st =
      cublasLtMatmulAlgoGetHeuristic(ctx.lt, p->op, p->la, p->lb, p->lc, p->lc, pref, 1, &res, &found);
  if (st != CUBLAS_STATUS_SUCCESS || found == 0)
    return Status::Unimplemented("cuBLASLt has no FP8 algorithm for m={} n={} k={} ({} out): {}", key.m, key.n, key.k,
                                 dtype_name(key.dt), cublasLtGetStatusString(st));
  p->algo = res.algo;
  return Status::Ok();
}

// FP8 tensor cores: compute capability 8.9 (Ada) or 9.0+ (Hopper), asked once per device.
Status check_fp8_device(int device) {
  static std::mutex mu;
  static std::map<int, int> cc;
  std::lock_guard<std::mutex> lock(mu);
  auto it = cc.find(device);
  if (it == cc.end()) {
    int major = 0, minor = 0;
    GPUOPT_CHECK_CALL(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
    GPUOPT_CHECK_CALL(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
    it = cc.emplace(device, major * 10 + minor).first;
  }
  if (it->second < 89)
    return Status::Unimplemented("Fp8Gemm needs FP8 tensor cores (compute capability 8.9 or newer); cuda:{} is {}.{}",
                                 device, it->second / 10, it->second % 10);
  return Status::Ok();
}

Status run_fp8_gemm(CudaKernelContext& k) {
  GPUOPT_ASSIGN_OR_RETURN(const quant::Fp8GemmAttrs at, quant::Fp8GemmAttrs::read(k));
  const Tensor& a = k.in(0);
  const Tensor& w = k.in(1);
  if (w.rank() != 2) return k.error("B {} must have rank 2 ([N, K])", w.describe());
  const int64_t n = w.dim(0), kk = w.dim(1);
  if (a.rank() < 1 || a.dim(-1) != kk) return k.error("A {} does not end in K = {}", a.describe(), kk);
  if (kk % 16 != 0 || n % 16 != 0) return k.error("K = {} and N = {} must be multiples of 16 for FP8", kk, n);
  const bool bias = k.has_input(2) && k.inputs[2];
  if (bias && k.in(2).numel() != n) return k.error("bias has {} values; expected {}", k.in(2).numel(), n);
  const int64_t m = a.numel() / kk;
  Tensor& y = k.out(0);
  if (m == 0 || n == 0) return Status::Ok();
  GPUOPT_RETURN_IF_ERROR(check_fp8_device(k.ctx.device));
  // The e4m3 activation: the front of the context's workspace when it leaves cuBLASLt at least
  // 1 MiB, else a pool allocation freed after the GEMM is queued (stream-ordered).
  const size_t q_bytes = (static_cast<size_t>(m * kk) + 255) / 256 * 256;
  Tensor hold;
  uint8_t* aq = nullptr;
  void* ws = k.ctx.workspace;
  size_t ws_bytes = k.ctx.workspace_bytes;
  if (q_bytes + (size_t{1} << 20) <= ws_bytes) {
    aq = static_cast<uint8_t*>(ws);
    ws = static_cast<char*>(ws) + q_bytes;
    ws_bytes -= q_bytes;
  } else if (k.ctx.memory) {
    GPUOPT_ASSIGN_OR_RETURN(hold, k.ctx.memory->alloc(DType::U8, Shape{m, kk}, k.ctx.stream, "fp8 activation"));
    aq = hold.data<uint8_t>();
  } else {
    return k.error("{} bytes of e4m3 activation do not fit the workspace", q_bytes);
  }
  GPUOPT_RETURN_IF_ERROR(launch_fp8_quantize(a.dtype(), a.raw(), a.numel(), at.a_scale, aq, k.ctx.stream));
  const Fp8Key key{k.ctx.device, m, n, kk, y.dtype(), bias, at.act, ws_bytes};
  const float alpha = at.a_scale * at.b_scale, beta = 0.f;
  std::lock_guard<std::mutex> lock(g_mu);  // the bias pointer is set on the shared descriptor
  auto& slot = g_plans[key];
  if (!slot) {
    slot = std::make_unique<Fp8Plan>();
    slot->status = build(slot.get(), key, k.ctx);
  }
  GPUOPT_RETURN_IF_ERROR(slot->status);
  if (bias) {
    const void* bp = k.in(2).raw();
    GPUOPT_CHECK_CALL(cublasLtMatmulDescSetAttribute(slot->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bp, sizeof(bp)));
  }
  GPUOPT_CHECK_CALL(cublasLtMatmul(k.ctx.lt, slot->op, &alpha, w.raw(), slot->la, aq, slot->lb, &beta, y.raw(), slot->lc,
                                   y.raw(), slot->lc, &slot->algo, ws, ws_bytes, k.ctx.stream));
  return Status::Ok();
}

bool fp8_gemm_supported(const Node& node, const std::vector<DType>& in) {
  if (in.size() < 2 || (in[0] != DType::F16 && in[0] != DType::BF16) || in[1] != DType::U8) return false;
  if (in.size() > 2 && in[2] != DType::Undefined && in[2] != in[0]) return false;
  const std::string act = node.attr_s("activation", "");
  return act.empty() || act == "Relu" || act == "Gelu";
}

}  // namespace

GPUOPT_CUDA_OP(Fp8Gemm, &run_fp8_gemm, &fp8_gemm_supported);

}  // namespace gpuopt::cuda
