// The CUDA model runner (runner.h's make_cuda_runner): Llama/Mistral/Qwen2 decoding on one GPU in
// fp16/bf16 (f32 for exact checks against the CPU runner).
//
// A step: host metadata (tokens, positions, cache slots, query starts, context lengths, sampled
// rows, block tables) packed into one pinned buffer and sent with one copy; then embedding ->
// per layer [RMSNorm(+residual) -> fused QKV GEMM (+bias) -> RoPE + cache write -> paged
// attention -> O GEMM -> RMSNorm(+residual) -> fused gate/up GEMM -> SiLU*up -> down GEMM] ->
// final norm of the sampled rows only -> LM head in f32 -> one copy back and the step's only
// sync. Decode steps (every query length 1) are padded to a batch bucket (1, 2, 4, ... 256) and
// a block-table width bucket, eager or graph alike, so CUDA graphs (captured lazily per bucket,
// replayed after the metadata copy) give bit-identical results to eager steps.
#pragma once

#include <cuda_runtime.h>

#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "llm/cuda/cuda_util.h"
#include "llm/cuda/gemm.h"
#include "llm/cuda/quant_gemm.h"
#include "llm/cuda/profile.h"
#include "llm/cuda/weights.h"
#include "llm/runner.h"

namespace gpuopt::llm::cuda {

// Where each metadata array starts (int32 elements) in the packed buffer of one step.
struct StepLayout {
  int64_t T = 0;     // token rows (decode: the padded batch)
  int S = 0;         // sequences (decode: the padded batch)
  int W = 0;         // block-table width
  int n_sample = 0;  // sampled rows computed (decode: S)
  int max_query_len = 0;
  int64_t max_context = 0;
  bool decode = false;
  size_t tokens = 0, positions = 0, slots = 0, query_start = 0, context_lens = 0, sample_rows = 0, block_tables = 0,
         total = 0;
  void place();  // sets the offsets from T, S, W
};

class CudaRunner final : public ModelRunner {
 public:
  CudaRunner(const LlmConfig& cfg, const RunnerOptions& opts) : cfg_(cfg), opts_(opts) {}
  ~CudaRunner() override;
  Status init(const Checkpoint& ckpt, const LoadProgress& progress);

  const LlmConfig& config() const override { return cfg_; }
  int64_t num_kv_blocks() const override { return num_blocks_; }
  int block_size() const override { return opts_.block_size; }
  Status step(const StepBatch& batch, std::vector<float>* logits) override;
  Status step_sample(const StepBatch& batch, const std::vector<const SamplingParams*>& params,
                     const std::vector<uint64_t>& seeds, const std::vector<const std::vector<int64_t>*>& prompts,
                     const std::vector<const std::vector<int64_t>*>& outputs, const std::vector<int64_t>& steps,
                     std::vector<SampledToken>* out) override;
  int64_t decode_bytes(int batch, int64_t context) const override;
  Status hidden_states(const StepBatch& batch, std::vector<float>* out) override;

  double upload_seconds() const { return weights_.upload_s; }

 private:
  Status check_batch(const StepBatch& b) const;
  Status pack(const StepBatch& b, StepLayout* L);
  Status launch(const StepBatch& b);               // metadata copy + the step's kernels (no sync)
  Status forward(const StepLayout& L, bool tune);  // every launch of one step, on stream_
  // One projection: the packed quantized kernels when `q` is valid, else the GEMM on `w`.
  Status linear(const PackedLinear& q, const void* x, const void* w, const void* bias, void* y, int64_t T, int64_t N,
                int64_t K, cudaStream_t s, bool tune);
  Status run_decode_graph(const StepLayout& L);
  int bucket_batch(int n) const;

  LlmConfig cfg_;
  RunnerOptions opts_;
  DType dt_ = DType::F16;
  size_t esz_ = 2;
  DType kv_dt_ = DType::F16;         // the cache's elements: dt_, or kKvFp8
  std::vector<KvScales> kv_scales_;  // per layer (1.0 unless an FP8 cache's checkpoint gives them)
  int64_t qkv_dim_ = 0, q_dim_ = 0;
  int64_t max_tokens_ = 0;   // rows of the activation buffers
  int64_t max_seq_len_ = 0;  // longest sequence the cache and attention workspace serve
  int max_width_ = 0;        // blocks per sequence at max_seq_len_
  int64_t num_blocks_ = 0;
  std::vector<int> buckets_;

  cudaStream_t stream_ = nullptr;
  LtGemm gemm_;
  ModelWeights weights_;
  DeviceBuffer kv_, inv_freq_, meta_, attn_ws_;
  PinnedBuffer meta_host_, logits_host_;
  DeviceBuffer sampled_, sample_params_;  // per sampled row: token (int32) + logprob (f32); params
  PinnedBuffer sampled_host_, sample_params_host_;
  std::vector<void*> k_cache_, v_cache_;
  DeviceBuffer quant_scratch_;  // packed linears, steps above the GEMV's token count
  DeviceBuffer gemv_counters_;  // the quantized GEMV's split-K arrival counters (zeroed once)
  GemvSplitScratch gemv_split_;  // partial sums in quant_scratch_ (never in use by both at once)
  Fp8Gemm fp8_;                 // FP8 linears: W8A16 GEMV up to kFp8GemvMaxTokens, else W8A8
  DeviceBuffer fp8_xq_, fp8_row_scale_, fp8_acc_;  // W8A8 scratch, kFp8Rows tokens at a time
  GemvSplitScratch fp8_split_;  // the W8A16 GEMV's split-K partial sums (in fp8_acc_)
  DeviceBuffer residual_, x_, normed_, qkv_, attn_, gate_up_, act_, gx_, gres_, gnorm_, logits_;
  std::map<std::pair<int, int>, cudaGraphExec_t> graphs_;
  bool capturing_ = false;
  OpProfiler prof_;  // GPUOPT_LLM_PROFILE=1: per-op times of eager steps  // (batch bucket, width) -> graph
};

}  // namespace gpuopt::llm::cuda
