// Fp8Gemm (ai.gpuopt, written by the fp8 rewrite, passes/fp8.h) on the GPU: the activation
// quantized to e4m3 (fp8_gemm.cu), then cuBLASLt's FP8 tensor-core GEMM: e4m3 x e4m3, f32
// accumulation, alpha = a_scale * b_scale, output and bias in A's type (f16 or bf16) with the
// bias (and Relu) in the BIAS / RELU_BIAS epilogue. FP8 takes "TN" only: cuBLASLt's A is our
// [N, K] weight, transposed, and its B our row-major [M, K] activation, both K-major. Needs
// compute capability 8.9 or newer (Ada, Hopper) and K, N multiples of 16 (the rewrite writes
// nothing else). Plans are cached by device and shape, failures too; each plan's algorithm is
// the fastest of cuBLASLt's candidates, timed on the shape's first eager call and kept in the plan
// cache (ops/matmul/cuda/lt_tune.h, GPUOPT_MATMUL_AUTOTUNE as the float GEMMs).
// GPUOPT_FP8_FAST_ACCUM=1 turns on cuBLASLt's fast FP8 accumulation (an A/B switch, off).
//
// Shared and chained (passes/fp8.h): an optional second output receives the e4m3 A (siblings
// reading the same activation take it as their A); an e4m3 (u8) A is read as it is, and a u8
// output is cuBLASLt's e4m3 D with D scale 1 / y_scale (a device float written by a one-thread
// kernel into the workspace, so a captured graph replays it), C typed as the bias, null and never
// read (beta 0). Where cuBLASLt has no such algorithm with f16 C and bias, the same with bf16 C and a
// bf16 copy of the bias; where neither runs, the GEMM writes f16/bf16 into a scratch buffer and
// the quantize kernel makes the e4m3 output (same numbers, one more pass). Which form each shape
// got is logged once at GPUOPT_LOG_LEVEL=info.
#include "backends/cuda/cuda_ops.h"
#include "backends/cuda/device_memory.h"
#include "ops/matmul/cuda/lt_tune.h"
#include "ops/quant/cuda/fp8_gemm.h"
#include "ops/quant/fp8_gemm_attrs.h"
#include "core/cuda_check.h"
#include "core/log.h"
#include "gpuopt/kernel_settings.h"

#include <cublasLt.h>
#include <cuda_runtime.h>
#include <fmt/format.h>

#include <map>
#include <memory>
#include <mutex>
#include <tuple>

