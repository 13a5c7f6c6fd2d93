// CudaRunner's setup: device, weights, activation buffers, the paged KV cache sized from free
// memory; and make_cuda_runner.
#include "llm/cuda/cuda_runner.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "llm/cuda/make_cuda_runner.h"
#include "llm/kernels/llm_kernels.h"

namespace gpuopt::llm {
namespace cuda {

CudaRunner::~CudaRunner() {
  for (auto& [k, g] : graphs_) cudaGraphExecDestroy(g);
  if (stream_) cudaStreamDestroy(stream_);
}

int CudaRunner::bucket_batch(int n) const {
  for (int b : buckets_)
    if (b >= n) return b;
  return -1;
}

Status CudaRunner::init(const Checkpoint& ckpt, const LoadProgress& progress) {
  const LlmConfig& c = cfg_;
  dt_ = opts_.compute_dtype;
  if (dt_ != DType::F16 && dt_ != DType::BF16 && dt_ != DType::F32)
    return Status::InvalidArgument("CUDA runner: compute dtype {} (F16, BF16 or F32)", dtype_name(dt_));
  // The attention kernels read the cache in the compute dtype or as e4m3 codes (f16/bf16 compute).
  if (opts_.kv_cache_dtype == KvCacheDtype::Fp8E4m3 && dt_ == DType::F32)
    return Status::Unimplemented("CUDA runner: --kv-cache-dtype fp8 needs fp16 or bf16 compute");
  if (opts_.kv_cache_dtype == KvCacheDtype::F16 && dt_ != DType::F16)
    return Status::Unimplemented("CUDA runner: --kv-cache-dtype fp16 needs fp16 compute (this model runs {})",
                                 dtype_name(dt_));
  kv_dt_ = opts_.kv_cache_dtype == KvCacheDtype::Fp8E4m3 ? kKvFp8 : dt_;
  if (kv_dt_ == kKvFp8) {
    GPUOPT_ASSIGN_OR_RETURN(kv_scales_, kv_cache_scales(c, ckpt));
  } else {
    kv_scales_.assign(static_cast<size_t>(std::max<int64_t>(c.num_layers, 0)), KvScales{});
  }
  if (c.num_layers < 1 || c.num_heads < 1 || c.num_kv_heads < 1 || c.num_heads % c.num_kv_heads != 0 ||
      c.head_dim < 2 || c.head_dim % 2 != 0 || c.hidden_size < 1 || c.vocab_size < 1)
    return Status::InvalidArgument("CUDA runner: unsupported shape ({} layers, {} heads, {} kv heads, head_dim {})",
                                   c.num_layers, c.num_heads, c.num_kv_heads, c.head_dim);
  if (opts_.block_size < 1 || opts_.max_batch < 1 || opts_.max_step_tokens < 1 || opts_.gpu_memory_utilization <= 0 ||
      opts_.gpu_memory_utilization > 1)
    return Status::InvalidArgument(
        "CUDA runner: block_size, max_batch, max_step_tokens must be positive and "
        "gpu_memory_utilization in (0, 1]");
  esz_ = dtype_size(dt_);
  {
    PagedAttentionArgs a;
    a.num_heads = static_cast<int>(c.num_heads);
    a.num_kv_heads = static_cast<int>(c.num_kv_heads);
    a.head_dim = static_cast<int>(c.head_dim);
    a.block_size = opts_.block_size;
    a.max_query_len = 1;
    a.dt = dt_;
    a.kv_dt = kv_dt_;
    if (const char* why = paged_attention_unsupported(a))
      return Status::Unimplemented("CUDA runner: {} ({})", why, c.architecture);
  }
  q_dim_ = c.num_heads * c.head_dim;
  qkv_dim_ = (c.num_heads + 2 * c.num_kv_heads) * c.head_dim;
  for (int b = 1; b < opts_.max_batch; b *= 2) buckets_.push_back(b);
  buckets_.push_back(opts_.max_batch);
  max_tokens_ = std::max<int64_t>(opts_.max_step_tokens, opts_.max_batch);

  prof_.init_from_env();
  GPUOPT_CUDA_RETURN(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  GPUOPT_RETURN_IF_ERROR(gemm_.init(32 << 20));
  GPUOPT_RETURN_IF_ERROR(upload_weights(c, ckpt, dt_, progress, &weights_, opts_.quant_kernels));
  if (weights_.max_fp8_n > 0) {
    // FP8 linears: activations quantized and multiplied kFp8Rows tokens at a time.
    GPUOPT_RETURN_IF_ERROR(fp8_.init(32 << 20));
    const int64_t rows = std::min<int64_t>(kFp8Rows, max_tokens_);
    GPUOPT_RETURN_IF_ERROR(fp8_xq_.allocate(static_cast<size_t>(rows * weights_.max_fp8_k), "FP8 activations"));
    GPUOPT_RETURN_IF_ERROR(fp8_row_scale_.allocate(static_cast<size_t>(rows) * 4, "FP8 activation scales"));
    GPUOPT_RETURN_IF_ERROR(fp8_acc_.allocate(static_cast<size_t>(rows * weights_.max_fp8_n) * 4, "FP8 products"));
  }
  constexpr int64_t kCounters = 4096;  // GEMV column tiles: int 128 columns each, FP8 2-8
  if (weights_.max_packed_elems > 0 || weights_.max_fp8_n > 0) {
    GPUOPT_RETURN_IF_ERROR(gemv_counters_.allocate(kCounters * 4, "the quantized GEMV's counters"));
    GPUOPT_CUDA_RETURN(cudaMemset(gemv_counters_.get(), 0, kCounters * 4));
    GPUOPT_CUDA_RETURN(cudaDeviceSynchronize());  // zero before the runner's (non-blocking) stream uses them
  }
  if (weights_.max_packed_elems > 0) {
    // Steps of more than kQuantGemvMaxTokens dequantize one packed linear at a time into this.
    GPUOPT_RETURN_IF_ERROR(
        quant_scratch_.allocate(static_cast<size_t>(weights_.max_packed_elems) * esz_, "the dequantization scratch"));
    gemv_split_ = {quant_scratch_.as<float>(), quant_scratch_.bytes() / 4, gemv_counters_.as<int>(), kCounters};
  }
  if (weights_.max_fp8_n > 0)  // the W8A16 GEMV's partial sums in the W8A8 products' scratch
    fp8_split_ = {fp8_acc_.as<float>(), fp8_acc_.bytes() / 4, gemv_counters_.as<int>(), kCounters};

  // Activations, sized once for the largest step.
  const int64_t T = max_tokens_, H = c.hidden_size, I = c.intermediate_size, B = opts_.max_batch;
  auto rows = [&](DeviceBuffer& b, int64_t n, int64_t cols, const char* what) {
    return b.allocate(static_cast<size_t>(n * cols) * esz_, what);
  };
  GPUOPT_RETURN_IF_ERROR(rows(residual_, T, H, "the residual stream"));
  GPUOPT_RETURN_IF_ERROR(rows(x_, T, H, "activations"));
  GPUOPT_RETURN_IF_ERROR(rows(normed_, T, H, "activations"));
  GPUOPT_RETURN_IF_ERROR(rows(qkv_, T, qkv_dim_, "activations"));
  GPUOPT_RETURN_IF_ERROR(rows(attn_, T, q_dim_, "activations"));
  GPUOPT_RETURN_IF_ERROR(rows(gate_up_, T, 2 * I, "activations"));
  GPUOPT_RETURN_IF_ERROR(rows(act_, T, I, "activations"));
  GPUOPT_RETURN_IF_ERROR(rows(gx_, B, H, "sampled rows"));
  GPUOPT_RETURN_IF_ERROR(rows(gres_, B, H, "sampled rows"));
  GPUOPT_RETURN_IF_ERROR(rows(gnorm_, B, H, "sampled rows"));
  GPUOPT_RETURN_IF_ERROR(logits_.allocate(static_cast<size_t>(B * c.vocab_size) * 4, "logits"));
  GPUOPT_RETURN_IF_ERROR(logits_host_.allocate(static_cast<size_t>(B * c.vocab_size) * 4, "logits"));

  GPUOPT_RETURN_IF_ERROR(sampled_.allocate(static_cast<size_t>(B) * 8, "sampled tokens"));
  GPUOPT_RETURN_IF_ERROR(sampled_host_.allocate(static_cast<size_t>(B) * 8, "sampled tokens"));
  GPUOPT_RETURN_IF_ERROR(
      sample_params_.allocate(static_cast<size_t>(B) * sizeof(SampleRowParams), "sampling parameters"));
  GPUOPT_RETURN_IF_ERROR(
      sample_params_host_.allocate(static_cast<size_t>(B) * sizeof(SampleRowParams), "sampling parameters"));

  const std::vector<double> inv = c.rope_inv_freq();
  std::vector<float> invf(inv.begin(), inv.end());
  GPUOPT_RETURN_IF_ERROR(inv_freq_.allocate(invf.size() * 4, "RoPE frequencies"));
  GPUOPT_CUDA_RETURN(cudaMemcpy(inv_freq_.get(), invf.data(), invf.size() * 4, cudaMemcpyHostToDevice));

  // The paged cache: what is left of gpu_memory_utilization of the card after everything above
  // and the attention workspace (vLLM's rule), unless the caller fixed the block count.
  const int bs = opts_.block_size;
  const int64_t model_len = c.max_position > 0 ? c.max_position : int64_t{1} << 20;
  const int64_t ws_len = std::min<int64_t>(model_len, int64_t{1} << 17);
  const size_t ws = cuda::paged_attention_workspace_bytes(static_cast<int>(max_tokens_), static_cast<int>(c.num_heads),
                                                          static_cast<int>(c.head_dim), (ws_len + bs - 1) / bs * bs);
  GPUOPT_RETURN_IF_ERROR(attn_ws_.allocate(std::max<size_t>(ws, 256), "the attention workspace"));
  const size_t per_block = static_cast<size_t>(bs * kv_cache_bytes_per_token(c, opts_.kv_cache_dtype, dt_));
  int64_t n = opts_.num_kv_blocks;
  if (n <= 0) {
    size_t free_b = 0, total_b = 0;
    GPUOPT_CUDA_RETURN(cudaMemGetInfo(&free_b, &total_b));
    const double budget =
        opts_.gpu_memory_utilization * static_cast<double>(total_b) - static_cast<double>(total_b - free_b);
    n = budget > 0 ? static_cast<int64_t>(budget / static_cast<double>(per_block)) : 0;
    if (n < 1)
      return Status::OutOfMemory("no GPU memory left for the KV cache after {:.2f} GB of weights (utilization {})",
                                 static_cast<double>(weights_.bytes) / 1e9, opts_.gpu_memory_utilization);
  }
  n = std::min<int64_t>(n, std::numeric_limits<int32_t>::max() / bs);  // slots are int32
  num_blocks_ = n;
  GPUOPT_RETURN_IF_ERROR(kv_.allocate(static_cast<size_t>(n) * per_block, "the KV cache"));
  const size_t layer_bytes = static_cast<size_t>(n) * per_block / static_cast<size_t>(2 * c.num_layers);
  for (int64_t l = 0; l < c.num_layers; ++l) {
    k_cache_.push_back(kv_.as<char>() + (2 * l) * layer_bytes);
    v_cache_.push_back(kv_.as<char>() + (2 * l + 1) * layer_bytes);
  }
  max_seq_len_ = std::min<int64_t>({ws_len, n * bs});
  max_width_ = static_cast<int>((max_seq_len_ + bs - 1) / bs);

  // Packed step metadata: the largest layout any step can need.
  StepLayout L;
  L.T = max_tokens_;
  L.S = opts_.max_batch;
  L.W = max_width_;
  L.place();
  GPUOPT_RETURN_IF_ERROR(meta_.allocate(L.total * 4, "step metadata"));
  GPUOPT_RETURN_IF_ERROR(meta_host_.allocate(L.total * 4, "step metadata"));
  GPUOPT_CUDA_RETURN(cudaStreamSynchronize(stream_));
  return Status::Ok();
}

int64_t CudaRunner::decode_bytes(int batch, int64_t context) const {
  // Every weight on the GPU once, except that an untied embedding table gives only `batch` rows;
  // plus each sequence's K and V up to `context`.
  int64_t w = static_cast<int64_t>(weights_.bytes);
  const int64_t row = cfg_.hidden_size * static_cast<int64_t>(esz_);
  if (!cfg_.tie_word_embeddings) w -= cfg_.vocab_size * row - batch * row;
  return w + static_cast<int64_t>(batch) * context * kv_cache_bytes_per_token(cfg_, opts_.kv_cache_dtype, dt_);
}

}  // namespace cuda

Result<std::unique_ptr<ModelRunner>> make_cuda_runner(const LlmConfig& cfg, const Checkpoint& ckpt,
                                                      const RunnerOptions& opts, const LoadProgress& progress) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    (void)cudaGetLastError();
    return Status::Unavailable("no CUDA device");
  }
  if (opts.device_index < 0 || opts.device_index >= count)
    return Status::InvalidArgument("CUDA device {} does not exist ({} visible)", opts.device_index, count);
  GPUOPT_CUDA_RETURN(cudaSetDevice(opts.device_index));
  auto r = std::make_unique<cuda::CudaRunner>(cfg, opts);
  GPUOPT_RETURN_IF_ERROR(r->init(ckpt, progress));
  return std::unique_ptr<ModelRunner>(std::move(r));
}

Result<std::unique_ptr<ModelRunner>> make_cuda_runner(const LlmConfig& cfg, const Checkpoint& ckpt,
                                                      const RunnerOptions& opts) {
  return make_cuda_runner(cfg, ckpt, opts, LoadProgress{});
}

}  // namespace gpuopt::llm
