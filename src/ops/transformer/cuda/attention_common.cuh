// What both attention kernels (attention.cu, attention_wmma.cu) share: the score rule
// (causality and the mask of AttentionArgs, attention.h) and the launch over (query blocks,
// heads, batch).
#pragma once

#include "ops/transformer/cuda/attention.h"
#include "core/cuda_check.h"
#include "backends/cuda/kernels/float_convert.cuh"

#include <cuda_runtime.h>

namespace gpuopt::cuda {

// Score of key j for query qi of (batch b, head h), both inside the sequences: -inf when the
// key is after the query (causal), past the mask's length or false in a bool mask; plus the
// mask's value (of the storage type T) in a float mask.
template <typename T>
__device__ __forceinline__ float masked_score(const AttentionArgs& a, int64_t b, int64_t h, int64_t qi, int64_t j,
                                              float score) {
  if (a.causal && j > qi) return -INFINITY;
  if (!a.mask) return score;
  if (j >= a.mask_len) return -INFINITY;
  const int64_t off = b * a.mask_sb + h * a.mask_sh + qi * a.mask_sq + j * a.mask_sk;
  if (a.mask_bool) return static_cast<const bool*>(a.mask)[off] ? score : -INFINITY;
  return score + kern::to_f(static_cast<const T*>(a.mask)[off]);
}

// Launches `kernel(a)` with one block of `threads` per `rows` query rows of each (batch, head),
// with `smem` bytes of dynamic shared memory.
template <typename Kernel>
Status launch_attention_grid(Kernel* kernel, const AttentionArgs& a, int rows, int threads, size_t smem,
                             cudaStream_t stream) {
  GPUOPT_CHECK_CALL(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
  const dim3 grid(static_cast<unsigned>((a.q_seq + rows - 1) / rows), static_cast<unsigned>(a.q_heads),
                  static_cast<unsigned>(a.batch));
  kernel<<<grid, threads, smem, stream>>>(a);
  GPUOPT_CHECK_CALL(cudaGetLastError());
  return Status::Ok();
}

}  // namespace gpuopt::cuda
