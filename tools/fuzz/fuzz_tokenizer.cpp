// libFuzzer target: a tokenizer.json (src/llm/tokenizer.h) and a text, split at the input's first
// NUL byte. The file must end in a Tokenizer or a Status; a Tokenizer must encode the text (any
// bytes, UTF-8 or not), decode the ids with and without special tokens, and stream them, all
// without a crash, a hang or unbounded memory.
#include "llm/tokenizer.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  const size_t nul = in.find('\0');
  const std::string json(in.substr(0, nul));
  const std::string_view text = nul == std::string_view::npos ? std::string_view() : in.substr(nul + 1);
  auto tok = gpuopt::llm::Tokenizer::from_json(json, "fuzz/tokenizer.json");
  if (!tok.ok()) return 0;
  for (bool special : {true, false}) {
    std::vector<int64_t> ids = (*tok)->encode(text, special);
    ids.push_back(static_cast<int64_t>(text.size()));  // an id that may be no token at all
    (void)(*tok)->decode(ids, special);
    gpuopt::llm::IncrementalDecoder dec(**tok, special);
    for (int64_t id : ids) (void)dec.push(id);
    (void)dec.flush();
  }
  return 0;
}
