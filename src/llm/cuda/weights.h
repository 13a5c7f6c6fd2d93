// The model's weights on the GPU, uploaded straight from the memory-mapped checkpoint: worker
// threads fill pinned staging chunks (converting dtype on the way when the checkpoint's differs
// from the compute dtype) and copy them on their own streams, several chunks in flight. q/k/v are
// fused into one [q+k+v, hidden] matrix (+ bias, Qwen2) and gate/up into one [2*inter, hidden] by
// uploading each part at its row offset of the fused matrix.
#pragma once

#include <cstdint>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"
#include "llm/checkpoint.h"
#include "llm/config.h"
#include "llm/cuda/cuda_util.h"
#include "llm/kernels/llm_kernels.h"

namespace gpuopt::llm::cuda {

// A quantized linear kept packed (weights_packed.h); args.qweight == nullptr: not packed, the
// dequantized matrix of LayerWeights is used instead.
struct PackedLinear {
  QuantWeightArgs args;     // GPTQ/AWQ
  const void* fp8_w = nullptr;        // FP8: e4m3 [N, K]
  const float* fp8_scale = nullptr;   // FP8: [N]
  int64_t N = 0, K = 0;
  bool fp8() const { return fp8_w != nullptr; }
  bool valid() const { return args.qweight != nullptr || fp8_w != nullptr; }
};

struct LayerWeights {
  void* input_norm = nullptr;  // [hidden]
  void* post_norm = nullptr;   // [hidden]
  void* qkv = nullptr;         // [(heads + 2*kv_heads) * head_dim, hidden]
  void* qkv_bias = nullptr;    // [(heads + 2*kv_heads) * head_dim] (Qwen2) or nullptr
  void* o = nullptr;           // [hidden, heads * head_dim]
  void* gate_up = nullptr;     // [2*inter, hidden]
  void* down = nullptr;        // [hidden, inter]
  // With RunnerOptions::quant_kernels, the GPTQ/AWQ projections packed (their float slot above
  // stays nullptr).
  PackedLinear qkv_q, o_q, gate_up_q, down_q;
};

struct ModelWeights {
  DeviceBuffer storage;        // every tensor, 256-byte aligned, in the compute dtype
  void* embed = nullptr;       // [vocab, hidden]
  void* final_norm = nullptr;  // [hidden]
  void* lm_head = nullptr;     // [vocab, hidden] (== embed when tied)
  std::vector<LayerWeights> layers;
  size_t bytes = 0;     // bytes of weights on the GPU (float and packed)
  DeviceBuffer packed_storage;
  int64_t max_packed_elems = 0;  // the largest int linear's N * K (its dequantization scratch)
  int64_t max_fp8_n = 0, max_fp8_k = 0;  // the FP8 linears' largest N and K (their scratch)
  double upload_s = 0;  // wall time of the copy (allocation excluded)
};

// (bytes done, bytes total) as chunks land; called on the calling thread.
// pack_quantized: GPTQ/AWQ projections that can be packed are uploaded packed instead of
// dequantized (weights_packed.h says which).
Status upload_weights(const LlmConfig& cfg, const Checkpoint& ckpt, DType dt, const LoadProgress& progress,
                      ModelWeights* out, bool pack_quantized = false);

}  // namespace gpuopt::llm::cuda
