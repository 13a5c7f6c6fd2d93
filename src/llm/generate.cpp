// The generate loop. Each step carries, in request order, one decode token for every sequence past
// its prompt and prompt chunks for the others until the step's token budget is spent (chunked
// prefill as vLLM schedules it), so a long prompt never stalls the batch's decoding for long.
#include "llm/generate.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <random>

#include "llm/kv_cache.h"
#include "llm/text_stream.h"

namespace gpuopt::llm {
namespace {

using Clock = std::chrono::steady_clock;
double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

double percentile(std::vector<double> v, double p) {  // nearest rank
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t i = static_cast<size_t>(std::max(1.0, std::ceil(p * static_cast<double>(v.size())))) - 1;
  return v[std::min(i, v.size() - 1)];
}

struct SeqState {
  const GenerateRequest* req = nullptr;
  uint64_t seed = 0;
  int64_t max_new = 0;
  int64_t cached = 0;  // tokens whose K/V are in the cache
  std::vector<int32_t> table;
  bool finished = false;
  std::unique_ptr<TextStream> text;
  Clock::time_point last;
};

}  // namespace

int64_t blocks_needed(const LlmConfig& cfg, const std::vector<GenerateRequest>& requests, int block_size) {
  int64_t n = 0;
  for (const GenerateRequest& r : requests) {
    // K/V is written for the prompt and every generated token but the last.
    const int64_t prompt = static_cast<int64_t>(r.prompt.size());
    const int64_t cached = prompt + std::max<int64_t>(0, max_new_for(cfg, prompt, r.params) - 1);
    n += (cached + block_size - 1) / block_size;
  }
  return n;
}

Result<GenerateResult> generate(ModelRunner& runner, const std::vector<GenerateRequest>& requests,
                                const GenerateOptions& opts) {
  const LlmConfig& c = runner.config();
  const int bs = runner.block_size();
  for (size_t i = 0; i < requests.size(); ++i) {
    const std::string who = requests.size() > 1 ? fmt::format("prompt {}", i) : std::string("the prompt");
    GPUOPT_RETURN_IF_ERROR(check_request(c, requests[i].prompt, requests[i].params, opts.tokenizer, who));
  }
  const int64_t need = blocks_needed(c, requests, bs);
  if (need > runner.num_kv_blocks())
    return Status::OutOfMemory(
        "the KV cache holds {} blocks of {} tokens ({} tokens) but {} prompt(s) with their new tokens need {} blocks: "
        "lower --batch or --max-new-tokens{}",
        runner.num_kv_blocks(), bs, runner.num_kv_blocks() * bs, requests.size(), need,
        runner.num_kv_blocks() > 0 ? " (or raise --gpu-memory-utilization)" : "");
  BlockAllocator alloc(static_cast<int32_t>(runner.num_kv_blocks()));

  GenerateResult res;
  res.seqs.resize(requests.size());
  std::vector<SeqState> st(requests.size());
  std::random_device rd;
  for (size_t i = 0; i < requests.size(); ++i) {
    SeqState& s = st[i];
    s.req = &requests[i];
    s.seed = requests[i].params.seed ? *requests[i].params.seed + i : (static_cast<uint64_t>(rd()) << 32) | rd();
    s.max_new = max_new_for(c, static_cast<int64_t>(requests[i].prompt.size()), requests[i].params);
    s.text = std::make_unique<TextStream>(c, requests[i].params, opts.tokenizer, true, s.max_new);
    res.prompt_tokens += static_cast<int64_t>(requests[i].prompt.size());
  }

  std::vector<double> itl, roofline;
  const Clock::time_point start = Clock::now();
  size_t first_tokens = 0;
  const int budget = std::max(1, opts.max_step_tokens);
  std::vector<size_t> sampling;  // seq index of each sampling entry in the step
  std::vector<size_t> owner;     // seq index of each entry of the step
  while (true) {
    StepBatch b;
    sampling.clear();
    owner.clear();
    int left = budget;
    bool has_prefill = false;
    int64_t context_sum = 0;
    for (size_t i = 0; i < st.size() && left > 0; ++i) {
      SeqState& s = st[i];
      if (s.finished) continue;
      const auto& prompt = s.req->prompt;
      const auto& out = res.seqs[i].tokens;
      StepSeq q;
      q.start_pos = s.cached;
      if (s.cached < static_cast<int64_t>(prompt.size())) {
        q.num_tokens = static_cast<int32_t>(std::min<int64_t>(left, static_cast<int64_t>(prompt.size()) - s.cached));
        for (int32_t k = 0; k < q.num_tokens; ++k)
          b.tokens.push_back(static_cast<int32_t>(prompt[static_cast<size_t>(s.cached + k)]));
        q.sample = s.cached + q.num_tokens == static_cast<int64_t>(prompt.size());
        has_prefill = true;
      } else {
        q.num_tokens = 1;
        b.tokens.push_back(static_cast<int32_t>(out.back()));
        q.sample = true;
      }
      if (!alloc.grow(s.table, s.cached + q.num_tokens, bs))
        return Status::Internal("the KV cache ran out of blocks after the up-front check");
      q.block_table = &s.table;
      left -= q.num_tokens;
      context_sum += s.cached + q.num_tokens;
      if (q.sample) sampling.push_back(i);
      owner.push_back(i);
      b.seqs.push_back(q);
    }
    if (b.seqs.empty()) break;

    std::vector<SampledToken> toks;
    std::vector<const SamplingParams*> params;
    std::vector<uint64_t> seeds;
    std::vector<const std::vector<int64_t>*> prompts, outputs;
    std::vector<int64_t> steps;
    bool want_logits = false;
    for (size_t i : sampling) {
      params.push_back(&st[i].req->params);
      seeds.push_back(st[i].seed);
      prompts.push_back(&st[i].req->prompt);
      outputs.push_back(&res.seqs[i].tokens);
      steps.push_back(static_cast<int64_t>(res.seqs[i].tokens.size()));
      want_logits = want_logits || (opts.capture_first_logits && res.seqs[i].tokens.empty());
    }
    const Clock::time_point t0 = Clock::now();
    if (want_logits) {  // the host samples, from logits it keeps
      std::vector<float> logits;
      GPUOPT_RETURN_IF_ERROR(runner.step(b, &logits));
      for (size_t k = 0; k < sampling.size(); ++k) {
        const float* l = logits.data() + k * static_cast<size_t>(c.vocab_size);
        if (res.seqs[sampling[k]].tokens.empty()) res.seqs[sampling[k]].first_logits.assign(l, l + c.vocab_size);
        toks.push_back(sample_cpu(l, c.vocab_size, *params[k], seeds[k], *prompts[k], *outputs[k], steps[k]));
      }
    } else {
      GPUOPT_RETURN_IF_ERROR(runner.step_sample(b, params, seeds, prompts, outputs, steps, &toks));
    }
    const Clock::time_point t1 = Clock::now();
    const double step_ms = ms_between(t0, t1);
    if (has_prefill) {
      res.prefill_ms += step_ms;
    } else {
      res.decode_ms += step_ms;
      ++res.decode_steps;
      const int n = static_cast<int>(b.seqs.size());
      if (opts.bandwidth_gbs > 0 && step_ms > 0) {
        const double bytes = static_cast<double>(runner.decode_bytes(n, context_sum / n));
        roofline.push_back(bytes / (step_ms * 1e-3) / (opts.bandwidth_gbs * 1e9));
      }
    }
    for (size_t k = 0; k < b.seqs.size(); ++k)  // their K/V are cached now
      st[owner[k]].cached = b.seqs[k].start_pos + b.seqs[k].num_tokens;

    for (size_t k = 0; k < sampling.size(); ++k) {
      const size_t i = sampling[k];
      SeqState& s = st[i];
      SequenceResult& r = res.seqs[i];
      const int64_t tok = toks[k].token;
      r.tokens.push_back(tok);
      r.sampled.push_back(toks[k]);
      ++res.generated_tokens;
      if (r.tokens.size() == 1) {
        r.ttft_ms = ms_between(start, t1);
        if (++first_tokens == st.size()) res.ttft_ms = r.ttft_ms;
      } else {
        itl.push_back(ms_between(s.last, t1));
        if (!has_prefill) res.tok_s += 1;  // counted here, divided by decode time below
      }
      s.last = t1;
      if (opts.on_token) opts.on_token(i, toks[k]);
      std::string ready;
      s.finished = s.text->push(tok, &ready);
      if (s.finished) {
        r.finish_reason = s.text->finish_reason();
        if (opts.tokenizer) r.text = s.text->text();
      }
      if (!ready.empty() && opts.on_text) opts.on_text(i, ready);
      if (s.finished) alloc.release(s.table);
    }
  }
  res.total_ms = ms_between(start, Clock::now());
  if (first_tokens < st.size()) res.ttft_ms = res.total_ms;
  res.tok_s = res.decode_ms > 0
                  ? res.tok_s / (res.decode_ms * 1e-3)
                  : (res.total_ms > 0 ? static_cast<double>(res.generated_tokens) / (res.total_ms * 1e-3) : 0);
  res.itl_p50_ms = percentile(itl, 0.50);
  res.itl_p99_ms = percentile(itl, 0.99);
  if (!roofline.empty()) res.roofline_frac = percentile(roofline, 0.50);
  return res;
}

}  // namespace gpuopt::llm
