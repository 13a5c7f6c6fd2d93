// libFuzzer target: an OpenAI API request body (/v1/completions, /v1/chat/completions) and a Triton
// generate body through the server's parsers (server/openai/protocol.h), then what the server
// derives from a parsed request (sampling parameters, the error body). Must end in a request or an
// ApiError — never a crash, a hang or an exception.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "server/openai/protocol.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gpuopt::server::openai;
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  ApiError err;
  auto use = [&](const std::optional<GenerationRequest>& r) {
    if (!r) {
      volatile size_t n = error_json(err).size();
      (void)n;
      return;
    }
    volatile int64_t sink = static_cast<int64_t>(r->prompts.size() + r->messages.size());
    for (int i = 0; i < std::min(r->n, 4); ++i) sink = sink + r->sampling(r->max_tokens.value_or(16), i).logprobs;
  };
  use(parse_completion_request(body, &err));
  use(parse_chat_request(body, &err));
  use(parse_generate_request(body, "m", &err));
  return 0;
}
