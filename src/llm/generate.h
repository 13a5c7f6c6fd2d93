// The generate loop over a ModelRunner: prefill a batch of prompts in chunks, then decode one
// token per sequence per step until EOS, a stop id or string, max_new_tokens or the context's end.
// Timing (TTFT, inter-token latencies, tok/s) and each decode step's roofline share come back with
// the tokens.
//
//   GenerateOptions go;
//   go.tokenizer = tok.get();             // optional: text, stop strings
//   go.on_text = [](size_t seq, const std::string& piece) { fmt::print("{}", piece); };
//   GPUOPT_ASSIGN_OR_RETURN(GenerateResult r, generate(*runner, {{prompt_ids, params}}, go));
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/status.h"
#include "llm/runner.h"
#include "llm/sampling.h"
#include "llm/tokenizer.h"

namespace gpuopt::llm {

struct GenerateRequest {
  std::vector<int64_t> prompt;
  SamplingParams params;
};

struct GenerateOptions {
  const Tokenizer* tokenizer = nullptr;  // none: no text, stop strings refused
  int max_step_tokens = 512;             // tokens per step (prefill chunks)
  double bandwidth_gbs = 0;              // > 0: each decode step's roofline share is reported
  bool capture_first_logits = false;     // keep the raw logits of each sequence's first output
  // Streaming: called for each sampled token and for each piece of finished text (held back
  // while it could still be the start of a stop string).
  std::function<void(size_t seq, const SampledToken&)> on_token;
  std::function<void(size_t seq, const std::string& text)> on_text;
};

struct SequenceResult {
  std::vector<int64_t> tokens;        // generated ids (a final EOS / stop id included)
  std::vector<SampledToken> sampled;  // with logprobs when asked
  std::string text;                   // decoded, stop string excluded (tokenizer only)
  std::string finish_reason;          // "stop" (EOS, stop id or string), "length"
  double ttft_ms = 0;                 // from the start to this sequence's first token
  std::vector<float> first_logits;    // capture_first_logits: [vocab]
};

struct GenerateResult {
  std::vector<SequenceResult> seqs;
  double ttft_ms = 0;  // the batch's: when every sequence has its first token
  double total_ms = 0;
  double prefill_ms = 0;  // steps that carried prompt tokens
  double decode_ms = 0;   // steps of decode tokens alone
  int64_t prompt_tokens = 0;
  int64_t generated_tokens = 0;
  int64_t decode_steps = 0;
  double tok_s = 0;                       // decode throughput: tokens of decode-only steps / their time
  double itl_p50_ms = 0, itl_p99_ms = 0;  // gaps between a sequence's consecutive tokens
  double roofline_frac = -1;              // median over decode steps of bytes/time/bandwidth; < 0: unknown
};

// Checks every prompt (non-empty, ids in the vocabulary, shorter than the context) and that the
// runner's KV blocks hold every sequence's prompt + max_new_tokens before anything runs.
Result<GenerateResult> generate(ModelRunner& runner, const std::vector<GenerateRequest>& requests,
                                const GenerateOptions& opts);

// KV blocks a batch needs: sum over requests of ceil(min(prompt + max_new, context) / block).
int64_t blocks_needed(const LlmConfig& cfg, const std::vector<GenerateRequest>& requests, int block_size);

}  // namespace gpuopt::llm