namespace gpuopt::cuda {
namespace {

using Act = quant::Fp8GemmAttrs::Act;

struct Fp8Key {
  int device;
  int64_t m, n, k;
  DType ft;       // the float type: bias, C, and D unless fp8_out (bf16 for an f16 node's e4m3-D retry)
  bool fp8_out;   // D is e4m3
  bool bias;
  Act act;
  size_t workspace;
  bool fast_accum;  // GPUOPT_FP8_FAST_ACCUM (the session's KernelSettings)
  auto tie() const { return std::tie(device, m, n, k, ft, fp8_out, bias, act, workspace, fast_accum); }
  bool operator<(const Fp8Key& o) const { return tie() < o.tie(); }
};

struct Fp8Plan {
  Status status;  // a failed plan is kept with its reason
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr, ld = nullptr;
  lt::AlgoChoice choice;  // the algorithm, timed among the heuristic's candidates (lt_tune.h)
  bool logged = false;  // which e4m3-D form ran (or that none did) was logged
  ~Fp8Plan() {
    if (la) cublasLtMatrixLayoutDestroy(la);
    if (lb) cublasLtMatrixLayoutDestroy(lb);
    if (lc) cublasLtMatrixLayoutDestroy(lc);
    if (ld) cublasLtMatrixLayoutDestroy(ld);
    if (op) cublasLtMatmulDescDestroy(op);
  }
};

std::mutex g_mu;
std::map<Fp8Key, std::unique_ptr<Fp8Plan>> g_plans;

// GPUOPT_FP8_FAST_ACCUM=1 (Fp8Key::fast_accum): cuBLASLt's fast accumulation for FP8
// (CUBLASLT_MATMUL_DESC_FAST_ACCUM: the tensor cores' partial sums are not promoted to full f32
// every few K steps). Off by default.

// GPUOPT_FP8_E4M3_OUT (an A/B and test switch for the e4m3-output forms below, the context's
// KernelSettings): "auto" (default) tries f16 C, then bf16 C, then the staged form; "bf16" starts
// at bf16 C; "staged" runs the staged form (f16 D and the quantize kernel) only.
using OutForm = KernelSettings::Fp8E4m3Out;

// The plan cache's key of an FP8 plan (its value: the algorithm).
std::string entry_key(const Fp8Key& k) {
  return fmt::format("fp8gemm {},{},{},{},{},{},{},{},{}", k.m, k.n, k.k, dtype_name(k.ft), k.fp8_out ? 1 : 0, k.bias ? 1 : 0,
                     static_cast<int>(k.act), k.workspace, k.fast_accum ? 1 : 0);
}

// Column-major view of row-major Y[m, n] = Aq[m, k] . W[n, k]^T: Y^T[n, m] = W (col-major
// [k, n], transposed) times Aq^T (col-major [k, m]).
Status build(Fp8Plan* p, const Fp8Key& key, ExecContext& ctx, const float* d_scale) {
  const cudaDataType_t ft = key.ft == DType::BF16 ? CUDA_R_16BF : CUDA_R_16F;
  GPUOPT_CHECK_CALL(cublasLtMatmulDescCreate(&p->op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t t = CUBLAS_OP_T, nn = CUBLAS_OP_N;
  GPUOPT_CHECK_CALL(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof(t)));
  GPUOPT_CHECK_CALL(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSB, &nn, sizeof(nn)));
  const bool relu = key.act == Act::kRelu, gelu = key.act == Act::kGelu || key.act == Act::kGeluTanh;
  if (key.bias || relu || gelu) {
    const cublasLtEpilogue_t e = key.bias ? (relu ? CUBLASLT_EPILOGUE_RELU_BIAS : gelu ? CUBLASLT_EPILOGUE_GELU_BIAS
                                                                                       : CUBLASLT_EPILOGUE_BIAS)
                                          : (relu ? CUBLASLT_EPILOGUE_RELU : CUBLASLT_EPILOGUE_GELU);
    GPUOPT_CHECK_CALL(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_EPILOGUE, &e, sizeof(e)));
    if (key.bias)
      GPUOPT_CHECK_CALL(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &ft, sizeof(ft)));
  }
  if (key.fast_accum) {
    const int8_t on = 1;
    GPUOPT_CHECK_CALL(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &on, sizeof(on)));
  }
  if (key.fp8_out)  // set again per call (the pointer is the caller's); here for the heuristic
    GPUOPT_CHECK_CALL(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_D_SCALE_POINTER, &d_scale, sizeof(d_scale)));
  const auto u = [](int64_t v) { return static_cast<uint64_t>(v); };
  GPUOPT_CHECK_CALL(cublasLtMatrixLayoutCreate(&p->la, CUDA_R_8F_E4M3, u(key.k), u(key.n), key.k));
  GPUOPT_CHECK_CALL(cublasLtMatrixLayoutCreate(&p->lb, CUDA_R_8F_E4M3, u(key.k), u(key.m), key.k));
  GPUOPT_CHECK_CALL(cublasLtMatrixLayoutCreate(&p->lc, ft, u(key.n), u(key.m), key.n));
  GPUOPT_CHECK_CALL(cublasLtMatrixLayoutCreate(&p->ld, key.fp8_out ? CUDA_R_8F_E4M3 : ft, u(key.n), u(key.m), key.n));
  return lt::choose(ctx, {p->op, p->la, p->lb, p->lc, p->ld}, key.workspace, entry_key(key), true,
                    fmt::format("FP8 m={} n={} k={} ({} out)", key.m, key.n, key.k, key.fp8_out ? "e4m3" : dtype_name(key.ft)),
                    &p->choice);
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

// Scratch for one call: slices of the context's workspace while they leave cuBLASLt at least
// 1 MiB, else pool allocations freed after the launches are queued (stream-ordered).
struct Scratch {
  CudaKernelContext& k;
  char* ws;
  size_t ws_bytes;
  std::vector<Tensor> hold;
  explicit Scratch(CudaKernelContext& kc) : k(kc), ws(static_cast<char*>(kc.ctx.workspace)), ws_bytes(kc.ctx.workspace_bytes) {}
  Result<void*> take(size_t bytes, const char* what) {
    bytes = (bytes + 255) / 256 * 256;
    if (bytes + (size_t{1} << 20) <= ws_bytes) {
      void* p = ws;
      ws += bytes;
      ws_bytes -= bytes;
      return p;
    }
    if (!k.ctx.memory) return k.error("{} bytes of {} do not fit the workspace", bytes, what);
    GPUOPT_ASSIGN_OR_RETURN(Tensor t, k.ctx.memory->alloc(DType::U8, Shape{static_cast<int64_t>(bytes)}, k.ctx.stream, what));
    hold.push_back(std::move(t));
    return hold.back().raw();
  }
};

