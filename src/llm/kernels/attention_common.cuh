// Shared by the paged-attention kernels (attention.cu: the split-context CUDA-core kernel and its
// reduce; attention_mma.cu: the tensor-core prefill kernel).
#pragma once

#include "llm/kernels/common.cuh"
#include "llm/kernels/llm_kernels.h"

namespace gpuopt::llm::cuda::detail {

constexpr float kLog2e = 1.4426950408889634f;

__device__ __forceinline__ void cp_async16(void* smem, const void* gmem, bool valid) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  // src-size 0 zero-fills the 16 bytes: masked keys must hold zeros, never stale NaN bits.
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem),
               "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

// Enables more than 48 KB of dynamic shared memory for `kernel`, once per instantiation.
template <class K>
void allow_smem(K kernel, size_t bytes) {
  if (bytes > 48 * 1024) cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                              static_cast<int>(bytes));
}

// The tensor-core prefill kernel (attention_mma.cu): f16/bf16, head_dim 64/128, no split.
void paged_attention_prefill_mma(const PagedAttentionArgs& a, cudaStream_t stream);
bool prefill_mma_available();

}  // namespace gpuopt::llm::cuda::detail
