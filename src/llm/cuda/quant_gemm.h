// Quantized linears on the GPU: weight-only int4/int8 (llm_kernels.h gemv_quant for decode-sized
// T, dequantize-to-scratch + LtGemm above it) and FP8: W8A16 (llm_kernels.h gemv_fp8) for
// decode-sized T, W8A8 through cuBLASLt above it (e4m3 x e4m3 with f32 accumulation; the
// per-token activation and per-channel weight scales applied in one epilogue kernel, since
// Hopper's cuBLASLt takes only scalar scales).
//
//   GPUOPT_RETURN_IF_ERROR(quant_linear(lt, x, w, nullptr, y, T, N, K, DType::F16, scratch, stream));
//   Fp8Gemm f8;  GPUOPT_RETURN_IF_ERROR(f8.init(32 << 20));
//   GPUOPT_RETURN_IF_ERROR(fp8_linear(f8, args, &split, stream));  // or f8.linear(args, stream): W8A8
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <tuple>

#include "core/status.h"
#include "llm/cuda/cuda_util.h"
#include "llm/cuda/gemm.h"
#include "llm/kernels/llm_kernels.h"

namespace gpuopt::llm::cuda {

// Up to this many tokens a weight the tensor-core GEMV takes (llm_kernels.h QuantGemvKernel::Mma)
// is multiplied by it 16 tokens at a time: each pass re-reads the packed weight (4x at 64 tokens,
// about the bytes the dequantized f16 copy alone would write) instead of dequantizing to a
// scratch matrix and running the GEMM on it.
constexpr int64_t kQuantMmaMaxTokens = 64;

// y[T, N] = x[T, K] · W^T (+ bias). T <= kQuantGemvMaxTokens: the GEMV kernel (`split`: its
// split-K workspace, may be null); T <= kQuantMmaMaxTokens where the Mma kernel applies (and
// GPUOPT_LLM_QUANT_GEMV does not choose another): that kernel over 16-token chunks; larger T: W
// dequantized into `scratch` (N*K elements of dt) and the ordinary GEMM.
Status quant_linear(LtGemm& lt, const void* x, const QuantWeightArgs& w, const void* bias, void* y, int64_t T,
                    int64_t N, int64_t K, DType dt, void* scratch, cudaStream_t stream,
                    const GemvSplitScratch* split = nullptr);

// The runner multiplies FP8 linears this many tokens at a time (bounds the f32 product scratch).
constexpr int64_t kFp8Rows = 256;

struct Fp8LinearArgs {
  const void* x = nullptr;          // [T, K] f16/bf16
  const void* w = nullptr;          // e4m3 [N, K]
  const float* w_scale = nullptr;   // [N] or [1]
  bool per_channel = true;
  const float* input_scale = nullptr;  // static activation scale (device), or nullptr: per token
  const void* bias = nullptr;       // [N] or nullptr
  void* y = nullptr;                // [T, N] dt
  int64_t T = 0, N = 0, K = 0;
  DType dt = DType::F16;
  void* xq = nullptr;               // scratch: T*K bytes
  float* row_scale = nullptr;       // scratch: T floats
  float* acc = nullptr;             // scratch: T*N floats (the e4m3 product before scaling)
};

// FP8 linears of at most this many tokens run W8A16 (gemv_fp8: the weights streamed once, each
// converted exactly and used for all T tokens in f32 on the CUDA cores); more tokens run the
// W8A8 tensor-core GEMM. Each weight byte costs the GEMV about T f32 FMAs, so its lead shrinks
// with T: on the H200 (LlmQuantKernelsBench.Fp8GemvBesideFp16, the 7B layer's four linears) W8A16
// took 0.53-0.74x the W8A8 GEMM's time at T=1, 0.59-1.14x at 4 (0.86x summed), 0.80-1.70x at 8
// (1.07x summed). A power of two, so that a
// decode batch padded to its bucket (1, 2, 4, ...) takes the path its unpadded size would.
constexpr int64_t kFp8GemvMaxTokens = 4;

class Fp8Gemm {
 public:
  Fp8Gemm() = default;
  Fp8Gemm(const Fp8Gemm&) = delete;
  Fp8Gemm& operator=(const Fp8Gemm&) = delete;
  ~Fp8Gemm();
  Status init(size_t workspace_bytes);
  // K and N multiples of 16, pointers 16-byte aligned (cuBLASLt's FP8 rules).
  static bool supported(const Fp8LinearArgs& a);
  Status linear(const Fp8LinearArgs& a, cudaStream_t stream);

 private:
  struct Plan {
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
    cublasLtMatmulAlgo_t algo{};
    DType acc_dt = DType::F32;  // bf16 where this cuBLASLt offers no f32 output for e4m3 inputs
  };
  Result<Plan*> plan_for(int64_t T, int64_t N, int64_t K);
  cublasLtHandle_t handle_ = nullptr;
  DeviceBuffer workspace_;
  std::map<std::tuple<int64_t, int64_t, int64_t>, Plan> plans_;
};

// An FP8 linear as the runner runs it: T <= kFp8GemvMaxTokens and gemv_fp8_supported: W8A16 with
// the activations as they are (a.xq, a.row_scale, a.acc, a.input_scale unused; `split`: the
// GEMV's split-K workspace, may be null); otherwise f8.linear (W8A8).
Status fp8_linear(Fp8Gemm& f8, const Fp8LinearArgs& a, const GemvSplitScratch* split, cudaStream_t stream);

}  // namespace gpuopt::llm::cuda
