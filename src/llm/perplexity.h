// Perplexity of a token stream under a model runner, as llama.cpp's `perplexity` and Hugging
// Face's "perplexity of fixed-length models" (stride = context) compute it: the stream is cut
// into windows of `context` tokens (each starting with the tokenizer's prefix, e.g. BOS), every
// token of a window after the first is predicted from the ones before it, and
//   perplexity = exp(-mean log p(token | window prefix)).
// Windows run `batch` at a time through the runner's decode step (one token per window per step),
// so any runner (CPU oracle, CUDA, quantized kernels) is measured the same way.
//
//   PerplexityOptions po{.context = 512, .batch = 16};
//   GPUOPT_ASSIGN_OR_RETURN(PerplexityResult r, perplexity(*runner, ids, /*prefix=*/{bos}, po));
//   fmt::print("{:.3f} over {} tokens\n", r.perplexity, r.scored_tokens);
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "core/status.h"
#include "llm/runner.h"

namespace gpuopt::llm {

struct PerplexityOptions {
  int64_t context = 512;   // tokens per window, prefix included
  int batch = 16;          // windows decoded together (fewer if the KV cache holds fewer)
  int64_t max_tokens = 0;  // 0: the whole stream; else its first max_tokens tokens
  bool keep_predictions = false;
  std::function<void(int64_t steps_done, int64_t steps)> on_progress;  // after each decode step
};

struct PerplexityResult {
  int64_t windows = 0;
  int64_t scored_tokens = 0;
  double nll_sum = 0;      // -sum of log p (natural log) over the scored tokens
  double perplexity = 0;   // exp(nll_sum / scored_tokens)
  double top1 = 0;         // share of scored tokens that were the model's most probable one
  // The model's most probable token at each scored position, windows in order (keep_predictions):
  // two runs' predictions compare as greedy agreement under the same teacher-forced text.
  std::vector<int32_t> predictions;
};

// `prefix`: tokens put before each window's text (the tokenizer's BOS; may be empty).
Result<PerplexityResult> perplexity(ModelRunner& runner, const std::vector<int32_t>& tokens,
                                    const std::vector<int32_t>& prefix, const PerplexityOptions& opts);

}  // namespace gpuopt::llm
