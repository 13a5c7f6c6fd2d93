// The language-model side of `gpuopt inspect`.
#include "llm/config_report.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <map>

#include "core/table.h"
#include "llm/checkpoint.h"
#include "llm/config.h"

namespace gpuopt::llm {
namespace {

const char* rope_name(RopeScaling::Kind k) {
  switch (k) {
    case RopeScaling::Kind::Linear:
      return "linear";
    case RopeScaling::Kind::Llama3:
      return "llama3";
    default:
      return "none";
  }
}

// Contexts worth a row: a short one, a long one and the model's own limit.
std::vector<int64_t> contexts_for(const LlmConfig& c) {
  std::vector<int64_t> out;
  for (int64_t x : {int64_t{2048}, int64_t{8192}, int64_t{32768}})
    if (x < c.max_position) out.push_back(x);
  out.push_back(c.max_position);
  return out;
}

}  // namespace

bool is_model_dir(const std::filesystem::path& p) {
  std::error_code ec;
  return std::filesystem::is_directory(p, ec) && std::filesystem::exists(p / "config.json", ec);
}

Result<std::string> inspect_model_dir(const std::filesystem::path& dir, bool json) {
  GPUOPT_ASSIGN_OR_RETURN(LlmConfig c, load_llm_config(dir));
  // The weights on disk, when there are any: their real dtype and size.
  const bool has_weights = std::filesystem::exists(dir / "model.safetensors") ||
                           std::filesystem::exists(dir / "model.safetensors.index.json");
  std::map<std::string, int64_t> dtypes;  // dtype -> tensors
  int64_t weight_bytes = c.num_params() * static_cast<int64_t>(dtype_size(c.dtype));
  if (has_weights) {
    GPUOPT_ASSIGN_OR_RETURN(auto ck, open_checkpoint(dir, c));
    weight_bytes = static_cast<int64_t>(0);
    for (const WeightView& w : ck->tensors()) {
      ++dtypes[w.quant ? w.file_dtype : std::string(dtype_name(w.dtype))];
      weight_bytes += static_cast<int64_t>(w.bytes);
    }
  }
  // The KV cache in the weights' float type (what the CUDA runner keeps by default).
  const DType kv_dt = c.dtype;
  const int64_t kv_tok = c.kv_bytes_per_token(kv_dt);
  const std::vector<int64_t> batches = {1, 8, 32};
  const auto ctxs = contexts_for(c);

  if (json) {
    nlohmann::json j = {{"model", dir.string()},
                        {"architecture", c.architecture},
                        {"parameters", c.num_params()},
                        {"torch_dtype", dtype_name(c.dtype)},
                        {"quantization", c.quant.describe()},
                        {"weights", has_weights ? nlohmann::json(dtypes) : nlohmann::json()},
                        {"weight_bytes", weight_bytes},
                        {"vocab_size", c.vocab_size},
                        {"hidden_size", c.hidden_size},
                        {"intermediate_size", c.intermediate_size},
                        {"layers", c.num_layers},
                        {"heads", c.num_heads},
                        {"kv_heads", c.num_kv_heads},
                        {"head_dim", c.head_dim},
                        {"max_position", c.max_position},
                        {"rope_theta", c.rope_theta},
                        {"rope_scaling", rope_name(c.rope_scaling.kind)},
                        {"sliding_window", c.sliding_window},
                        {"tie_word_embeddings", c.tie_word_embeddings},
                        {"qkv_bias", c.qkv_bias},
                        {"bos_token_ids", c.bos_token_ids},
                        {"eos_token_ids", c.eos_token_ids},
                        {"kv_dtype", dtype_name(kv_dt)},
                        {"kv_bytes_per_token", kv_tok}};
    for (int64_t ctx : ctxs)
      for (int64_t b : batches)
        j["memory"].push_back({{"context", ctx},
                               {"batch", b},
                               {"kv_bytes", kv_tok * ctx * b},
                               {"total_bytes", weight_bytes + kv_tok * ctx * b}});
    return j.dump(2) + "\n";
  }
  std::string out;
  out += fmt::format("model        {}\narchitecture {}\n", dir.string(), c.architecture);
  const double np = static_cast<double>(c.num_params());
  out += fmt::format("parameters   {} ({})\n", c.num_params(),
                     np >= 1e9 ? fmt::format("{:.2f} B", np / 1e9) : fmt::format("{:.2f} M", np / 1e6));
  std::vector<std::string> dt;
  for (const auto& [name, n] : dtypes) dt.push_back(fmt::format("{} x{}", name, n));
  out += fmt::format("weights      {} ({}){}\n", format_bytes(static_cast<double>(weight_bytes)),
                     has_weights ? fmt::format("{}", fmt::join(dt, ", ")) : std::string("no safetensors: config only"),
                     has_weights ? "" : fmt::format(", {} at torch_dtype", dtype_name(c.dtype)));
  if (c.quant.method != WeightQuant::Method::None) out += fmt::format("quantization {}\n", c.quant.describe());
  out += fmt::format("shape        {} layers, hidden {}, MLP {}, vocab {}\n", c.num_layers, c.hidden_size,
                     c.intermediate_size, c.vocab_size);
  out += fmt::format("attention    {} heads, {} KV heads, head dim {}{}{}\n", c.num_heads, c.num_kv_heads, c.head_dim,
                     c.qkv_bias ? ", q/k/v bias" : "",
                     c.sliding_window ? fmt::format(", sliding window {}", c.sliding_window) : std::string());
  out += fmt::format(
      "context      {} (RoPE theta {}, scaling {}{})\n", c.max_position, c.rope_theta, rope_name(c.rope_scaling.kind),
      c.rope_scaling.kind == RopeScaling::Kind::None ? std::string() : fmt::format(" x{}", c.rope_scaling.factor));
  out += fmt::format("embeddings   {}\n", c.tie_word_embeddings ? "tied (LM head = embedding table)" : "untied");
  out += fmt::format("KV cache     {} per token ({}, all layers, K and V)\n\n",
                     format_bytes(static_cast<double>(kv_tok)), dtype_name(kv_dt));
  std::vector<std::string> header = {"context"};
  for (int64_t b : batches) header.push_back(fmt::format("batch {}: KV", b));
  header.push_back(fmt::format("batch {}: weights + KV", batches.back()));
  Table t(header, "memory (weights + KV cache; activations not counted)");
  for (int64_t ctx : ctxs) {
    std::vector<std::string> row = {std::to_string(ctx)};
    for (int64_t b : batches) row.push_back(format_bytes(static_cast<double>(kv_tok * ctx * b)));
    row.push_back(format_bytes(static_cast<double>(weight_bytes + kv_tok * ctx * batches.back())));
    t.add(row);
  }
  out += t.render();
  return out;
}

}  // namespace gpuopt::llm
