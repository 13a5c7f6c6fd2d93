// The serving engine: continuous (in-flight) batching of many requests over one ModelRunner and
// its paged KV cache. One engine thread loops: the scheduler (scheduler.h) picks this step's
// decode tokens and prefill chunks under a token budget, the runner runs them, each sequence's
// new tokens are turned into text (stop strings held back) and handed to its request's callback.
// Under KV pressure a sequence is preempted (blocks freed, recomputed later), never dropped; full
// prompt blocks are shared through the prefix cache.
//
//   EngineOptions eo;
//   GPUOPT_ASSIGN_OR_RETURN(auto engine, LlmEngine::start(std::move(runner), tokenizer, eo));
//   EngineRequest r;
//   r.prompt = tokenizer->encode("Hello", true);
//   r.params.max_new_tokens = 32;
//   GPUOPT_ASSIGN_OR_RETURN(uint64_t id, engine->submit(std::move(r), [](const EngineOutput& o) {
//     fmt::print("{}", o.text);                    // called on the engine thread: keep it short
//     if (o.finished) fmt::print(" [{}]\n", o.finish_reason);
//   }));
//   engine->cancel(id);                            // e.g. the client went away
//   engine->stop();                                // finishes what runs, refuses new work
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "llm/runner.h"
#include "llm/sampling.h"
#include "llm/tokenizer.h"

namespace gpuopt::llm {

struct EngineOptions {
  int max_num_seqs = 256;              // sequences in one step (vLLM's --max-num-seqs)
  int max_num_batched_tokens = 2048;   // tokens in one step: decodes + prefill chunks
  int max_waiting = 1024;              // queued requests; submit() beyond it: Unavailable (429)
  bool enable_prefix_caching = true;
  std::chrono::milliseconds default_timeout{0};  // per request, from submit; 0: none
};

struct EngineRequest {
  std::vector<int64_t> prompt;  // token ids (checked: non-empty, in vocabulary, < context)
  SamplingParams params;        // max_new_tokens, stop strings/ids, logprobs, seed, penalties
  std::chrono::milliseconds timeout{0};  // 0: EngineOptions::default_timeout
  bool skip_special_tokens = true;       // in the text
};

// One update of one request, in order. The last has finished == true.
struct EngineOutput {
  uint64_t id = 0;
  std::vector<SampledToken> tokens;  // tokens sampled since the previous update (with logprobs)
  std::string text;                  // text made final since the previous update (UTF-8, never
                                     // part of a stop string; may be empty while held back)
  bool finished = false;
  // "stop" (EOS, stop id or string), "length" (max_new_tokens or the context's end), "abort"
  // (cancelled), "timeout", "error" (then `error` says why).
  std::string finish_reason;
  std::string error;
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;  // so far
  int64_t cached_prompt_tokens = 0;  // prompt tokens served from the prefix cache
};
using OutputCallback = std::function<void(const EngineOutput&)>;

// A cumulative histogram in Prometheus' form (upper bounds in seconds; counts not cumulative).
struct Histogram {
  std::vector<double> bounds;
  std::vector<uint64_t> counts;  // bounds.size() + 1 (the last is +Inf)
  double sum = 0;
  uint64_t count = 0;
  void observe(double v);
};

// What the metrics endpoint shows (vLLM's metric names under a gpuopt: prefix).
struct EngineStats {
  int64_t num_running = 0, num_waiting = 0;
  int64_t num_preemptions_total = 0;
  int64_t prompt_tokens_total = 0, generation_tokens_total = 0;
  int64_t requests_finished_total = 0;
  double kv_cache_usage = 0;          // used blocks / all blocks, 0..1
  int64_t kv_cache_blocks = 0;        // all blocks (tokens = blocks x block size)
  int64_t prefix_cache_queries = 0;   // prompt tokens looked up
  int64_t prefix_cache_hits = 0;      // of those, found
  Histogram time_to_first_token_s, inter_token_latency_s, e2e_request_latency_s, queue_time_s;
  // The engine thread's time per step (from taking new requests, after any idle wait, to the last
  // token handed to its callback) and, of it, the time inside the runner's step: the difference is
  // the server's own share of a step (scheduling, detokenizing, callbacks).
  int64_t steps_total = 0;
  double step_seconds_total = 0, runner_seconds_total = 0;
};

class LlmEngine {
 public:
  virtual ~LlmEngine() = default;
  static Result<std::unique_ptr<LlmEngine>> start(std::unique_ptr<ModelRunner> runner,
                                                   std::shared_ptr<const Tokenizer> tokenizer,  // may be null
                                                   const EngineOptions& opts);
  // Queues a request; `on_output` is called on the engine thread for each update, the last with
  // finished == true, exactly once finished. Errors: InvalidArgument (bad prompt or params, one
  // line naming which), Unavailable (queue full or stopping: answer 429/503 at once).
  virtual Result<uint64_t> submit(EngineRequest request, OutputCallback on_output) = 0;
  // Ends a request at the next step (its blocks freed); its callback gets finish_reason "abort".
  // Unknown or finished ids are ignored.
  virtual void cancel(uint64_t id) = 0;
  virtual EngineStats stats() const = 0;
  virtual const LlmConfig& config() const = 0;
  virtual const Tokenizer* tokenizer() const = 0;
  // Refuses new requests, lets running ones finish (up to `drain`), then aborts the rest.
  virtual void stop(std::chrono::milliseconds drain) = 0;
};

}  // namespace gpuopt::llm
