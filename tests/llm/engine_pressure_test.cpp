// The serving engine under KV pressure and with shared prompts: a cache too small for everyone
// forces preemptions, yet every request's tokens equal what generate() gives it alone; repeated
// prompts are served from the prefix cache (hits counted) with the same tokens.
#include <random>
#include <thread>

#include "llm/engine_test_util.h"

namespace gpuopt::llm {
namespace {

using namespace std::chrono_literals;
using testing::alone;
using testing::Collector;
using testing::make_prompt;
using testing::request;
using testing::TinyModel;

SamplingParams long_greedy(int64_t max_new) {
  SamplingParams p;
  p.temperature = 0;
  p.max_new_tokens = max_new;
  p.ignore_eos = true;  // every request runs its full length: the pressure is predictable
  return p;
}

TEST(EnginePressure, ATinyKvCacheForcesPreemptionAndEveryRequestStillMatches) {
  TinyModel m;
  for (bool prefix : {false, true}) {
    EngineOptions eo;
    eo.enable_prefix_caching = prefix;
    eo.max_num_batched_tokens = 32;
    // 16 blocks of 4 tokens; each request needs up to 7-16 + 19 tokens (7-9 blocks) alone.
    auto engine = LlmEngine::start(m.runner(16), nullptr, eo);
    ASSERT_TRUE(engine.ok());
    Collector col;
    std::vector<std::pair<uint64_t, std::vector<int64_t>>> sent;
    for (int i = 0; i < 10; ++i) {
      auto p = make_prompt(7 + i, 20 + i);
      auto sp = long_greedy(20);
      if (i % 3 == 0) {  // some sampled, seeded: the draws continue at the same step after recompute
        sp.temperature = 1.2;
        sp.seed = 100 + static_cast<uint64_t>(i);
      }
      auto id = (*engine)->submit(request(p, sp), col.callback());
      ASSERT_TRUE(id.ok()) << id.status().to_string();
      sent.push_back({*id, p});
    }
    ASSERT_TRUE(col.wait(10));
    (*engine)->stop(1s);
    for (size_t i = 0; i < sent.size(); ++i) {
      auto sp = long_greedy(20);
      if (i % 3 == 0) {
        sp.temperature = 1.2;
        sp.seed = 100 + static_cast<uint64_t>(i);
      }
      const auto got = col.get(sent[i].first);
      EXPECT_EQ(got.tokens, alone(m, sent[i].second, sp).tokens) << "request " << i << " prefix " << prefix;
      EXPECT_EQ(got.reason, "length");
      EXPECT_EQ(got.finals, 1);
    }
    const EngineStats s = (*engine)->stats();
    EXPECT_GT(s.num_preemptions_total, 0) << "prefix " << prefix;
    EXPECT_EQ(s.kv_cache_usage, 0.0);
    EXPECT_EQ(s.requests_finished_total, 10);
  }
}

TEST(EnginePressure, RepeatedPromptsHitThePrefixCache) {
  TinyModel m;
  auto engine = LlmEngine::start(m.runner(128), nullptr, {});
  ASSERT_TRUE(engine.ok());
  Collector col;
  // A shared 21-token "system prompt" and different questions after it.
  const auto system = make_prompt(21, 40);
  auto with = [&](std::vector<int64_t> q) {
    auto p = system;
    p.insert(p.end(), q.begin(), q.end());
    return p;
  };
  SamplingParams sp;
  sp.temperature = 0;
  sp.max_new_tokens = 8;
  const std::vector<std::vector<int64_t>> prompts = {with({1, 2, 3}), with({1, 2, 3}), with({9, 8}), system};
  int done = 0;
  std::vector<uint64_t> ids;
  for (const auto& p : prompts) {  // one after another: each finds what the earlier ones left
    auto id = (*engine)->submit(request(p, sp), col.callback());
    ASSERT_TRUE(id.ok());
    ids.push_back(*id);
    ASSERT_TRUE(col.wait(++done));
  }
  for (size_t i = 0; i < prompts.size(); ++i) EXPECT_EQ(col.get(ids[i]).tokens, alone(m, prompts[i], sp).tokens) << i;
  EXPECT_EQ(col.get(ids[0]).cached_prompt_tokens, 0);
  // 24 tokens: 5 full blocks of 4 could be shared, but the last token is always computed.
  EXPECT_EQ(col.get(ids[1]).cached_prompt_tokens, 20);
  EXPECT_EQ(col.get(ids[2]).cached_prompt_tokens, 20);  // the system prompt's 5 full blocks
  EXPECT_EQ(col.get(ids[3]).cached_prompt_tokens, 20);  // 21 tokens: its 5 full blocks
  (*engine)->stop(1s);
  const EngineStats s = (*engine)->stats();
  EXPECT_EQ(s.prefix_cache_queries, 24 + 24 + 23 + 21);
  EXPECT_EQ(s.prefix_cache_hits, 60);
  EXPECT_EQ(s.kv_cache_usage, 0.0);
}

// Cancels from another thread and timeouts land at random points of prefill, decode, preemption
// and the queue: every request still ends exactly once, a completed one with its tokens alone, an
// ended one with a prefix of them, and every block comes back.
TEST(EnginePressure, RandomCancelsAndTimeoutsUnderPreemptionLeaveNothingBehind) {
  TinyModel m;
  EngineOptions eo;
  eo.max_num_batched_tokens = 16;
  auto engine = LlmEngine::start(m.runner(20), nullptr, eo);
  ASSERT_TRUE(engine.ok());
  Collector col;
  std::mt19937 rng(2024);
  struct Sent {
    uint64_t id;
    std::vector<int64_t> prompt;
    SamplingParams params;
  };
  std::vector<Sent> sent;
  for (int i = 0; i < 40; ++i) {
    Sent q{0, make_prompt(4 + static_cast<int>(rng() % 30), 60 + i), long_greedy(4 + rng() % 30)};
    EngineRequest r = request(q.prompt, q.params);
    if (rng() % 5 == 0) r.timeout = std::chrono::milliseconds(1 + rng() % 20);
    auto id = (*engine)->submit(std::move(r), col.callback());
    ASSERT_TRUE(id.ok()) << id.status().to_string();
    q.id = *id;
    sent.push_back(q);
    if (rng() % 4 == 0) (*engine)->cancel(sent[rng() % sent.size()].id);
    if (rng() % 3 == 0) std::this_thread::sleep_for(std::chrono::microseconds(rng() % 2000));
  }
  ASSERT_TRUE(col.wait(40));
  (*engine)->stop(1s);
  int completed = 0, ended = 0;
  for (const Sent& q : sent) {
    const auto got = col.get(q.id);
    EXPECT_EQ(got.finals, 1);
    const auto want = alone(m, q.prompt, q.params).tokens;
    if (got.reason == "length") {
      ++completed;
      EXPECT_EQ(got.tokens, want);
    } else {
      ++ended;
      EXPECT_TRUE(got.reason == "abort" || got.reason == "timeout") << got.reason;
      ASSERT_LE(got.tokens.size(), want.size());
      EXPECT_EQ(got.tokens,
                std::vector<int64_t>(want.begin(), want.begin() + static_cast<std::ptrdiff_t>(got.tokens.size())));
    }
  }
  EXPECT_GT(completed, 0);
  EXPECT_GT(ended, 0);
  const EngineStats s = (*engine)->stats();
  EXPECT_EQ(s.kv_cache_usage, 0.0);
  EXPECT_EQ(s.num_running + s.num_waiting, 0);
  EXPECT_EQ(s.requests_finished_total, 40);
}

}  // namespace
}  // namespace gpuopt::llm
