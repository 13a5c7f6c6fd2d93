// Internal to gemv_quant.cu: the 16-byte-load, split-K GEMV for weights without act-order.
#pragma once

#include "llm/kernels/llm_kernels.h"

namespace gpuopt::llm::cuda {

// false (nothing launched) where it does not apply: act-order, N not a multiple of 4, a qweight
// not 16-byte aligned, or a K too long for one slice without a split workspace.
bool gemv_quant_wide(const void* x, const QuantWeightArgs& w, const void* bias, void* y, int64_t T, int64_t N,
                     int64_t K, DType dt, const GemvSplitScratch* ws, cudaStream_t stream);

}  // namespace gpuopt::llm::cuda
