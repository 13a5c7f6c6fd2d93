// The runner's linear layers through cuBLASLt: y[T, N] = x[T, K] · W[N, K]^T (+ bias[N]), row-major
// as PyTorch stores weights; fp16/bf16 in with f32 accumulation, or exact f32 (no TF32) for the
// checks against the CPU runner. Plans (descriptors, layouts, algorithm) are cached per shape; for
// small token counts (decode) the heuristic's candidates are timed once and the fastest kept,
// since cuBLASLt's first choice for skinny products is not always the bandwidth-best one; for
// T <= 8 the race includes the runner's own GEMV kernel (llm_kernels.h gemv).
//
//   LtGemm g;
//   GPUOPT_RETURN_IF_ERROR(g.init(32 << 20, stream));
//   GPUOPT_RETURN_IF_ERROR(g.linear(x, w, nullptr, y, T, N, K, DType::F16, DType::F16, stream));
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <tuple>

#include "core/dtype.h"
#include "core/status.h"
#include "llm/cuda/cuda_util.h"

namespace gpuopt::llm::cuda {

class LtGemm {
 public:
  LtGemm() = default;
  LtGemm(const LtGemm&) = delete;
  LtGemm& operator=(const LtGemm&) = delete;
  ~LtGemm();

  Status init(size_t workspace_bytes);
  // Timing candidates is allowed only outside stream capture; `tune` asks for it when the shape
  // is first seen (the runner passes true for decode-sized T on eager steps).
  Status linear(const void* x, const void* w, const void* bias, void* y, int64_t T, int64_t N, int64_t K, DType in_dt,
                DType out_dt, cudaStream_t stream, bool tune = false);

 private:
  struct Plan {
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
    cublasLtMatrixLayout_t sa = nullptr, sb = nullptr, sc = nullptr;  // one token: x as A, W as B
    cublasLtMatmulAlgo_t algo{};
    bool swapped = false;
    bool gemv = false;  // llm_kernels.h gemv() won the race
    bool has_bias = false;
  };
  using Key = std::tuple<int64_t, int64_t, int64_t, int, int, bool>;
  Result<Plan*> plan_for(const Key& key, const void* x, const void* w, const void* bias, void* y, cudaStream_t stream,
                         bool tune);
  Status run(Plan& p, const void* x, const void* w, const void* bias, void* y, cudaStream_t stream,
             const cublasLtMatmulAlgo_t& algo, bool swapped);
  // The plan's pick: cuBLASLt's algorithm or the GEMV kernel.
  Status run_pick(Plan& p, const Key& key, const void* x, const void* w, const void* bias, void* y, cudaStream_t stream,
                  const cublasLtMatmulAlgo_t& algo, bool swapped, bool gemv);

  cublasLtHandle_t handle_ = nullptr;
  DeviceBuffer workspace_;
  std::map<Key, Plan> plans_;
};

}  // namespace gpuopt::llm::cuda
