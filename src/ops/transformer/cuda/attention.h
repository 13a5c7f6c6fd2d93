// Fused scaled dot-product attention on the GPU (ONNX Attention, 4-D inputs): one kernel reads
// Q, K, V (and the mask) once and writes Y, with an online softmax over key tiles in shared
// memory, so the [batch, heads, q_seq, kv_seq] scores never reach device memory.
#pragma once

#include "core/dtype.h"
#include "core/status.h"

#include <cstdint>

typedef struct CUstream_st* cudaStream_t;

namespace gpuopt::cuda {

// Element strides of a [batch, heads, seq, head] view (the head dim is contiguous): 4-D
// [B, H, S, D] tensors, or ONNX Attention's 3-D form [B, S, H*D] read in place.
struct HeadStrides {
  int64_t b = 0, h = 0, s = 0;
  static HeadStrides bhsd(int64_t heads, int64_t seq, int64_t d) { return {heads * seq * d, seq * d, d}; }
  static HeadStrides bshd(int64_t heads, int64_t seq, int64_t d) { return {seq * heads * d, d, heads * d}; }
};

// GPUOPT_ATTENTION_KERNEL (KernelSettings::attention_kernel; the executor's settings reach the
// kernels through AttentionArgs). auto: gpuopt's flash kernel where attention_fa_preferred says
// so, else cuDNN's SDPA where it applies, else gpuopt's kernels; cudnn: cuDNN's SDPA wherever it
// applies; fa: never cuDNN; wmma and scalar: those kernels (A/B runs and references).
enum class AttentionKernel { kAuto, kCudnn, kFa, kWmma, kScalar };

struct AttentionArgs {
  AttentionKernel kernel = AttentionKernel::kAuto;
  // GPUOPT_FA_WARPS: the flash kernel's warps per block, 4 or 8; 0 for auto (8 where the 8-warp
  // grid covers every SM at least kFaWideWaves times, else 4: attention_fa.cu).
  int fa_warps = 0;
  DType dt = DType::F16;           // Q, K, V, Y (and a float mask)
  const void* q = nullptr;         // [batch, q_heads, q_seq, head] through qs
  const void* k = nullptr;         // [batch, kv_heads, kv_seq, head] through ks
  const void* v = nullptr;         // [batch, kv_heads, kv_seq, v_head] through vs
  void* y = nullptr;               // [batch, q_heads, q_seq, v_head] through ys
  HeadStrides qs, ks, vs, ys;
  int64_t batch = 0, q_heads = 0, kv_heads = 0, q_seq = 0, kv_seq = 0, head = 0, v_head = 0;
  float scale = 1.f;
  bool causal = false;             // key j > query i is masked
  // Mask, broadcast to [batch, q_heads, q_seq, mask_len]: element strides per dim (0 where the
  // mask has size 1), added (float of dt) or keep-if-true (bool). Keys j >= mask_len are masked.
  const void* mask = nullptr;
  bool mask_bool = false;
  int64_t mask_sb = 0, mask_sh = 0, mask_sq = 0, mask_sk = 1, mask_len = 0;
  bool nan_to_zero = false;  // NaN outputs (rows whose every key is masked) written as 0
};

// y[i] = isnan(y[i]) ? 0 : y[i] over n elements of dt, in place (after cuDNN's SDPA).
Status launch_nan_to_zero(DType dt, void* y, int64_t n, cudaStream_t stream);

// The largest head sizes the kernel takes (registers per lane hold v_head / 32 accumulators).
constexpr int64_t kAttentionMaxHead = 256;

// Under auto, where the flash kernel runs instead of cuDNN's SDPA: head size 64 and at most 128
// keys, where it measured faster on the H200 (BERT-base and GPT-2 at sequence 128; docs/perf-notes.md);
// ViT-B/16's 197 keys stay with cuDNN.
bool attention_fa_preferred(const AttentionArgs& a);

// Picks the flash kernel (attention_fa.cu), else the WMMA kernel (attention_wmma.cu) where one
// applies, else the scalar one (a.kernel wmma or scalar forces the latter two).
Status launch_attention(const AttentionArgs& a, cudaStream_t stream);

// The tensor-core kernel: f16/bf16, head sizes multiples of 16 up to 128, compute capability 8+.
bool attention_wmma_applies(const AttentionArgs& a, int device_major);
Status launch_attention_wmma(const AttentionArgs& a, cudaStream_t stream);

// The flash kernel: f16/bf16, head sizes 64 or 128 (Q's and V's equal), 16-byte aligned rows,
// compute capability 8+.
bool attention_fa_applies(const AttentionArgs& a, int device_major);
Status launch_attention_fa(const AttentionArgs& a, cudaStream_t stream);

}  // namespace gpuopt::cuda
