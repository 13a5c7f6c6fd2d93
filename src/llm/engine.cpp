// LlmEngine: the engine thread's loop around the scheduler and the runner. Other threads only
// hand requests and cancellations over under one mutex (and read the stats under another); the
// scheduler, the sequences and the callbacks belong to the engine thread alone.
#include <cmath>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <random>
#include <thread>
#include <unordered_map>

#include "llm/engine.h"
#include "llm/engine_internal.h"
#include "llm/scheduler.h"
#include "llm/text_stream.h"

namespace gpuopt::llm {
namespace {

using Clock = std::chrono::steady_clock;
double seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

struct Request {
  uint64_t id = 0;
  EngineRequest req;
  OutputCallback cb;
  uint64_t seed = 0;
  int64_t max_new = 0;
  std::unique_ptr<TextStream> text;
  Sequence* seq = nullptr;
  Clock::time_point submitted, last_token;
  Clock::time_point deadline = Clock::time_point::max();
  bool admitted = false;
};

class Engine final : public LlmEngine {
 public:
  Engine(std::unique_ptr<ModelRunner> runner, std::shared_ptr<const Tokenizer> tok, const EngineOptions& opts)
      : runner_(std::move(runner)),
        tok_(std::move(tok)),
        opts_(opts),
        sched_(SchedulerOptions{opts.max_num_seqs, opts.max_num_batched_tokens, runner_->block_size(),
                                static_cast<int32_t>(runner_->num_kv_blocks()), opts.enable_prefix_caching}),
        rng_(std::random_device{}()),
        stats_(empty_engine_stats()) {
    stats_.kv_cache_blocks = runner_->num_kv_blocks();
  }
  ~Engine() override { stop(std::chrono::milliseconds(0)); }

  void start_thread() {
    thread_ = std::thread([this] { loop(); });
  }

  Result<uint64_t> submit(EngineRequest request, OutputCallback on_output) override;
  void cancel(uint64_t id) override {
    {
      std::lock_guard<std::mutex> lk(mu_);
      cancels_.push_back(id);
    }
    cv_.notify_one();
  }
  EngineStats stats() const override {
    int64_t incoming = 0;  // handed over but not yet taken in by the engine thread: waiting too
    {
      std::lock_guard<std::mutex> lk(mu_);
      incoming = static_cast<int64_t>(incoming_.size());
    }
    std::lock_guard<std::mutex> lk(stats_mu_);
    EngineStats s = stats_;
    s.num_waiting += incoming;
    return s;
  }
  const LlmConfig& config() const override { return runner_->config(); }
  const Tokenizer* tokenizer() const override { return tok_.get(); }
  void stop(std::chrono::milliseconds drain) override {
    {
      std::lock_guard<std::mutex> lk(mu_);
      if (!stopping_) {
        stopping_ = true;
        drain_until_ = Clock::now() + drain;
      }
    }
    cv_.notify_one();
    // From a callback (the engine thread itself) the request to stop is all that can be done: the
    // thread ends after this step's callbacks and the owner's stop() or destructor joins it.
    if (std::this_thread::get_id() == thread_id_) return;
    std::lock_guard<std::mutex> join_lk(join_mu_);
    if (thread_.joinable()) thread_.join();
  }

 private:
  void loop();
  bool intake(bool* exit);  // false: nothing to do but wait
  Clock::time_point intake_start_;  // engine thread only: when this iteration's work began
  double last_runner_s_ = 0;        // engine thread only: the last step's time in the runner
  void run_step(Step& step);
  // Ends a request: its last update (with what text was held back) and the bookkeeping.
  void finish(Request& r, const std::string& reason, const std::string& error);
  void close(Request& r, EngineOutput& out);  // sends the final update `out`, forgets r
  void deliver(Request& r, EngineOutput& out);
  void publish_gauges();

  std::unique_ptr<ModelRunner> runner_;
  std::shared_ptr<const Tokenizer> tok_;
  EngineOptions opts_;
  Scheduler sched_;                                              // engine thread
  std::unordered_map<uint64_t, std::unique_ptr<Request>> live_;  // engine thread

