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

// config.json's quantization_config: how the checkpoint's linear weights are stored.
// GPTQ: qweight int32 [K*bits/32, N] packed along K, qzeros int32 [groups, N*bits/32] packed along
// N, scales [groups, N], g_idx int32 [K]. AWQ (GEMM): qweight/qzeros int32 [K or groups, N/8]
// packed along N in the order 0 2 4 6 1 3 5 7, scales [groups, N]. FP8 (compressed-tensors): weight
// F8_E4M3 [N, K], weight_scale f32 per tensor or per output channel, input_scale optional.
struct WeightQuant {
  enum class Method { None, Gptq, Awq, Fp8 };
  Method method = Method::None;
  int bits = 16;
  int64_t group_size = -1;   // -1: one group over the whole input dimension
  bool desc_act = false;     // GPTQ act-order: g_idx is a permutation's groups, read it
  bool sym = true;
  bool zero_minus_one = true;  // GPTQ v1 (checkpoint_format "gptq") stores zero - 1
  bool fp8_per_channel = false;
  bool fp8_static_input = false;  // an input_scale per linear (static activation scales)
  bool fp8_dynamic_input = false; // activations quantized per token/tensor at run time
  std::string describe() const;  // "gptq int4 g128 act-order", "fp8 e4m3 per-channel", "none"
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
  WeightQuant quant;  // Method::None for float checkpoints

  int64_t kv_bytes_per_token(DType kv_dtype) const;  // all layers, K and V
  int64_t num_params() const;
  // RoPE inverse frequencies (head_dim/2 of them) with rope_scaling applied, in double.
  std::vector<double> rope_inv_freq() const;
};

// Parses config.json's text; `where` names the file in messages.
Result<LlmConfig> parse_llm_config(const std::string& json_text, const std::string& where);
// quantization_config alone (the object); `where` names it in messages. Unknown or unsupported
// methods and layouts are refused by name.
Result<WeightQuant> parse_quant_config(const std::string& json_text, const std::string& where);
Result<LlmConfig> load_llm_config(const std::filesystem::path& model_dir);

}  // namespace gpuopt::llm
