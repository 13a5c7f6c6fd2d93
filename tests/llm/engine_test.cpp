// The serving engine on the CPU runner: every request gives exactly what generate() gives for it
// alone (greedy and seeded), whatever else runs beside it; cancel, timeouts, a full queue, a
// failing step and stop() end requests the documented way, with one final update each.
#include <atomic>
#include <thread>

#include "llm/engine_test_util.h"

namespace gpuopt::llm {
namespace {

using namespace std::chrono_literals;
using testing::alone;
using testing::Collector;
using testing::make_prompt;
using testing::request;
using testing::PieceTokenizer;
using testing::TinyModel;

// Forwards to a CPU runner; steps can be held at a gate or made to fail.
class GatedRunner final : public ModelRunner {
 public:
  explicit GatedRunner(std::unique_ptr<ModelRunner> inner) : inner_(std::move(inner)) {}
  const LlmConfig& config() const override { return inner_->config(); }
  int64_t num_kv_blocks() const override { return inner_->num_kv_blocks(); }
  int block_size() const override { return inner_->block_size(); }
  Status step(const StepBatch& b, std::vector<float>* logits) override {
    {
      std::unique_lock<std::mutex> lk(mu_);
      ++entered_;
      cv_.notify_all();
      cv_.wait(lk, [&] { return open_; });
      if (fail_) {
        fail_ = false;
        return Status::Internal("injected step failure");
      }
    }
    return inner_->step(b, logits);
  }
  void close() {
    std::lock_guard<std::mutex> lk(mu_);
    open_ = false;
  }
  void open() {
    std::lock_guard<std::mutex> lk(mu_);
    open_ = true;
    cv_.notify_all();
  }
  void fail_next() {
    std::lock_guard<std::mutex> lk(mu_);
    fail_ = true;
  }
  bool wait_entered(int n) {
    std::unique_lock<std::mutex> lk(mu_);
    return cv_.wait_for(lk, 10s, [&] { return entered_ >= n; });
  }

