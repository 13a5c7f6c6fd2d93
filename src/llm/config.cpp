// config.json → LlmConfig. Field names and defaults are transformers' (LlamaConfig, MistralConfig,
// Qwen2Config); anything the runners do not implement is refused by name rather than ignored, so a
// model never runs with silently wrong math.
#include "llm/config.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <fstream>
#include <sstream>

namespace gpuopt::llm {
namespace {

using nlohmann::json;

constexpr const char* kSupported = "LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM";

// Upper bounds that keep every size product inside int64 and every buffer allocatable; far above
// any released model of these families.
constexpr int64_t kMaxDim = int64_t{1} << 20;
constexpr int64_t kMaxVocab = int64_t{1} << 24;
constexpr int64_t kMaxLayers = 4096;
constexpr int64_t kMaxPositions = int64_t{1} << 26;

bool present(const json& j, const char* key) {
  return j.contains(key) && !j.at(key).is_null();
}

Result<int64_t> get_int(const json& j, const char* key, const std::string& where, int64_t lo, int64_t hi,
                        std::optional<int64_t> dflt = std::nullopt) {
  if (!present(j, key)) {
    if (dflt) return *dflt;
    return Status::InvalidArgument("{}: '{}' is missing", where, key);
  }
  const json& v = j.at(key);
  if (!v.is_number_integer())
    return Status::InvalidArgument("{}: '{}' must be an integer, got {}", where, key, v.dump());
  const int64_t x = v.get<int64_t>();
  if (x < lo || x > hi) return Status::InvalidArgument("{}: '{}' = {} is not in {}..{}", where, key, x, lo, hi);
  return x;
}

Result<double> get_real(const json& j, const char* key, const std::string& where, double dflt) {
  if (!present(j, key)) return dflt;
  const json& v = j.at(key);
  if (!v.is_number()) return Status::InvalidArgument("{}: '{}' must be a number, got {}", where, key, v.dump());
  const double x = v.get<double>();
  if (!std::isfinite(x)) return Status::InvalidArgument("{}: '{}' is not finite", where, key);
  return x;
}

Result<bool> get_bool(const json& j, const char* key, const std::string& where, bool dflt) {
  if (!present(j, key)) return dflt;
  if (!j.at(key).is_boolean()) return Status::InvalidArgument("{}: '{}' must be true or false", where, key);
  return j.at(key).get<bool>();
}

// bos_token_id / eos_token_id: an int, a list of ints, or null.
Result<std::vector<int64_t>> get_ids(const json& j, const char* key, const std::string& where, int64_t vocab) {
  std::vector<int64_t> out;
  if (!present(j, key)) return out;
  const json& v = j.at(key);
  auto one = [&](const json& e) -> Status {
    if (!e.is_number_integer() || e.get<int64_t>() < 0 || e.get<int64_t>() >= vocab)
      return Status::InvalidArgument("{}: '{}' holds {}, not a token id in 0..{}", where, key, e.dump(), vocab - 1);
    out.push_back(e.get<int64_t>());
    return Status::Ok();
  };
  if (v.is_array()) {
    for (const json& e : v) GPUOPT_RETURN_IF_ERROR(one(e));
  } else {
    GPUOPT_RETURN_IF_ERROR(one(v));
  }
  return out;
}

Status parse_rope_scaling(const json& j, const std::string& where, LlmConfig& c) {
  if (!present(j, "rope_scaling")) return Status::Ok();
  const json& rs = j.at("rope_scaling");
  if (!rs.is_object()) return Status::InvalidArgument("{}: 'rope_scaling' must be an object or null", where);
  // transformers reads "rope_type" and falls back to the older "type".
  std::string type;
  if (rs.contains("rope_type") && rs.at("rope_type").is_string())
    type = rs.at("rope_type").get<std::string>();
  else if (rs.contains("type") && rs.at("type").is_string())
    type = rs.at("type").get<std::string>();
  else
    return Status::InvalidArgument("{}: 'rope_scaling' names no 'rope_type'", where);
  const std::string w = where + " rope_scaling";
  if (type == "default") return Status::Ok();
  if (type != "linear" && type != "llama3")
    return Status::Unimplemented("{}: rope_scaling type '{}' is not supported (supported: linear, llama3)", where,
                                 type);
  GPUOPT_ASSIGN_OR_RETURN(c.rope_scaling.factor, get_real(rs, "factor", w, 0.0));
  if (!(c.rope_scaling.factor >= 1.0))
    return Status::InvalidArgument("{}: 'factor' must be >= 1, got {}", w, c.rope_scaling.factor);
  if (type == "linear") {
    c.rope_scaling.kind = RopeScaling::Kind::Linear;
    return Status::Ok();
  }
  c.rope_scaling.kind = RopeScaling::Kind::Llama3;
  GPUOPT_ASSIGN_OR_RETURN(c.rope_scaling.low_freq_factor, get_real(rs, "low_freq_factor", w, 1.0));
  GPUOPT_ASSIGN_OR_RETURN(c.rope_scaling.high_freq_factor, get_real(rs, "high_freq_factor", w, 4.0));
  GPUOPT_ASSIGN_OR_RETURN(c.rope_scaling.original_max_position,
                          get_int(rs, "original_max_position_embeddings", w, 1, kMaxPositions, 8192));
  if (!(c.rope_scaling.low_freq_factor > 0) || !(c.rope_scaling.high_freq_factor > c.rope_scaling.low_freq_factor))
    return Status::InvalidArgument("{}: needs 0 < low_freq_factor < high_freq_factor (got {} and {})", w,
                                   c.rope_scaling.low_freq_factor, c.rope_scaling.high_freq_factor);
  return Status::Ok();
}

Result<DType> parse_dtype(const json& j, const std::string& where) {
  // Newer transformers write "dtype", older "torch_dtype"; absent means the float32 default.
  const char* key = present(j, "dtype") ? "dtype" : "torch_dtype";
  if (!present(j, key)) return DType::F32;
  if (!j.at(key).is_string()) return Status::InvalidArgument("{}: '{}' must be a string", where, key);
  const std::string s = j.at(key).get<std::string>();
  if (s == "float16" || s == "half") return DType::F16;
  if (s == "bfloat16") return DType::BF16;
  if (s == "float32" || s == "float") return DType::F32;
  return Status::Unimplemented("{}: {} '{}' is not supported (float16, bfloat16, float32)", where, key, s);
}

}  // namespace

int64_t LlmConfig::kv_bytes_per_token(DType kv_dtype) const {
  return 2 * num_layers * num_kv_heads * head_dim * static_cast<int64_t>(dtype_size(kv_dtype));
}

int64_t LlmConfig::num_params() const {
  const int64_t q = num_heads * head_dim, kv = num_kv_heads * head_dim;
  int64_t layer = hidden_size * q + 2 * hidden_size * kv + q * hidden_size  // q, k, v, o
                  + 3 * hidden_size * intermediate_size                     // gate, up, down
                  + 2 * hidden_size;                                        // two RMSNorms
  if (qkv_bias) layer += q + 2 * kv;
  int64_t n = vocab_size * hidden_size + num_layers * layer + hidden_size;
  if (!tie_word_embeddings) n += vocab_size * hidden_size;
  return n;
}

std::vector<double> LlmConfig::rope_inv_freq() const {
  const int64_t half = head_dim / 2;
  std::vector<double> f(static_cast<size_t>(half));
  for (int64_t i = 0; i < half; ++i)
    f[static_cast<size_t>(i)] = 1.0 / std::pow(rope_theta, static_cast<double>(2 * i) / static_cast<double>(head_dim));
  if (rope_scaling.kind == RopeScaling::Kind::Linear) {
    for (double& x : f) x /= rope_scaling.factor;
  } else if (rope_scaling.kind == RopeScaling::Kind::Llama3) {
    // transformers' _compute_llama3_parameters: long wavelengths are divided by `factor`, short
    // ones kept, the band between interpolated smoothly.
    const double factor = rope_scaling.factor, lo = rope_scaling.low_freq_factor, hi = rope_scaling.high_freq_factor;
    const double old_ctx = static_cast<double>(rope_scaling.original_max_position);
    const double low_freq_wavelen = old_ctx / lo, high_freq_wavelen = old_ctx / hi;
    for (double& x : f) {
      const double wavelen = 2 * M_PI / x;
      const double scaled = wavelen > low_freq_wavelen ? x / factor : x;
      if (wavelen < high_freq_wavelen || wavelen > low_freq_wavelen) {
        x = scaled;
      } else {
        const double smooth = (old_ctx / wavelen - lo) / (hi - lo);
        x = (1 - smooth) * scaled / factor + smooth * scaled;
      }
    }
  }
  return f;
}

Result<LlmConfig> parse_llm_config(const std::string& json_text, const std::string& where) {
  json j = json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Status::InvalidArgument("{}: not valid JSON", where);
  if (!j.is_object()) return Status::InvalidArgument("{}: not a JSON object", where);
  LlmConfig c;
  if (present(j, "architectures") && j.at("architectures").is_array() && !j.at("architectures").empty() &&
      j.at("architectures")[0].is_string()) {
    c.architecture = j.at("architectures")[0].get<std::string>();
  } else {
    return Status::InvalidArgument("{}: 'architectures' names no model class (supported: {})", where, kSupported);
  }
  if (c.architecture == "LlamaForCausalLM")
    c.arch = LlmArch::Llama;
  else if (c.architecture == "MistralForCausalLM")
    c.arch = LlmArch::Mistral;
  else if (c.architecture == "Qwen2ForCausalLM")
    c.arch = LlmArch::Qwen2;
  else
    return Status::Unimplemented("{}: architecture '{}' is not supported (supported: {})", where, c.architecture,
                                 kSupported);

  GPUOPT_ASSIGN_OR_RETURN(c.vocab_size, get_int(j, "vocab_size", where, 1, kMaxVocab));
  GPUOPT_ASSIGN_OR_RETURN(c.hidden_size, get_int(j, "hidden_size", where, 1, kMaxDim));
  GPUOPT_ASSIGN_OR_RETURN(c.intermediate_size, get_int(j, "intermediate_size", where, 1, kMaxDim));
  GPUOPT_ASSIGN_OR_RETURN(c.num_layers, get_int(j, "num_hidden_layers", where, 1, kMaxLayers));
  GPUOPT_ASSIGN_OR_RETURN(c.num_heads, get_int(j, "num_attention_heads", where, 1, kMaxDim));
  GPUOPT_ASSIGN_OR_RETURN(c.num_kv_heads, get_int(j, "num_key_value_heads", where, 1, kMaxDim, c.num_heads));
  if (c.num_heads % c.num_kv_heads != 0)
    return Status::InvalidArgument("{}: num_attention_heads {} is not a multiple of num_key_value_heads {}", where,
                                   c.num_heads, c.num_kv_heads);
  if (present(j, "head_dim")) {
    GPUOPT_ASSIGN_OR_RETURN(c.head_dim, get_int(j, "head_dim", where, 2, 4096));
  } else {
    if (c.hidden_size % c.num_heads != 0)
      return Status::InvalidArgument("{}: hidden_size {} is not a multiple of num_attention_heads {}", where,
                                     c.hidden_size, c.num_heads);
    c.head_dim = c.hidden_size / c.num_heads;
  }
  if (c.head_dim % 2 != 0)
    return Status::InvalidArgument("{}: head_dim {} is odd (RoPE rotates pairs)", where, c.head_dim);
  GPUOPT_ASSIGN_OR_RETURN(c.max_position, get_int(j, "max_position_embeddings", where, 1, kMaxPositions, 2048));
  GPUOPT_ASSIGN_OR_RETURN(c.rms_norm_eps, get_real(j, "rms_norm_eps", where, 1e-6));
  if (!(c.rms_norm_eps > 0)) return Status::InvalidArgument("{}: 'rms_norm_eps' must be > 0", where);
  GPUOPT_ASSIGN_OR_RETURN(c.rope_theta, get_real(j, "rope_theta", where, 10000.0));
  if (!(c.rope_theta > 1)) return Status::InvalidArgument("{}: 'rope_theta' must be > 1", where);
  GPUOPT_RETURN_IF_ERROR(parse_rope_scaling(j, where, c));
  GPUOPT_ASSIGN_OR_RETURN(c.tie_word_embeddings, get_bool(j, "tie_word_embeddings", where, false));
  GPUOPT_ASSIGN_OR_RETURN(c.dtype, parse_dtype(j, where));

  if (present(j, "hidden_act") && j.at("hidden_act") != "silu")
    return Status::Unimplemented("{}: hidden_act {} is not supported (silu)", where, j.at("hidden_act").dump());
  if (present(j, "partial_rotary_factor") && j.at("partial_rotary_factor") != 1.0)
    return Status::Unimplemented("{}: partial_rotary_factor is not supported", where);
  c.qkv_bias = c.arch == LlmArch::Qwen2;  // Qwen2Attention's q/k/v projections always carry a bias
  if (c.arch == LlmArch::Llama || c.arch == LlmArch::Mistral) {
    GPUOPT_ASSIGN_OR_RETURN(bool attention_bias, get_bool(j, "attention_bias", where, false));
    if (attention_bias) return Status::Unimplemented("{}: attention_bias = true is not supported", where);
  }
  GPUOPT_ASSIGN_OR_RETURN(bool mlp_bias, get_bool(j, "mlp_bias", where, false));
  if (mlp_bias) return Status::Unimplemented("{}: mlp_bias = true is not supported", where);
  if (c.arch == LlmArch::Mistral) {
    GPUOPT_ASSIGN_OR_RETURN(c.sliding_window, get_int(j, "sliding_window", where, 1, kMaxPositions, 0));
  } else if (c.arch == LlmArch::Qwen2) {
    // Qwen2 windows only layers past max_window_layers, and only with use_sliding_window.
    GPUOPT_ASSIGN_OR_RETURN(bool use_sw, get_bool(j, "use_sliding_window", where, false));
    if (use_sw) return Status::Unimplemented("{}: use_sliding_window = true is not supported for Qwen2", where);
  }
  GPUOPT_ASSIGN_OR_RETURN(c.bos_token_ids, get_ids(j, "bos_token_id", where, c.vocab_size));
  GPUOPT_ASSIGN_OR_RETURN(c.eos_token_ids, get_ids(j, "eos_token_id", where, c.vocab_size));
  if (present(j, "quantization_config")) {
    GPUOPT_ASSIGN_OR_RETURN(c.quant, parse_quant_config(j.at("quantization_config").dump(), where + " quantization_config"));
  }
  return c;
}

Result<LlmConfig> load_llm_config(const std::filesystem::path& model_dir) {
  const std::filesystem::path p = model_dir / "config.json";
  std::ifstream f(p, std::ios::binary);
  if (!f) return Status::NotFound("'{}' does not exist or cannot be read", p.string());
  std::ostringstream ss;
  ss << f.rdbuf();
  return parse_llm_config(ss.str(), p.string());
}

}  // namespace gpuopt::llm
