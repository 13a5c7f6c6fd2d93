// The OpenAI API's response bodies, in its exact shapes: completions and chat completions, whole
// or as server-sent-event chunks (`data: {...}\n\n`, the last `data: [DONE]\n\n`), and Triton's
// generate answers.
//
//   Choice c;  c.text = "Hello";  c.finish_reason = "stop";
//   std::string body = completion_json(meta, {c}, usage);
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "llm/sampling.h"
#include "llm/tokenizer.h"
#include "server/openai/protocol.h"

namespace gpuopt::server::openai {

struct ResponseMeta {
  std::string id;  // "cmpl-…" / "chatcmpl-…"
  int64_t created = 0;
  std::string model;
  Endpoint endpoint = Endpoint::kCompletions;
  bool logprobs = false;
};

struct Choice {
  int index = 0;
  std::string text;
  std::vector<llm::SampledToken> tokens;
  std::string finish_reason;  // "" while running
  int64_t completion_tokens = 0;
};

struct Usage {
  int64_t prompt_tokens = 0, completion_tokens = 0, cached_tokens = 0;
  nlohmann::ordered_json json() const;
};

std::string new_request_id(const char* prefix);
int64_t unix_now();

// Logprobs of `tokens` in the endpoint's shape (completions: tokens/token_logprobs/top_logprobs/
// text_offset from `text_offset`; chat: content[{token, logprob, bytes, top_logprobs}]).
nlohmann::ordered_json logprobs_json(const ResponseMeta& m, const llm::Tokenizer& tok,
                                     const std::vector<llm::SampledToken>& tokens, size_t text_offset);

// A whole (non-streamed) answer.
std::string completion_json(const ResponseMeta& m, const llm::Tokenizer& tok, const std::vector<Choice>& choices,
                            const Usage& usage);
// One streamed chunk (an SSE event) for choice `c` carrying `text` and `tokens` (with
// `finish_reason` when it is the choice's last); `role` adds the chat's first delta.
std::string chunk_event(const ResponseMeta& m, const llm::Tokenizer& tok, int index, const std::string& text,
                        const std::vector<llm::SampledToken>& tokens, size_t text_offset,
                        const std::string& finish_reason, bool role, bool include_usage_null);
std::string usage_event(const ResponseMeta& m, const Usage& usage);
inline const char* kDoneEvent = "data: [DONE]\n\n";

// Triton generate: {"model_name", "model_version", "text_output"} (+ finish_reason, token counts).
std::string generate_json(const std::string& model, const std::string& text, const std::string& finish_reason,
                          const Usage& usage);
std::string generate_event(const std::string& model, const std::string& text, const std::string& finish_reason);

// OpenAI's finish_reason for the engine's ("stop", "length"; "abort" and "timeout" kept).
std::string finish_reason_name(const std::string& engine_reason);

}  // namespace gpuopt::server::openai