 private:
  std::unique_ptr<ModelRunner> inner_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = true, fail_ = false;
  int entered_ = 0;
};

SamplingParams greedy(int64_t max_new) {
  SamplingParams p;
  p.temperature = 0;
  p.max_new_tokens = max_new;
  return p;
}

TEST(Engine, ConcurrentGreedyRequestsEqualEachAlone) {
  TinyModel m;
  EngineOptions eo;
  eo.max_num_batched_tokens = 24;  // prompts are chunked and share steps with decodes
  auto engine = LlmEngine::start(m.runner(512), nullptr, eo);
  ASSERT_TRUE(engine.ok()) << engine.status().to_string();
  Collector col;
  std::vector<std::pair<uint64_t, std::vector<int64_t>>> sent;
  std::vector<SamplingParams> params;
  std::vector<std::thread> clients;
  std::mutex mu;
  for (int t = 0; t < 4; ++t)  // submitted from several threads at once
    clients.emplace_back([&, t] {
      for (int i = t; i < 32; i += 4) {
        auto p = make_prompt(3 + (i * 5) % 29, i);
        auto id = (*engine)->submit(request(p, greedy(4 + i % 13)), col.callback());
        ASSERT_TRUE(id.ok()) << id.status().to_string();
        std::lock_guard<std::mutex> lk(mu);
        sent.push_back({*id, p});
      }
    });
  for (auto& c : clients) c.join();
  ASSERT_TRUE(col.wait(32));
  (*engine)->stop(1s);
  int64_t generated = 0, prompt_tokens = 0;
  for (const auto& [id, p] : sent) {
    const auto got = col.get(id);
    // The request's own max_new, found again from its prompt.
    int64_t max_new = -1;
    for (int k = 0; k < 32; ++k)
      if (make_prompt(3 + (k * 5) % 29, k) == p) max_new = 4 + k % 13;
    const auto want = alone(m, p, greedy(max_new));
    EXPECT_EQ(got.tokens, want.tokens) << "request " << id;
    EXPECT_EQ(got.reason, want.finish_reason);
    EXPECT_EQ(got.finals, 1);
    EXPECT_EQ(got.completion_tokens, static_cast<int64_t>(want.tokens.size()));
    generated += static_cast<int64_t>(want.tokens.size());
    prompt_tokens += static_cast<int64_t>(p.size());
  }
  const EngineStats s = (*engine)->stats();
  EXPECT_EQ(s.requests_finished_total, 32);
  EXPECT_EQ(s.generation_tokens_total, generated);
  EXPECT_EQ(s.prompt_tokens_total, prompt_tokens);
  EXPECT_EQ(s.num_running, 0);
  EXPECT_EQ(s.num_waiting, 0);
  EXPECT_EQ(s.kv_cache_usage, 0.0);
  EXPECT_EQ(s.time_to_first_token_s.count, 32u);
  EXPECT_EQ(s.e2e_request_latency_s.count, 32u);
  EXPECT_EQ(s.queue_time_s.count, 32u);
  EXPECT_EQ(s.inter_token_latency_s.count, static_cast<uint64_t>(generated - 32));
  // Every output token took a step; the longest request (16 tokens) alone needs 16 (the last step's
  // own count may land just after its final callback).
  EXPECT_GE(s.steps_total, 15);
  EXPECT_GT(s.runner_seconds_total, 0.0);
  EXPECT_LE(s.runner_seconds_total, s.step_seconds_total);
  uint64_t in_buckets = 0;
  for (uint64_t c : s.e2e_request_latency_s.counts) in_buckets += c;
  EXPECT_EQ(in_buckets, 32u);
  EXPECT_GT(s.e2e_request_latency_s.sum, 0);
}

TEST(Engine, SeededSamplingAndStopStringsEqualGenerate) {
  TinyModel m;
  auto tok = std::make_shared<PieceTokenizer>();
  auto engine = LlmEngine::start(m.runner(256), tok, {});
  ASSERT_TRUE(engine.ok());
  Collector col;
  SamplingParams sp;
  sp.temperature = 1.5;  // flat enough that the draws differ from greedy
  sp.top_k = 40;
  sp.seed = 1234;
  sp.max_new_tokens = 20;
  sp.logprobs = 2;
  const auto p1 = make_prompt(9, 1);
  const auto want_seeded = alone(m, p1, sp, tok.get());
  // A stop string spanning two tokens of the greedy text of another prompt.
  const auto p2 = make_prompt(6, 2);
  const auto full = alone(m, p2, greedy(24), tok.get());
  ASSERT_GE(full.tokens.size(), 8u);
  const std::string stop = PieceTokenizer::piece(full.tokens[4]) + PieceTokenizer::piece(full.tokens[5]);
  SamplingParams st = greedy(24);
  st.stop = {stop};
  const auto want_stop = alone(m, p2, st, tok.get());
  ASSERT_EQ(want_stop.finish_reason, "stop");
  ASSERT_EQ(full.text.find(stop), want_stop.text.size());

  auto a = (*engine)->submit(request(p1, sp), col.callback());
  auto b = (*engine)->submit(request(p2, st), col.callback());
  auto c = (*engine)->submit(request(p1, sp), col.callback());  // the same seed: the same draws
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  ASSERT_TRUE(col.wait(3));
  EXPECT_EQ(col.get(*a).tokens, want_seeded.tokens);
  EXPECT_EQ(col.get(*a).text, want_seeded.text);
  EXPECT_EQ(col.get(*c).tokens, want_seeded.tokens);
  EXPECT_EQ(col.get(*b).text, want_stop.text);
  EXPECT_EQ(col.get(*b).tokens, want_stop.tokens);
  EXPECT_EQ(col.get(*b).reason, "stop");
  const auto greedy_p1 = alone(m, p1, greedy(20));
  EXPECT_NE(want_seeded.tokens, greedy_p1.tokens);  // the sampling test is not a greedy one
}

TEST(Engine, CancelEndsARequestAndFreesItsBlocks) {
  TinyModel m;
  auto engine = LlmEngine::start(m.runner(256), nullptr, {});
  ASSERT_TRUE(engine.ok());
  Collector col;
  LlmEngine* e = engine->get();
  const auto p = make_prompt(10, 3);
  SamplingParams long_run = greedy(100);
  long_run.ignore_eos = true;
  std::atomic<int> seen{0};
  auto inner = col.callback();
  auto id = e->submit(request(p, long_run), [&, e](const EngineOutput& o) {
    inner(o);
    if (++seen == 3) e->cancel(o.id);  // from the engine thread, as a front end's callback may
  });
  auto other = e->submit(request(make_prompt(5, 4), greedy(12)), col.callback());
  ASSERT_TRUE(id.ok() && other.ok());
  ASSERT_TRUE(col.wait(2));
  const auto got = col.get(*id);
  EXPECT_EQ(got.reason, "abort");
  EXPECT_EQ(got.finals, 1);
  EXPECT_GE(got.tokens.size(), 3u);
  EXPECT_LT(got.tokens.size(), 100u);
  const auto want = alone(m, p, long_run);
  EXPECT_EQ(got.tokens, std::vector<int64_t>(want.tokens.begin(), want.tokens.begin() + got.tokens.size()));
  EXPECT_EQ(col.get(*other).tokens, alone(m, make_prompt(5, 4), greedy(12)).tokens);
  e->cancel(*id);     // finished: ignored
  e->cancel(999999);  // unknown: ignored
  e->stop(1s);
  EXPECT_EQ(e->stats().kv_cache_usage, 0.0);
  EXPECT_EQ(e->stats().num_running, 0);
}

TEST(Engine, FullQueueTimeoutFailingStepAndStop) {
  TinyModel m;
  auto gated = std::make_unique<GatedRunner>(m.runner(256));
  GatedRunner* g = gated.get();
  EngineOptions eo;
  eo.max_waiting = 2;
  auto engine = LlmEngine::start(std::move(gated), nullptr, eo);
  ASSERT_TRUE(engine.ok());
  LlmEngine* e = engine->get();
  Collector col;
  g->close();
  auto a = e->submit(request(make_prompt(4, 5), greedy(6)), col.callback());
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE(g->wait_entered(1));  // a is admitted and its first step is held
  EngineRequest rb = request(make_prompt(4, 6), greedy(6));
  rb.timeout = 20ms;
  auto b = e->submit(std::move(rb), col.callback());
  auto c = e->submit(request(make_prompt(4, 7), greedy(6)), col.callback());
  ASSERT_TRUE(b.ok() && c.ok());
  auto d = e->submit(request(make_prompt(4, 8), greedy(6)), col.callback());
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), StatusCode::kUnavailable);
  const EngineStats mid = e->stats();  // while a's step runs: a running, b and c waiting
  EXPECT_EQ(mid.num_running, 1);
  EXPECT_EQ(mid.num_waiting, 2);
  EXPECT_GT(mid.kv_cache_usage, 0.0);
  std::this_thread::sleep_for(60ms);
  g->open();
  ASSERT_TRUE(col.wait(3));
  EXPECT_EQ(col.get(*a).tokens, alone(m, make_prompt(4, 5), greedy(6)).tokens);
  EXPECT_EQ(col.get(*b).reason, "timeout");
  EXPECT_TRUE(col.get(*b).tokens.empty());
  EXPECT_EQ(col.get(*c).tokens, alone(m, make_prompt(4, 7), greedy(6)).tokens);

