// Internal to gemv_quant.cu: the tensor-core GEMV (gemv_quant_mma.cu) for f16 weights without
// act-order whose group size is a multiple of 32 (int4) or 16 (int8).
#pragma once

#include "llm/kernels/llm_kernels.h"

namespace gpuopt::llm::cuda {

// Whether gemv_quant_mma runs for this weight, shape and workspace (f16, no g_idx, N % 8 == 0,
// qweight 16-byte and scales 8-byte aligned, the x slice fits in 48 KB of shared memory).
bool gemv_quant_mma_applies(const QuantWeightArgs& w, int64_t T, int64_t N, int64_t K, DType dt,
                            const GemvSplitScratch* ws);
// false (nothing launched) where it does not apply or x is not 16-byte aligned.
bool gemv_quant_mma(const void* x, const QuantWeightArgs& w, const void* bias, void* y, int64_t T, int64_t N,
                    int64_t K, DType dt, const GemvSplitScratch* ws, cudaStream_t stream);

}  // namespace gpuopt::llm::cuda
