// The score rule both attention kernels apply (attention.cu, attention_wmma.cu): causality and
// the mask of AttentionArgs (attention.h) on one scaled score, -inf where the key is masked.
#pragma once

#include "ops/transformer/cuda/attention.h"
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

}  // namespace gpuopt::cuda