  // A failing step fails its requests with the runner's message; the next request is served.
  g->fail_next();
  auto f = e->submit(request(make_prompt(7, 9), greedy(5)), col.callback());
  ASSERT_TRUE(f.ok());
  ASSERT_TRUE(col.wait(4));
  EXPECT_EQ(col.get(*f).reason, "error");
  EXPECT_NE(col.get(*f).error.find("injected step failure"), std::string::npos) << col.get(*f).error;
  auto h = e->submit(request(make_prompt(7, 9), greedy(5)), col.callback());
  ASSERT_TRUE(h.ok());
  ASSERT_TRUE(col.wait(5));
  EXPECT_EQ(col.get(*h).tokens, alone(m, make_prompt(7, 9), greedy(5)).tokens);

  // stop(): what still runs after the drain is aborted; new work is refused.
  g->close();
  SamplingParams long_run = greedy(50);
  long_run.ignore_eos = true;
  auto s = e->submit(request(make_prompt(7, 10), long_run), col.callback());
  ASSERT_TRUE(s.ok());
  std::thread opener([g] {
    std::this_thread::sleep_for(30ms);
    g->open();
  });
  e->stop(0ms);
  opener.join();
  ASSERT_TRUE(col.wait(6));
  EXPECT_EQ(col.get(*s).reason, "abort");
  EXPECT_EQ(e->submit(request({1}, greedy(1)), col.callback()).status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(e->stats().kv_cache_usage, 0.0);
}

TEST(EngineStats, HistogramBucketsCountValuesUpToTheirBound) {
  Histogram h;
  h.bounds = {0.1, 1.0};
  for (double v : {0.05, 0.1, 0.5, 1.0, 2.0, 7.0}) h.observe(v);
  EXPECT_EQ(h.counts, (std::vector<uint64_t>{2, 2, 2}));  // Prometheus' "le": a bound is inside
  EXPECT_EQ(h.count, 6u);
  EXPECT_DOUBLE_EQ(h.sum, 10.65);
}

TEST(Engine, BadRequestsAreRefusedWithOneLine) {
  TinyModel m(/*max_position=*/32);
  auto engine = LlmEngine::start(m.runner(6), nullptr, {});  // 6 blocks of 4: 24 tokens
  ASSERT_TRUE(engine.ok());
  LlmEngine* e = engine->get();
  auto msg = [&](std::vector<int64_t> p, SamplingParams sp) {
    auto r = e->submit(request(std::move(p), std::move(sp)), [](const EngineOutput&) {});
    EXPECT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    return r.status().message();
  };
  EXPECT_NE(msg({}, greedy(1)).find("empty"), std::string::npos);
  EXPECT_NE(msg({64}, greedy(1)).find("token id 64"), std::string::npos);
  EXPECT_NE(msg(std::vector<int64_t>(33, 1), greedy(1)).find("context of 32"), std::string::npos);
  EXPECT_NE(msg({1}, greedy(0)).find("max_new_tokens"), std::string::npos);
  SamplingParams st = greedy(1);
  st.stop = {"x"};
  EXPECT_NE(msg({1}, st).find("tokenizer"), std::string::npos);
  SamplingParams t = greedy(1);
  t.temperature = -1;
  EXPECT_NE(msg({1}, t).find("temperature"), std::string::npos);
  // 20 prompt tokens + 8 new need 27 cached tokens: 7 blocks, one more than the cache.
  EXPECT_NE(msg(std::vector<int64_t>(20, 1), greedy(8)).find("needs 7 KV blocks"), std::string::npos);
  Collector col;
  auto ok = e->submit(request(std::vector<int64_t>(20, 1), greedy(5)), col.callback());  // 24 tokens: fits
  ASSERT_TRUE(ok.ok()) << ok.status().to_string();
  ASSERT_TRUE(col.wait(1));
  EXPECT_EQ(col.get(*ok).tokens, alone(m, std::vector<int64_t>(20, 1), greedy(5)).tokens);
}

}  // namespace
}  // namespace gpuopt::llm
