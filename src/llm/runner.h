// A model runner: runs one step of a decoder over a batch of sequences against the paged KV cache
// (kv_cache.h). The CPU runner (fp32, the oracle) and the CUDA runner implement it; the generate
// loop and the serving scheduler drive it.
//
//   StepBatch b;                         // sequence 0: a 5-token prompt; sequence 1: one decode token
//   b.seqs = {{.num_tokens = 5, .start_pos = 0, .block_table = &t0, .sample = true},
//             {.num_tokens = 1, .start_pos = 41, .block_table = &t1, .sample = true}};
//   b.tokens = {...6 ids...};
//   runner.step(b, &logits);             // logits: [2, vocab] f32, for each seq's last token
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"
#include "llm/checkpoint.h"
#include "llm/config.h"
#include "llm/kv_cache.h"
#include "llm/sampling.h"

namespace gpuopt::llm {

struct StepSeq {
  int32_t num_tokens = 0;   // tokens of this sequence in this step (a prefill chunk, or 1)
  int64_t start_pos = 0;    // position of its first token in this step (= tokens already cached)
  const std::vector<int32_t>* block_table = nullptr;  // covers start_pos + num_tokens tokens
  bool sample = true;       // wants logits / a token for its last token in this step
};

struct StepBatch {
  std::vector<StepSeq> seqs;
  std::vector<int32_t> tokens;  // the seqs' tokens, concatenated in seqs' order
};

struct RunnerOptions {
  DType compute_dtype = DType::F32;  // CPU: F32; CUDA: F16, BF16 or F32
  int block_size = 16;  // kv_cache.h kDefaultBlockSize
  int64_t num_kv_blocks = 0;     // 0: from memory (gpu_memory_utilization) or a default
  KvCacheDtype kv_cache_dtype = KvCacheDtype::Auto;  // kv_cache.h
  int64_t cpu_kv_cache_bytes = int64_t{2} << 30;    // CPU, num_kv_blocks 0: the cache's host memory at most
  double gpu_memory_utilization = 0.9;
  int max_batch = 256;           // largest number of sequences in one step
  int max_step_tokens = 8192;    // largest number of tokens in one step
  int device_index = 0;
  bool cuda_graphs = true;
  // CUDA: GPTQ/AWQ linears stay packed and run through the quantized kernels (W4A16/W8A16 GEMV
  // for up to 16 tokens, dequantize + GEMM above), FP8 linears through cuBLASLt's e4m3 GEMM with
  // activations quantized per token (W8A8); false: dequantized to the compute dtype at load.
  bool quant_kernels = false;
  // CPU runner only: sees every linear layer's input as the step computes it (calibration for
  // `gpuopt quantize`): point is "attn_in" (input of q/k/v), "o_in", "mlp_in" (gate/up) or
  // "down_in"; x is [T, dim] f32. The hook may rewrite x in place: the linears then read what it
  // left (an oracle for kernels that quantize their activations, such as FP8 W8A8).
  std::function<void(int64_t layer, const char* point, float* x, int64_t T, int64_t dim)> activation_hook;
};

class ModelRunner {
 public:
  virtual ~ModelRunner() = default;
  virtual const LlmConfig& config() const = 0;
  virtual int64_t num_kv_blocks() const = 0;
  virtual int block_size() const = 0;
  // Writes every token's K/V into the cache, then f32 logits [number of seqs with sample, vocab]
  // into *logits (resized) for the last token of each such sequence.
  virtual Status step(const StepBatch& batch, std::vector<float>* logits) = 0;
  // The same step, sampled on the device: one token per sampling sequence. `params[i]`,
  // `seeds[i]`, `histories[i]` (prompt + output so far) and `steps[i]` are for the i-th sampling
  // sequence. The default implementation calls step() and sample_cpu().
  virtual Status step_sample(const StepBatch& batch, const std::vector<const SamplingParams*>& params,
                             const std::vector<uint64_t>& seeds,
                             const std::vector<const std::vector<int64_t>*>& prompts,
                             const std::vector<const std::vector<int64_t>*>& outputs,
                             const std::vector<int64_t>& steps, std::vector<SampledToken>* out);
  // The same step as step() (K/V written), but instead of logits the f32 hidden state of each
  // sampling sequence's last token after the final norm: [number of seqs with sample,
  // hidden_size] into *out (resized). Decoder embeddings pool it (server/openai/embeddings.h).
  // The default answers Unimplemented.
  virtual Status hidden_states(const StepBatch& batch, std::vector<float>* out);
  // Bytes a decode step must read from memory at this batch/context (weights + KV): the
  // roofline's numerator.
  virtual int64_t decode_bytes(int batch, int64_t context) const;
};

Result<std::unique_ptr<ModelRunner>> make_cpu_runner(const LlmConfig& cfg, const Checkpoint& ckpt,
                                                     const RunnerOptions& opts);
// Unavailable ("no CUDA device" / "built without CUDA") where there is none.
Result<std::unique_ptr<ModelRunner>> make_cuda_runner(const LlmConfig& cfg, const Checkpoint& ckpt,
                                                      const RunnerOptions& opts);

}  // namespace gpuopt::llm