  mutable std::mutex mu_;  // guards the hand-over below
  std::condition_variable cv_;
  std::deque<std::unique_ptr<Request>> incoming_;
  std::vector<uint64_t> cancels_;
  bool stopping_ = false;
  Clock::time_point drain_until_;
  int64_t not_admitted_ = 0;  // submitted, never admitted yet: max_waiting's count
  uint64_t next_id_ = 1;
  std::mt19937_64 rng_;

  mutable std::mutex stats_mu_;
  EngineStats stats_;
  std::mutex join_mu_;
  std::thread thread_;
  std::thread::id thread_id_;
};

Result<uint64_t> Engine::submit(EngineRequest request, OutputCallback on_output) {
  const LlmConfig& c = runner_->config();
  const SamplingParams& p = request.params;
  GPUOPT_RETURN_IF_ERROR(check_request(c, request.prompt, p, tok_.get(), "the prompt"));
  if (!(p.temperature >= 0) || !std::isfinite(p.temperature))
    return Status::InvalidArgument("temperature {} must be a finite number >= 0", p.temperature);
  if (!(p.top_p > 0 && p.top_p <= 1)) return Status::InvalidArgument("top_p {} must be in (0, 1]", p.top_p);
  if (!(p.min_p >= 0 && p.min_p <= 1)) return Status::InvalidArgument("min_p {} must be in [0, 1]", p.min_p);
  if (p.top_k < 0) return Status::InvalidArgument("top_k {} must be >= 0 (0: off)", p.top_k);
  if (p.logprobs < 0 || p.logprobs > c.vocab_size)
    return Status::InvalidArgument("logprobs {} must be in 0..{}", p.logprobs, c.vocab_size);
  auto r = std::make_unique<Request>();
  const auto prompt_len = static_cast<int64_t>(request.prompt.size());
  r->max_new = max_new_for(c, prompt_len, p);
  const int64_t max_tokens = prompt_len + std::max<int64_t>(0, r->max_new - 1);
  if (!sched_.fits(max_tokens))
    return Status::InvalidArgument(
        "the prompt ({} tokens) with {} new tokens needs {} KV blocks of {} tokens but the cache holds {}: lower "
        "max_tokens or shorten the prompt",
        prompt_len, r->max_new, sched_.blocks_for(max_tokens), sched_.options().block_size,
        sched_.options().num_blocks);
  r->req = std::move(request);
  r->cb = std::move(on_output);
  r->submitted = Clock::now();
  const auto timeout = r->req.timeout.count() > 0 ? r->req.timeout : opts_.default_timeout;
  if (timeout.count() > 0) r->deadline = r->submitted + timeout;
  uint64_t id = 0;
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (stopping_) return Status::Unavailable("the engine is stopping: no new requests");
    if (not_admitted_ >= opts_.max_waiting)
      return Status::Unavailable("too many requests waiting ({}): try again later", not_admitted_);
    id = next_id_++;
    r->id = id;
    r->seed = r->req.params.seed ? *r->req.params.seed : rng_();
    ++not_admitted_;
    incoming_.push_back(std::move(r));
  }
  cv_.notify_one();
  return id;
}

void Engine::deliver(Request& r, EngineOutput& out) {
  out.id = r.id;
  out.prompt_tokens = static_cast<int64_t>(r.seq ? r.seq->prompt.size() : r.req.prompt.size());
  out.completion_tokens = r.text->num_tokens();
  out.cached_prompt_tokens = r.seq ? r.seq->cached_prompt_tokens : 0;
  if (r.cb) r.cb(out);
}

void Engine::finish(Request& r, const std::string& reason, const std::string& error) {
  EngineOutput out;
  r.text->finish(reason, &out.text);
  out.finished = true;
  out.finish_reason = r.text->finish_reason();
  out.error = error;
  close(r, out);
}

void Engine::close(Request& r, EngineOutput& out) {
  deliver(r, out);
  {
    std::lock_guard<std::mutex> lk(stats_mu_);
    ++stats_.requests_finished_total;
    stats_.e2e_request_latency_s.observe(seconds(r.submitted, Clock::now()));
  }
  if (!r.admitted) {
    std::lock_guard<std::mutex> lk(mu_);
    --not_admitted_;
  }
  const uint64_t id = r.id;
  sched_.finish(id);
  live_.erase(id);  // r is gone
}

void Engine::publish_gauges() {
  std::lock_guard<std::mutex> lk(stats_mu_);
  stats_.num_running = sched_.num_running();
  stats_.num_waiting = sched_.num_waiting();
  stats_.num_preemptions_total = sched_.num_preemptions();
  stats_.kv_cache_usage = sched_.kv_usage();
  stats_.kv_cache_blocks = runner_->num_kv_blocks();
  stats_.prefix_cache_queries = sched_.cache().queries();
  stats_.prefix_cache_hits = sched_.cache().hits();
}

// Takes what other threads handed over, applies cancellations, timeouts and the end of a drain.
// Waits while there is nothing to run.
bool Engine::intake(bool* exit) {
  std::deque<std::unique_ptr<Request>> incoming;
  std::vector<uint64_t> cancels;
  bool stopping = false;
  Clock::time_point drain_until;
  {
    std::unique_lock<std::mutex> lk(mu_);
    cv_.wait(lk, [&] { return !incoming_.empty() || !cancels_.empty() || stopping_ || sched_.has_work(); });
    incoming.swap(incoming_);
    cancels.swap(cancels_);
    stopping = stopping_;
    drain_until = drain_until_;
  }
  intake_start_ = Clock::now();  // the engine's own time starts after the wait
  for (auto& r : incoming) {
    r->text = std::make_unique<TextStream>(runner_->config(), r->req.params, tok_.get(), r->req.skip_special_tokens,
                                           r->max_new);
    const int64_t max_tokens = static_cast<int64_t>(r->req.prompt.size()) + std::max<int64_t>(0, r->max_new - 1);
    r->seq = sched_.add(r->id, std::move(r->req.prompt), max_tokens);
    const uint64_t id = r->id;
    live_.emplace(id, std::move(r));
  }
  for (uint64_t id : cancels) {
    const auto it = live_.find(id);
    if (it != live_.end()) finish(*it->second, "abort", "");
  }
  const Clock::time_point now = Clock::now();
  std::vector<Request*> expired;
  for (auto& [id, r] : live_)
    if (now >= r->deadline || (stopping && now >= drain_until)) expired.push_back(r.get());
  for (Request* r : expired) finish(*r, now >= r->deadline ? "timeout" : "abort", "");
  publish_gauges();
  if (stopping && live_.empty()) *exit = true;
  return sched_.has_work();
}

void Engine::loop() {
  while (true) {
    bool exit = false;
    if (!intake(&exit)) {
      if (exit) return;
      continue;
    }
    Step step = sched_.schedule();
    if (step.empty()) {  // nothing fits now (cannot last: submit checked every request fits alone)
      std::unique_lock<std::mutex> lk(mu_);
      cv_.wait_for(lk, std::chrono::milliseconds(1));
      continue;
    }
    publish_gauges();  // the step's admissions and preemptions show while it runs
    run_step(step);
    const double total = seconds(intake_start_, Clock::now());
    std::lock_guard<std::mutex> lk(stats_mu_);
    ++stats_.steps_total;
    stats_.step_seconds_total += total;
    stats_.runner_seconds_total += last_runner_s_;
  }
}

void Engine::run_step(Step& step) {
  const Clock::time_point t_sched = Clock::now();
  for (uint64_t id : step.admitted) {
    Request& r = *live_.at(id);
    r.admitted = true;
    {
      std::lock_guard<std::mutex> lk(mu_);
      --not_admitted_;
    }
    std::lock_guard<std::mutex> lk(stats_mu_);
    stats_.queue_time_s.observe(seconds(r.submitted, t_sched));
    stats_.prompt_tokens_total += static_cast<int64_t>(r.seq->prompt.size());
  }
  StepBatch b;
  std::vector<Request*> sampling;
  std::vector<const SamplingParams*> params;
  std::vector<uint64_t> seeds;
  std::vector<const std::vector<int64_t>*> prompts, outputs;
  std::vector<int64_t> steps;
  for (const ScheduledSeq& q : step.seqs) {
    Sequence* s = q.seq;
    b.seqs.push_back({q.num_tokens, q.start_pos, &s->table, q.sample});
    for (int64_t i = q.start_pos; i < q.start_pos + q.num_tokens; ++i)
      b.tokens.push_back(static_cast<int32_t>(s->token(i)));
    if (!q.sample) continue;
    Request* r = live_.at(s->id).get();
    sampling.push_back(r);
    params.push_back(&r->req.params);
    seeds.push_back(r->seed);
    prompts.push_back(&s->prompt);
    outputs.push_back(&s->output);
    steps.push_back(static_cast<int64_t>(s->output.size()));  // unchanged by a recomputation
  }
  std::vector<SampledToken> toks;
  const Clock::time_point t_run = Clock::now();
  const Status st = runner_->step_sample(b, params, seeds, prompts, outputs, steps, &toks);
  last_runner_s_ = seconds(t_run, Clock::now());
  if (!st.ok() || toks.size() != sampling.size()) {
    const std::string why =
        st.ok() ? fmt::format("the runner returned {} tokens for {} sequences", toks.size(), sampling.size())
                : st.to_string();
    std::vector<uint64_t> ids;
    for (const ScheduledSeq& q : step.seqs) ids.push_back(q.seq->id);
    for (uint64_t id : ids) finish(*live_.at(id), "error", why);
    return;
  }
  sched_.computed(step);
  const Clock::time_point now = Clock::now();
  std::vector<double> ttft, itl;  // observed under one lock below, before any request can end
  ttft.reserve(sampling.size());
  itl.reserve(sampling.size());
  for (size_t k = 0; k < sampling.size(); ++k) {
    const Request& r = *sampling[k];
    if (r.seq->output.empty())
      ttft.push_back(seconds(r.submitted, now));
    else
      itl.push_back(seconds(r.last_token, now));
  }
  {
    std::lock_guard<std::mutex> lk(stats_mu_);
    stats_.generation_tokens_total += static_cast<int64_t>(sampling.size());
    for (double v : ttft) stats_.time_to_first_token_s.observe(v);
    for (double v : itl) stats_.inter_token_latency_s.observe(v);
  }
  for (size_t k = 0; k < sampling.size(); ++k) {
    Request& r = *sampling[k];
    sched_.append(r.seq, toks[k].token);
    r.last_token = now;
    EngineOutput out;
    out.tokens.push_back(std::move(toks[k]));
    if (r.text->push(out.tokens.back().token, &out.text)) {
      out.finished = true;
      out.finish_reason = r.text->finish_reason();
      close(r, out);
    } else {
      deliver(r, out);
    }
  }
  publish_gauges();
}

}  // namespace

Result<std::unique_ptr<LlmEngine>> LlmEngine::start(std::unique_ptr<ModelRunner> runner,
                                                    std::shared_ptr<const Tokenizer> tokenizer,
                                                    const EngineOptions& opts) {
  if (!runner) return Status::InvalidArgument("LlmEngine::start: no runner");
  if (opts.max_num_seqs < 1 || opts.max_num_batched_tokens < 1 || opts.max_waiting < 0)
    return Status::InvalidArgument(
        "engine options: max_num_seqs ({}) and max_num_batched_tokens ({}) must be >= 1, max_waiting ({}) >= 0",
        opts.max_num_seqs, opts.max_num_batched_tokens, opts.max_waiting);
  if (runner->num_kv_blocks() < 1 || runner->num_kv_blocks() > INT32_MAX || runner->block_size() < 1)
    return Status::InvalidArgument("the runner has {} KV blocks of {} tokens", runner->num_kv_blocks(),
                                   runner->block_size());
  auto e = std::make_unique<Engine>(std::move(runner), std::move(tokenizer), opts);
  e->start_thread();
  return std::unique_ptr<LlmEngine>(std::move(e));
}

}  // namespace gpuopt::llm
