// One sequence's output as it grows: each sampled token either ends it (EOS, a stop id,
// max_new_tokens, a stop string) or extends its text, which is released only once it can no longer
// be the start of a stop string. The generate loop and the serving engine share it, so offline and
// served text and finish reasons agree.
//
//   TextStream ts(cfg, params, tokenizer, /*skip_special_tokens=*/true, max_new_for(cfg, prompt.size(), params));
//   std::string ready;
//   for (;;) {
//     const int64_t tok = sample(...);
//     const bool done = ts.push(tok, &ready);   // `ready`: text made final by this token (appended)
//     if (done) break;                          // ts.finish_reason(): "stop" or "length"
//   }
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "llm/config.h"
#include "llm/sampling.h"
#include "llm/tokenizer.h"

namespace gpuopt::llm {

// Tokens a sequence can produce: max_new_tokens, but the last token fed back must still have a
// position inside the context (the final one is sampled, never fed).
int64_t max_new_for(const LlmConfig& c, int64_t prompt_len, const SamplingParams& p);

// The request checks shared by generate() and the engine: `who` names the prompt in the message
// ("the prompt", "prompt 3").
Status check_request(const LlmConfig& c, const std::vector<int64_t>& prompt, const SamplingParams& p,
                     const Tokenizer* tokenizer, const std::string& who);

class TextStream {
 public:
  // `tokenizer` may be null: no text (and no stop strings: check_request refuses them).
  TextStream(const LlmConfig& c, const SamplingParams& p, const Tokenizer* tokenizer, bool skip_special_tokens,
             int64_t max_new);
  // Takes the next sampled token; appends the text it makes final to *ready. Returns finished().
  bool push(int64_t token, std::string* ready);
  // Ends the sequence for an outside reason ("abort", "timeout", "error"): the held-back text is
  // released (up to a stop string it completes) into *ready.
  void finish(const std::string& reason, std::string* ready);

  bool finished() const { return finished_; }
  const std::string& finish_reason() const { return finish_reason_; }
  const std::string& text() const { return text_; }  // everything so far, a stop string cut off
  int64_t num_tokens() const { return num_tokens_; }

 private:
  void append_text(const std::string& piece, std::string* ready);

  const LlmConfig& c_;
  const SamplingParams& p_;
  std::unique_ptr<IncrementalDecoder> decoder_;
  int64_t max_new_ = 0;
  int64_t num_tokens_ = 0;
  bool finished_ = false;
  std::string finish_reason_;
  std::string text_;
  size_t emitted_ = 0;   // bytes of text_ already released
  size_t holdback_ = 0;  // bytes kept back while they may begin a stop string
};

}  // namespace gpuopt::llm
