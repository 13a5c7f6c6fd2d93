// Sampling parameters (the OpenAI API's and vLLM's) and the CPU sampler, the oracle for the GPU's.
//
// Order of operations, the same on every device: penalties on the logits (repetition as in
// Hugging Face: divide positive / multiply negative logits of tokens seen in prompt or output;
// presence and frequency as in OpenAI: subtract over output tokens), then temperature 0 -> argmax
// (lowest id on ties); else logits / temperature, softmax, top-k, top-p, min-p, renormalise, draw
// with the request's generator (Philox-4x32-10 keyed by seed, counter = (step, sequence index)).
// Top-k keeps the k most probable (ties: lower id first); top-p the smallest most-probable-first
// prefix of those whose mass reaches top_p of theirs; min-p those with prob >= min_p * the best's.
// The draw walks the kept tokens best first and takes the first whose cumulative probability
// exceeds u * (their total mass), u = philox_uniform(seed, step, 0): a batch gives each sequence
// its own seed (the generate loop uses seed + sequence index).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace gpuopt::llm {

struct SamplingParams {
  double temperature = 1.0;   // 0: greedy
  int64_t top_k = 0;          // 0: off
  double top_p = 1.0;
  double min_p = 0.0;
  double repetition_penalty = 1.0;
  double presence_penalty = 0.0;
  double frequency_penalty = 0.0;
  std::optional<uint64_t> seed;  // none: a random one per request
  int64_t max_new_tokens = 16;
  std::vector<std::string> stop;           // stop strings (text not emitted past them)
  std::vector<int64_t> stop_token_ids;     // besides the model's EOS ids
  bool ignore_eos = false;
  int logprobs = 0;  // top-n logprobs per emitted token (0: none)
};

struct TokenLogprob {
  int64_t token = 0;
  float logprob = 0;
};

struct SampledToken {
  int64_t token = 0;
  float logprob = 0;                // of the chosen token (log-softmax of the raw logits)
  std::vector<TokenLogprob> top;    // params.logprobs entries, best first
};

// One draw for one sequence. `logits` [vocab] (raw, f32), `prompt` and `output` the tokens so far
// (for the penalties), `step` the index of this output token.
SampledToken sample_cpu(const float* logits, int64_t vocab, const SamplingParams& params,
                        uint64_t seed, const std::vector<int64_t>& prompt,
                        const std::vector<int64_t>& output, int64_t step);

// Philox-4x32-10 uniform in [0, 1) from (seed, counter): identical on CPU and GPU. Key =
// (seed low 32 bits, seed high 32), counter words = (counter_lo low, counter_lo high, counter_hi
// low, counter_hi high) as Random123's philox4x32 (10 rounds); u = (first output word >> 8) * 2^-24.
float philox_uniform(uint64_t seed, uint64_t counter_hi, uint64_t counter_lo);

}  // namespace gpuopt::llm
