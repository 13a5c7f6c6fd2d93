// The OpenAI API's requests (/v1/completions, /v1/chat/completions) and Triton's generate
// extension (/v2/models/NAME/generate), parsed into one typed request; errors in OpenAI's body.
// Unknown fields are ignored (as vLLM does); a known field of the wrong type or out of range is a
// 400 naming it.
//
//   ApiError err;
//   auto req = parse_chat_request(body, &err);
//   if (!req) return error_response(err);
//   llm::SamplingParams sp = req->sampling(/*max_new_tokens=*/64);
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "llm/sampling.h"
#include "net/http.h"

namespace gpuopt::server::openai {

// {"error": {"message", "type", "param", "code"}} with its HTTP status.
struct ApiError {
  int status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;  // "" -> null
  std::string code;   // "" -> null
};
std::string error_json(const ApiError& e);
net::HttpResponse error_response(const ApiError& e);
ApiError make_error(int status, std::string message, std::string param = {});

enum class Endpoint { kCompletions, kChat, kGenerate };

struct PromptInput {
  std::string text;          // when !is_ids
  std::vector<int64_t> ids;  // token ids given by the client
  bool is_ids = false;
};

struct GenerationRequest {
  Endpoint endpoint = Endpoint::kCompletions;
  std::string model;
  std::vector<PromptInput> prompts;  // completions: one or more; generate: one; chat: none
  nlohmann::ordered_json messages;   // chat: [{"role", "content": string}], parts joined
  bool add_generation_prompt = true;
  int n = 1;
  std::vector<std::string> stop;
  std::vector<int64_t> stop_token_ids;
  std::optional<int64_t> max_tokens;  // max_tokens / max_completion_tokens
  double temperature = 1.0, top_p = 1.0, min_p = 0.0, repetition_penalty = 1.0;
  int64_t top_k = 0;
  std::optional<uint64_t> seed;
  double presence_penalty = 0, frequency_penalty = 0;
  bool logprobs = false;  // completions: logprobs is an int (then top_logprobs = it); chat: a bool
  int top_logprobs = 0;
  bool echo = false;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  bool ignore_eos = false;
  bool skip_special_tokens = true;
  std::string user;

  // The engine's sampling parameters for choice `index` of this request (seed + index, as vLLM's
  // n > 1 with a seed), with `max_new_tokens` already resolved against the context.
  llm::SamplingParams sampling(int64_t max_new_tokens, int index) const;
};

constexpr int kMaxN = 128;             // choices per prompt
constexpr int kMaxTopLogprobs = 20;    // as OpenAI's chat API
constexpr size_t kMaxStopStrings = 16;
constexpr size_t kMaxPrompts = 1024;   // prompts in one /v1/completions request

std::optional<GenerationRequest> parse_completion_request(std::string_view body, ApiError* err);
std::optional<GenerationRequest> parse_chat_request(std::string_view body, ApiError* err);
// Triton's generate: {"text_input": "...", "parameters": {...}} or the same keys at the top level
// (max_tokens, temperature, top_p, top_k, seed, stop, stream, ...). `model` from the path.
std::optional<GenerationRequest> parse_generate_request(std::string_view body, const std::string& model,
                                                        ApiError* err);

}  // namespace gpuopt::server::openai
