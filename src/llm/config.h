// A decoder-only language model's shape, read from a Hugging Face `config.json`.
//
//   GPUOPT_ASSIGN_OR_RETURN(LlmConfig cfg, load_llm_config("models/tiny-llama"));
//   fmt::print("{} layers, {} KV bytes/token\n", cfg.num_layers, cfg.kv_bytes_per_token(DType::F16));
//
// Supported: LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM (RMSNorm, RoPE with linear or
// llama3 scaling, grouped-query attention, SiLU-gated MLP, tied or untied embeddings). Anything
// else is refused by name with the supported list.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"

namespace gpuopt::llm {

enum class LlmArch { Llama, Mistral, Qwen2 };

struct RopeScaling {
  enum class Kind { None, Linear, Llama3 };
  Kind kind = Kind::None;
  double factor = 1.0;
  double low_freq_factor = 1.0;    // llama3
  double high_freq_factor = 4.0;   // llama3
  int64_t original_max_position = 8192;  // llama3
};

struct LlmConfig {
  std::string architecture;  // as written in config.json, e.g. "LlamaForCausalLM"
  LlmArch arch = LlmArch::Llama;
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;  // hidden_size / num_heads unless config.json says head_dim
  int64_t max_position = 0;
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  RopeScaling rope_scaling;
  bool tie_word_embeddings = false;
  bool qkv_bias = false;  // Qwen2: q/k/v projections carry a bias
  int64_t sliding_window = 0;  // Mistral; 0 = none
  DType dtype = DType::F16;    // torch_dtype: the checkpoint's float type (F16, BF16, F32)
  std::vector<int64_t> bos_token_ids;
  std::vector<int64_t> eos_token_ids;

  int64_t kv_bytes_per_token(DType kv_dtype) const;  // all layers, K and V
  int64_t num_params() const;
  // RoPE inverse frequencies (head_dim/2 of them) with rope_scaling applied, in double.
  std::vector<double> rope_inv_freq() const;
};

// Parses config.json's text; `where` names the file in messages.
Result<LlmConfig> parse_llm_config(const std::string& json_text, const std::string& where);
Result<LlmConfig> load_llm_config(const std::filesystem::path& model_dir);

}  // namespace gpuopt::llm
