// cuDNN's fused flash attention (SDPA, cuDNN frontend graph API) for the Attention op, where it
// applies (sdpa.cpp); gpuopt's own kernels (attention.h) take the rest.
#pragma once

#include "ops/transformer/cuda/attention.h"
#include "backends/cuda/cuda_ops.h"

namespace gpuopt::cuda {

// f16/bf16, head sizes multiples of 8 up to 128, no mask or a float mask over every key, and
// a.kernel (GPUOPT_ATTENTION_KERNEL) `auto` or `cudnn`.
bool sdpa_applies(const AttentionArgs& a);

// Runs it on ctx's stream, with ctx's KernelSettings (GPUOPT_SDPA_BIAS, GPUOPT_SDPA_AUTOTUNE): true when cuDNN ran it, false when cuDNN declined the shape (logged
// once at info; the caller runs its own kernel), an error when a run failed.
Result<bool> run_sdpa(const AttentionArgs& a, ExecContext& ctx);

}  // namespace gpuopt::cuda