Fp8Plan* plan_for(const Fp8Key& key, ExecContext& ctx, const float* d_scale) {  // under g_mu
  auto& slot = g_plans[key];
  if (!slot) {
    slot = std::make_unique<Fp8Plan>();
    slot->status = build(slot.get(), key, ctx, d_scale);
  }
  return slot.get();
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
  const bool a_fp8 = a.dtype() == DType::U8;
  if (a_fp8 && !bias) return k.error("an e4m3 (u8) A needs a bias");
  const int64_t m = a.numel() / kk;
  Tensor& y = k.out(0);
  if (m == 0 || n == 0) return Status::Ok();
  GPUOPT_RETURN_IF_ERROR(check_fp8_device(k.ctx.device));
  const DType ft = a_fp8 ? k.in(2).dtype() : a.dtype();
  const bool fp8_out = at.y_scale > 0;
  Scratch sc(k);
  float* d_scale = nullptr;
  if (fp8_out) {
    GPUOPT_ASSIGN_OR_RETURN(void* p, sc.take(sizeof(float), "the e4m3 output's scale"));
    d_scale = static_cast<float*>(p);
    GPUOPT_RETURN_IF_ERROR(launch_fp8_set_scalar(d_scale, 1.0f / at.y_scale, k.ctx.stream));
  }
  const void* aq = a.raw();
  if (!a_fp8) {  // into output 1 when the node has it (siblings read it), else scratch
    void* p = k.outputs.size() > 1 && k.outputs[1] ? k.out(1).raw() : nullptr;
    if (!p) {
      GPUOPT_ASSIGN_OR_RETURN(p, sc.take(static_cast<size_t>(m * kk), "e4m3 activation"));
    }
    GPUOPT_RETURN_IF_ERROR(launch_fp8_quantize(a.dtype(), a.raw(), a.numel(), at.a_scale, static_cast<uint8_t*>(p), k.ctx.stream));
    aq = p;
  }
  const float alpha = at.a_scale * at.b_scale, beta = 0.f;
  const void* bp = bias ? k.in(2).raw() : nullptr;
  std::lock_guard<std::mutex> lock(g_mu);  // the bias and scale pointers are set on the shared descriptor
  // Reserved before the plans are keyed: the fallbacks' scratch must not change the workspace
  // the direct plan was chosen for.
  const Fp8Key direct_key{k.ctx.device, m, n, kk, ft, fp8_out, bias, at.act, sc.ws_bytes, k.ctx.kernels().fp8_fast_accum};
  Fp8Plan* direct = plan_for(direct_key, k.ctx, d_scale);
  // A plan's algorithm, timed first among its candidates on the shape's first eager call (the
  // timing writes only D, which the real launch then writes again).
  auto launch = [&](Fp8Plan* p, const Fp8Key& key, void* d) -> cublasStatus_t {
    if (bias) cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bp, sizeof(bp));
    if (key.fp8_out) cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_D_SCALE_POINTER, &d_scale, sizeof(d_scale));
    // C, typed as the bias, is never read (beta 0): D's own buffer where the types agree, else
    // null, as PyTorch's scaled_mm passes it (cuBLASLt's in-place form, C == D, wants C's layout
    // to be D's: an f16 C on the e4m3 D buffer is the likely reason the e4m3 D never ran before).
    void* c = key.fp8_out ? nullptr : d;
    auto run = [&](const cublasLtMatmulAlgo_t& algo) {
      return cublasLtMatmul(k.ctx.lt, p->op, &alpha, w.raw(), p->la, aq, p->lb, &beta, c, p->lc, d, p->ld, &algo, sc.ws,
                            key.workspace, k.ctx.stream);
    };
    if (p->choice.pending.load())
      lt::tune(&p->choice, k.ctx, entry_key(key),
               [&](const cublasLtMatmulAlgo_t& algo) { return run(algo) == CUBLAS_STATUS_SUCCESS; },
               fmt::format("FP8 m={} n={} k={}{}", m, n, kk, key.fp8_out ? " (e4m3 out)" : ""));
    return run(p->choice.algo);
  };
  // A bf16 node's direct plan already has bf16 C: GPUOPT_FP8_E4M3_OUT=bf16 starts there.
  const OutForm asked = k.ctx.kernels().fp8_e4m3_out;
  const OutForm form = !fp8_out ? OutForm::kAuto : ft == DType::BF16 && asked == OutForm::kBf16 ? OutForm::kAuto : asked;
  if (direct->status.ok() && form == OutForm::kAuto) {
    const cublasStatus_t st = launch(direct, direct_key, y.raw());
    if (st == CUBLAS_STATUS_SUCCESS) return Status::Ok();
    if (!fp8_out) return k.error("cublasLtMatmul (FP8): {}", cublasLtGetStatusString(st));
    direct->status = Status::Unimplemented("cublasLtMatmul with an e4m3 D: {}", cublasLtGetStatusString(st));
  }
  if (!fp8_out) return direct->status;
  // An e4m3 D with f16 C and bias refused: the same with bf16 C (never read) and a bf16 copy of
  // the bias, the pairing cuBLASLt's FP8 tables list first (the bias rounded to bf16 moves an
  // output by at most 2^-9 of the bias, below the e4m3 step the output is rounded to next).
  Fp8Plan* alt = nullptr;
  if (ft == DType::F16 && form != OutForm::kStaged) {
    if (bias) {
      GPUOPT_ASSIGN_OR_RETURN(void* b16, sc.take(static_cast<size_t>(n) * 2, "bf16 bias"));
      GPUOPT_RETURN_IF_ERROR(launch_f16_to_bf16(bp, n, b16, k.ctx.stream));
      bp = b16;
    }
    Fp8Key alt_key = direct_key;
    alt_key.ft = DType::BF16;
    alt_key.workspace = sc.ws_bytes;
    alt = plan_for(alt_key, k.ctx, d_scale);
    if (alt->status.ok()) {
      const cublasStatus_t st = launch(alt, alt_key, y.raw());
      if (st == CUBLAS_STATUS_SUCCESS) {
        if (!alt->logged) {
          alt->logged = true;
          GPUOPT_LOG(info, "Fp8Gemm m={} n={} k={}: e4m3 output with bf16 C and bias ({})", m, n, kk, direct->status.message());
        }
        return Status::Ok();
      }
      alt->status = Status::Unimplemented("cublasLtMatmul with an e4m3 D and bf16 C: {}", cublasLtGetStatusString(st));
    }
    bp = bias ? k.in(2).raw() : nullptr;
  }
  // No e4m3 D here: f16/bf16 into scratch, then quantized by y_scale.
  if (!direct->logged && form == OutForm::kAuto) {
    direct->logged = true;
    GPUOPT_LOG(info, "Fp8Gemm m={} n={} k={}: no e4m3 output from cuBLASLt ({}{}); f16 output and a quantize pass instead", m,
               n, kk, direct->status.message(), alt ? "; " + alt->status.message() : std::string());
  }
  GPUOPT_ASSIGN_OR_RETURN(void* tmp, sc.take(static_cast<size_t>(m * n) * 2, "fp8 output staging"));
  Fp8Key wide_key = direct_key;
  wide_key.fp8_out = false;
  wide_key.workspace = sc.ws_bytes;
  Fp8Plan* wide = plan_for(wide_key, k.ctx, nullptr);
  GPUOPT_RETURN_IF_ERROR(wide->status);
  const cublasStatus_t st = launch(wide, wide_key, tmp);
  if (st != CUBLAS_STATUS_SUCCESS) return k.error("cublasLtMatmul (FP8): {}", cublasLtGetStatusString(st));
  return launch_fp8_quantize(ft, tmp, m * n, at.y_scale, y.data<uint8_t>(), k.ctx.stream);
}

bool fp8_gemm_supported(const Node& node, const std::vector<DType>& in) {
  if (in.size() < 2 || in[1] != DType::U8) return false;
  const bool half = in[0] == DType::F16 || in[0] == DType::BF16;
  const bool has_bias = in.size() > 2 && in[2] != DType::Undefined;
  if (in[0] == DType::U8) {
    if (!has_bias || (in[2] != DType::F16 && in[2] != DType::BF16)) return false;
  } else if (!half || (has_bias && in[2] != in[0])) {
    return false;
  }
  const std::string act = node.attr_s("activation", "");
  return act.empty() || act == "Relu" || act == "Gelu";
}

}  // namespace

GPUOPT_CUDA_OP(Fp8Gemm, &run_fp8_gemm, &fp8_gemm_supported);

}  // namespace gpuopt::cuda
