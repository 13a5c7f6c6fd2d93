// gpuopt perf (OpenAI mode), between its source files: the prompts and the request bodies.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "cli/perf_llm.h"

namespace gpuopt::cli::llmperf {

struct Prompt {
  std::string text;             // a text prompt (chat: the user message)
  std::vector<int64_t> ids;     // or token ids (completions)
  nlohmann::json messages;      // or whole chat messages (--input-file)
  int64_t input_tokens = 0;     // as the client counts them (0: unknown)
  int64_t max_tokens = 0;
};

// num_prompts + warmup prompts (the warm-up ones first). Draws the input lengths, then the output
// lengths, then the tokens, from `rng`.
Result<std::vector<Prompt>> make_prompts(const Options& o, NumpyRandom& rng);
std::string request_body(const Options& o, const Prompt& p);

}  // namespace gpuopt::cli::llmperf
