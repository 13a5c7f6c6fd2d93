// Per-row kernels beyond norm.h: TopK and Instance/GroupNormalization (f32 statistics).
#pragma once

#include "backends/cuda/elementwise.h"

namespace gpuopt::cuda {

// x viewed as [outer, n, inner]; values/indices are [outer, k, inner] (either may be null).
// Order as the CPU reference: larger (or smaller) first, NaN counts as the largest, ties by the
// lower index. One block per line ranks every element against the whole line (O(n^2 / threads)
// per line): exact for any n and k, fast for the short lines TopK usually sees.
// dt: f32, f16, bf16, i32, i64.
Status launch_topk(DType dt, const void* x, void* values, int64_t* indices, int64_t outer, int64_t n, int64_t inner,
                   int64_t k, bool largest, cudaStream_t s);

// x viewed as [N, G, group_size] where group_size = channels_per_group * spatial; per (n, g):
// y = (x - mean) * inv_std * scale[c] + bias[c], c the channel (scale_per_channel) or the group
// (the opset-18 GroupNormalization form). scale and bias have x's dtype. InstanceNormalization is
// G = C with per-channel affine.
Status launch_groupnorm(DType dt, const void* x, const void* scale, const void* bias, void* y, int64_t n,
                        int64_t groups, int64_t channels_per_group, int64_t spatial, bool scale_per_channel,
                        bool bias_per_channel, float eps, cudaStream_t s);

}  // namespace gpuopt::cuda
