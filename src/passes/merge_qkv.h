// merge_qkv: the Q, K and V projections of one attention as one GEMM (merge_qkv.cpp).
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
Result<PassStats> merge_qkv(Graph* g);

}  // namespace gpuopt
