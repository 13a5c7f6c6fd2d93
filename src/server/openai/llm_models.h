// Language models served next to the ONNX models: a folder holding config.json, *.safetensors and
// tokenizer.json (tokenizer_config.json for the chat template; config.pbtxt optional) in a model
// repository, or one named on the command line (--llm-model). Each loads into a runner on its
// device, a tokenizer, its chat template and a serving engine (llm/engine.h).
//
//   LlmServeOptions o;                       // engine and device options (gpuopt serve's flags)
//   LlmModels models(o);
//   GPUOPT_RETURN_IF_ERROR(models.load("tiny", "models/tiny"));
//   auto m = models.find("tiny");            // null when unknown
//   m->engine->submit(...);
#pragma once

#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "llm/checkpoint.h"
#include "llm/engine.h"
#include "llm/tokenizer.h"
#include "server/openai/chat_template.h"

namespace gpuopt::server::openai {

struct LlmServeOptions {
  llm::EngineOptions engine;
  std::string device = "auto";  // auto (cuda when present), cpu, cuda, cuda:N
  int64_t num_kv_blocks = 0;    // 0: from --gpu-memory-utilization (CUDA) or the runner's default
  double gpu_memory_utilization = 0.9;
  std::string dtype = "auto";   // auto (the checkpoint's on CUDA, fp32 on the CPU), fp16, bf16, fp32
  int64_t max_model_len = 0;    // 0: the config's max_position_embeddings
  bool random_weights = false;  // tests and benchmarks: seeded random weights, no safetensors needed
  bool quant_kernels = false;   // CUDA, GPTQ/AWQ folders: packed weights and the quantized kernels
  std::string kv_cache_dtype = "auto";  // llm/kv_cache.h's names (auto, fp16, fp8, fp8_e4m3)
  size_t stream_buffer_bytes = size_t{1} << 20;  // unsent SSE bytes per stream (a slow reader)
  std::vector<std::pair<std::string, std::string>> extra;  // --llm-model: (name, folder)
};

struct LlmModel {
  std::string name, path, device;
  int64_t created = 0;        // Unix seconds of the load (/v1/models)
  int64_t max_model_len = 0;  // prompt + completion tokens at most
  llm::LlmConfig config;
  std::unique_ptr<llm::Checkpoint> checkpoint;  // before engine: the runner reads its memory
  std::shared_ptr<const llm::Tokenizer> tokenizer;
  std::shared_ptr<ChatTemplate> chat;  // null: the model has no chat template (chat answers 400)
  std::unique_ptr<llm::LlmEngine> engine;
};

// A folder that holds a language model (config.json naming a supported architecture... checked at
// load; here: config.json and tokenizer.json, and safetensors weights).
bool is_llm_model_dir(const std::filesystem::path& dir);

class LlmModels {
 public:
  explicit LlmModels(LlmServeOptions options);
  ~LlmModels();
  const LlmServeOptions& options() const { return opt_; }
  // Loads `dir` as `name` (blocking). Errors name the model and file.
  Status load(const std::string& name, const std::filesystem::path& dir);
  std::shared_ptr<LlmModel> find(const std::string& name) const;
  std::vector<std::shared_ptr<LlmModel>> all() const;
  std::vector<std::string> failed() const;  // names that did not load
  // Takes `name` out of service: new requests get 404 at once, running ones finish (up to `drain`),
  // then its engine and weights are released. NotFound when it is neither loaded nor failed.
  Status unload(const std::string& name, std::chrono::milliseconds drain);
  // /v2/repository/index entries of the generation models.
  nlohmann::json index() const;
  void stop(std::chrono::milliseconds drain);
  // Prometheus text of every engine's statistics (vLLM's names under gpuopt:, label model_name).
  std::string metrics_text() const;
  // Runs `task` on the request-preparation threads (chat template, tokenizer, submission), so a
  // long prompt or a slow template never holds an HTTP I/O thread. Tasks posted after stop()
  // run at once on the caller's thread.
  void post(std::function<void()> task);

 private:
  struct PrepPool;
  LlmServeOptions opt_;
  std::unique_ptr<PrepPool> prep_;
  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<LlmModel>> models_;
  std::map<std::string, std::string> failed_;  // name -> reason
};

}  // namespace gpuopt::server::openai
