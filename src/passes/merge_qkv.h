// What runs on the Attention nodes fuse_attention wrote: merge_qkv (the Q, K and V projections of
// one attention as one GEMM, merge_qkv.cpp) and expand_attention_masks (attention_mask.cpp).
#pragma once

#include "passes/passes.h"

namespace gpuopt {

// An Attention node in the 3-D heads form (q_num_heads == kv_num_heads, no KV cache, only Y read)
// whose Q, K and V are projections of one input X, each MatMul(X, W) [+ Add(b)] with constant
// W [K, N] and b [N] (N equal for the three), read only by that attention, becomes
//
//   Attention(qkv_packed=1)(MatMul(X, [Wq | Wk | Wv]) + [bq | bk | bv], mask)
//
// one GEMM writing [.., 3N] that the attention reads Q, K and V from in place (a missing bias is
// zeros: fuse_matmul_bias then makes the pair one Gemm with its bias in the epilogue). Runs after
// fuse_attention and before fuse_matmul_bias; GPUOPT_DISABLE_FUSION=merge_qkv turns it off.
// The same for three Int8Gemms (fold_qdq, --precision int8 on the GPU) of one int8 input and one
// activation scale: one Int8Gemm over the stacked weights, scales and biases.
Result<PassStats> merge_qkv(Graph* g);

// A float [B, 1, 1, S] mask read by two or more Attention nodes (and nothing else), whose query
// lengths are one dim, becomes Expand(mask, [1, 1, q_seq, 1]) once, read by all of them: cuDNN's
// SDPA takes a bias over the query rows, which the CUDA Attention otherwise builds per call. For
// CUDA sessions (run_session_passes, after the precision conversion); GPUOPT_DISABLE_FUSION=
// attention_mask turns it off.
Result<PassStats> expand_attention_masks(Graph* g);

}  // namespace gpuopt
