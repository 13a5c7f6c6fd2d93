#include "llm/perplexity.h"

#include <algorithm>
#include <cmath>

#include "llm/kv_cache.h"

namespace gpuopt::llm {

Result<PerplexityResult> perplexity(ModelRunner& runner, const std::vector<int32_t>& tokens,
                                    const std::vector<int32_t>& prefix, const PerplexityOptions& opts) {
  const int64_t per_window = opts.context - static_cast<int64_t>(prefix.size());
  if (per_window < 1)
    return Status::InvalidArgument("perplexity: a context of {} tokens leaves no room after the {}-token prefix",
                                   opts.context, prefix.size());
  if (opts.context > runner.config().max_position)
    return Status::InvalidArgument("perplexity: a context of {} tokens is longer than the model's {}", opts.context,
                                   runner.config().max_position);
  const int64_t n = opts.max_tokens > 0 ? std::min<int64_t>(opts.max_tokens, static_cast<int64_t>(tokens.size()))
                                        : static_cast<int64_t>(tokens.size());
  std::vector<std::vector<int32_t>> windows;
  for (int64_t i = 0; i < n; i += per_window) {
    std::vector<int32_t> w = prefix;
    w.insert(w.end(), tokens.begin() + i, tokens.begin() + std::min(n, i + per_window));
    if (w.size() >= 2) windows.push_back(std::move(w));
  }
  if (windows.empty()) return Status::InvalidArgument("perplexity: the text holds fewer than 2 tokens to score");
  const int bs = runner.block_size();
  const int64_t per_seq_blocks = (opts.context + bs - 1) / bs;
  const int64_t batch = std::min<int64_t>(opts.batch, runner.num_kv_blocks() / per_seq_blocks);
  if (batch < 1)
    return Status::OutOfMemory("perplexity: a {}-token window needs {} KV blocks, the cache holds {}",
                                     opts.context, per_seq_blocks, runner.num_kv_blocks());

  int64_t steps = 0, steps_done = 0;  // a group's steps: its longest window's length - 1
  for (size_t g0 = 0; g0 < windows.size(); g0 += static_cast<size_t>(batch)) steps += static_cast<int64_t>(windows[g0].size()) - 1;

  PerplexityResult r;
  r.windows = static_cast<int64_t>(windows.size());
  std::vector<std::vector<int32_t>> preds(windows.size());
  int64_t hits = 0;
  BlockAllocator alloc(static_cast<int32_t>(runner.num_kv_blocks()));
  std::vector<float> logits;
  for (size_t g0 = 0; g0 < windows.size(); g0 += static_cast<size_t>(batch)) {
    const size_t g1 = std::min(windows.size(), g0 + static_cast<size_t>(batch));
    std::vector<std::vector<int32_t>> tables(g1 - g0);
    size_t longest = 0;
    for (size_t w = g0; w < g1; ++w) {
      if (!alloc.grow(tables[w - g0], static_cast<int64_t>(windows[w].size()), bs))
        return Status::Internal("perplexity: KV blocks ran out for window {}", w);
      longest = std::max(longest, windows[w].size());
    }
    for (size_t t = 0; t + 1 < longest; ++t) {
      StepBatch b;
      std::vector<size_t> active;
      for (size_t w = g0; w < g1; ++w) {
        if (windows[w].size() <= t + 1) continue;
        active.push_back(w);
        b.seqs.push_back({1, static_cast<int64_t>(t), &tables[w - g0], true});
        b.tokens.push_back(windows[w][t]);
      }
      GPUOPT_RETURN_IF_ERROR(runner.step(b, &logits));
      const size_t vocab = logits.size() / active.size();
      for (size_t a = 0; a < active.size(); ++a) {
        const float* row = logits.data() + a * vocab;
        const int32_t target = windows[active[a]][t + 1];
        if (target < 0 || static_cast<size_t>(target) >= vocab)
          return Status::InvalidArgument("perplexity: token id {} is outside the model's vocabulary of {}", target,
                                         vocab);
        const size_t best = static_cast<size_t>(std::max_element(row, row + vocab) - row);
        const double m = row[best];
        if (!std::isfinite(m)) return Status::Internal("perplexity: non-finite logits at window {}", active[a]);
        double sum = 0;
        for (size_t v = 0; v < vocab; ++v) sum += std::exp(static_cast<double>(row[v]) - m);
        r.nll_sum += m + std::log(sum) - static_cast<double>(row[target]);
        hits += best == static_cast<size_t>(target);
        if (opts.keep_predictions) preds[active[a]].push_back(static_cast<int32_t>(best));
      }
      r.scored_tokens += static_cast<int64_t>(active.size());
      if (opts.on_progress) opts.on_progress(++steps_done, steps);
    }
    for (auto& tb : tables) alloc.release(tb);
  }
  r.perplexity = std::exp(r.nll_sum / static_cast<double>(r.scored_tokens));
  r.top1 = static_cast<double>(hits) / static_cast<double>(r.scored_tokens);
  for (auto& p : preds) r.predictions.insert(r.predictions.end(), p.begin(), p.end());
  return r;
}

}  // namespace gpuopt::llm
