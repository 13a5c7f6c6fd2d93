// `gpuopt quantize MODEL_DIR -o OUT_DIR`: a float Llama/Mistral/Qwen2 folder written as a
// quantized folder other tools load: GPTQ (int8 per channel or int4 per group, round to nearest),
// AWQ (int4 with activation-aware scales from calibration text) or compressed-tensors FP8 (e4m3
// per-channel weights, dynamic per-token activations, or static per-tensor activation scales from
// calibration text). Every decoder linear is quantized; the
// embeddings, norms, biases and the LM head stay as they are. Tokenizer and other files are copied.
//
//   LlmQuantizeOptions o;
//   o.scheme = LlmQuantScheme::Int4;
//   GPUOPT_ASSIGN_OR_RETURN(LlmQuantizeReport r, quantize_llm("llama", "llama-int4", o));
//   fmt::print("{}", llm_quant_report_text(r));
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "llm/config.h"

namespace gpuopt::llm {

enum class LlmQuantScheme { Int8, Int4, Awq, Fp8 };
Result<LlmQuantScheme> parse_llm_quant_scheme(const std::string& s);  // int8, int4, awq, fp8

struct LlmQuantizeOptions {
  LlmQuantScheme scheme = LlmQuantScheme::Int4;
  int64_t group_size = 0;  // 0: the scheme's default (int4/awq 128, int8 per channel = -1)
  bool sym = true;         // GPTQ; AWQ is always asymmetric
  std::string calibration;            // a text file, one sample per line (AWQ needs it; FP8: static
                                      // activation scales)
  int64_t calibration_tokens = 4096;  // at most this many tokens are run
  std::function<void(std::string_view stage, size_t done, size_t total)> progress;
};

struct LlmLayerReport {
  std::string name;  // model.layers.0.self_attn.q_proj
  int64_t out = 0, in = 0;
  double rel_error = 0;  // ||W - dequantized(W)||_F / ||W||_F (AWQ: the effective weight)
  double max_abs_error = 0;
  double awq_ratio = -1;       // AWQ: the exponent picked for its group's scales
  double rtn_out_error = -1;   // AWQ: relative output error on the calibration rows, plain RTN
  double awq_out_error = -1;   //      ... and with the picked scales
};

struct LlmQuantizeReport {
  std::string input, output;
  WeightQuant quant;
  std::vector<LlmLayerReport> layers;
  size_t bytes_in = 0, bytes_out = 0;  // safetensors data
  int64_t calibration_tokens = 0;
};

Result<LlmQuantizeReport> quantize_llm(const std::filesystem::path& in, const std::filesystem::path& out,
                                       const LlmQuantizeOptions& o);
std::string llm_quant_report_text(const LlmQuantizeReport& r);
nlohmann::json llm_quant_report_json(const LlmQuantizeReport& r);

}  // namespace gpuopt::llm
