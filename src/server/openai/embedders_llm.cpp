// Decoder embeddings (embeddings.h): last-token pooling over a ModelRunner's final-norm hidden
// states, and load_embedder's choice between an ONNX encoder and a decoder checkpoint.
#include <fmt/format.h>

#include <algorithm>
#include <mutex>

#include "core/device.h"
#include "llm/checkpoint.h"
#include "llm/config.h"
#include "server/openai/embeddings.h"

namespace gpuopt::server::openai {

namespace fs = std::filesystem;

namespace {

constexpr int64_t kStepTokens = 2048;  // tokens per runner step (several inputs share one)
constexpr int kStepSeqs = 64;

class DecoderEmbedder final : public Embedder {
 public:
  DecoderEmbedder(std::unique_ptr<llm::ModelRunner> r, std::shared_ptr<const llm::Tokenizer> t, PoolingConfig p)
      : runner_(std::move(r)), tok_(std::move(t)), pool_(p) {
    const int64_t bs = runner_->block_size();
    max_tokens_ = std::min({runner_->config().max_position, runner_->num_kv_blocks() * bs, kStepTokens});
  }
  const llm::Tokenizer& tokenizer() const override { return *tok_; }
  int64_t max_input_tokens() const override { return max_tokens_; }
  int64_t dimensions() const override { return runner_->config().hidden_size; }
  const PoolingConfig& pooling() const override { return pool_; }

  Result<std::vector<std::vector<float>>> embed(const std::vector<std::vector<int64_t>>& inputs) override {
    const auto& cfg = runner_->config();
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (inputs[i].empty() || static_cast<int64_t>(inputs[i].size()) > max_tokens_)
        return Status::InvalidArgument("input[{}] has {} tokens (1..{} fit)", i, inputs[i].size(), max_tokens_);
      for (int64_t id : inputs[i])
        if (id < 0 || id >= cfg.vocab_size)
          return Status::InvalidArgument("input[{}]: token id {} is not in the model's 0..{}", i, id, cfg.vocab_size - 1);
    }
    // One caller at a time: the runner and its KV cache belong to this embedder, each step
    // reuses the blocks from 0.
    std::lock_guard lock(mu_);
    const int64_t bs = runner_->block_size(), blocks = runner_->num_kv_blocks();
    const int64_t H = cfg.hidden_size;
    std::vector<std::vector<float>> out(inputs.size());
    size_t i = 0;
    while (i < inputs.size()) {
      llm::StepBatch b;
      std::vector<std::vector<int32_t>> tables;
      tables.reserve(kStepSeqs);
      std::vector<size_t> which;
      int64_t used_blocks = 0, tokens = 0;
      while (i < inputs.size() && static_cast<int>(which.size()) < kStepSeqs) {
        const int64_t n = static_cast<int64_t>(inputs[i].size());
        const int64_t need = (n + bs - 1) / bs;
        if (!which.empty() && (used_blocks + need > blocks || tokens + n > kStepTokens)) break;
        std::vector<int32_t> t(static_cast<size_t>(need));
        for (int64_t k = 0; k < need; ++k) t[static_cast<size_t>(k)] = static_cast<int32_t>(used_blocks + k);
        tables.push_back(std::move(t));
        used_blocks += need;
        tokens += n;
        for (int64_t id : inputs[i]) b.tokens.push_back(static_cast<int32_t>(id));
        which.push_back(i++);
      }
      for (size_t k = 0; k < which.size(); ++k)
        b.seqs.push_back({.num_tokens = static_cast<int32_t>(inputs[which[k]].size()), .start_pos = 0,
                          .block_table = &tables[k], .sample = true});
      std::vector<float> h;
      GPUOPT_RETURN_IF_ERROR(runner_->hidden_states(b, &h));
      if (h.size() != which.size() * static_cast<size_t>(H))
        return Status::Internal("hidden_states returned {} values for {} sequences of {}", h.size(), which.size(), H);
      for (size_t k = 0; k < which.size(); ++k)
        out[which[k]] = pool(h.data() + k * static_cast<size_t>(H), 1, H, {1}, PoolingConfig{Pooling::kCls, pool_.normalize});
    }
    return out;
  }

 private:
  std::mutex mu_;
  std::unique_ptr<llm::ModelRunner> runner_;
  std::shared_ptr<const llm::Tokenizer> tok_;
  PoolingConfig pool_;
  int64_t max_tokens_ = 0;
};

}  // namespace

Result<std::shared_ptr<Embedder>> make_decoder_embedder(std::unique_ptr<llm::ModelRunner> runner,
                                                        std::shared_ptr<const llm::Tokenizer> tokenizer,
                                                        PoolingConfig pooling) {
  if (pooling.pooling != Pooling::kLast)
    return Status::Unimplemented("decoder embeddings pool the last token only, not '{}'", pooling_name(pooling.pooling));
  if (!runner || !tokenizer) return Status::InvalidArgument("decoder embedder: a runner and a tokenizer are needed");
  return std::shared_ptr<Embedder>(std::make_shared<DecoderEmbedder>(std::move(runner), std::move(tokenizer), pooling));
}

Result<std::shared_ptr<Embedder>> load_embedder(const fs::path& dir, const std::string& device) {
  GPUOPT_ASSIGN_OR_RETURN(Device dev, parse_device(device));
  for (const char* c : {"model.onnx", "onnx/model.onnx", "1/model.onnx"})
    if (fs::is_regular_file(dir / c)) {
      SessionOptions so;
      so.device = dev;
      return load_onnx_embedder(dir, so);
    }
  if (!fs::is_regular_file(dir / "config.json"))
    return Status::NotFound("'{}': neither an ONNX encoder (model.onnx) nor a checkpoint (config.json)", dir.string());
  GPUOPT_ASSIGN_OR_RETURN(llm::LlmConfig cfg, llm::load_llm_config(dir));
  GPUOPT_ASSIGN_OR_RETURN(PoolingConfig pool, read_pooling_config(dir, true));
  GPUOPT_ASSIGN_OR_RETURN(std::unique_ptr<llm::Tokenizer> tok, llm::Tokenizer::from_file(dir / "tokenizer.json"));
  GPUOPT_ASSIGN_OR_RETURN(auto ck, llm::open_checkpoint(dir, cfg));
  llm::RunnerOptions ro;
  ro.max_batch = kStepSeqs;
  ro.max_step_tokens = static_cast<int>(kStepTokens);
  ro.device_index = dev.index;
  // Room for one step's worth of tokens (kStepTokens), whatever their split into sequences.
  ro.num_kv_blocks = (std::min(cfg.max_position, kStepTokens) + ro.block_size - 1) / ro.block_size + kStepSeqs;
  std::unique_ptr<llm::ModelRunner> runner;
  if (dev.is_cuda()) {
    ro.compute_dtype = cfg.dtype == DType::BF16 ? DType::BF16 : DType::F16;
    GPUOPT_ASSIGN_OR_RETURN(runner, llm::make_cuda_runner(cfg, *ck, ro));
  } else {
    GPUOPT_ASSIGN_OR_RETURN(runner, llm::make_cpu_runner(cfg, *ck, ro));
  }
  return make_decoder_embedder(std::move(runner), std::shared_ptr<const llm::Tokenizer>(std::move(tok)), pool);
}

}  // namespace gpuopt::server::openai
