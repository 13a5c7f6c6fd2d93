// The CPU runner over the paged cache: a prompt prefilled in one step, in chunks, or token by
// token (with block edges inside the prompt, scattered block ids, other sequences in the batch)
// gives the same logits. The forward pass itself is checked against an independent numpy
// implementation in tests/python/test_llm_generate.py.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "llm/runner.h"

namespace gpuopt::llm {
namespace {

LlmConfig config(const std::string& arch, const std::string& extra = "") {
  const std::string j = R"({"architectures": [")" + arch + R"("], "vocab_size": 64, "hidden_size": 32,
    "intermediate_size": 48, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
    "max_position_embeddings": 128, "rms_norm_eps": 1e-6)" +
                        extra + "}";
  auto c = parse_llm_config(j, "test config");
  EXPECT_TRUE(c.ok()) << c.status().to_string();
  return *c;
}

struct Fixture {
  LlmConfig cfg;
  std::unique_ptr<Checkpoint> ck;
  std::unique_ptr<ModelRunner> r;
  Fixture(const LlmConfig& c, int block_size, int64_t blocks = 64) : cfg(c) {
    // Weights larger than random_checkpoint's 0.02 would make the logits vary more; the check is
    // about equality across schedules, which any weights show.
    ck = random_checkpoint(cfg, DType::F32, 11);
    RunnerOptions o;
    o.block_size = block_size;
    o.num_kv_blocks = blocks;
    auto made = make_cpu_runner(cfg, *ck, o);
    EXPECT_TRUE(made.ok()) << made.status().to_string();
    r = std::move(*made);
  }
};

std::vector<int32_t> prompt(int n, int salt = 0) {
  std::vector<int32_t> p;
  for (int i = 0; i < n; ++i) p.push_back((i * 7 + 3 + salt * 13) % 64);
  return p;
}

// Logits after each of the prompt's tokens from `from` on, feeding it in chunks of `chunk`.
std::vector<std::vector<float>> run_chunks(ModelRunner& r, const std::vector<int32_t>& p, int chunk,
                                           const std::vector<int32_t>& table) {
  std::vector<std::vector<float>> out;
  for (size_t pos = 0; pos < p.size();) {
    const int n = static_cast<int>(std::min<size_t>(chunk, p.size() - pos));
    StepBatch b;
    b.seqs.push_back({.num_tokens = n, .start_pos = static_cast<int64_t>(pos), .block_table = &table, .sample = true});
    b.tokens.assign(p.begin() + static_cast<std::ptrdiff_t>(pos), p.begin() + static_cast<std::ptrdiff_t>(pos + n));
    std::vector<float> logits;
    EXPECT_TRUE(r.step(b, &logits).ok());
    EXPECT_EQ(logits.size(), 64u);
    out.push_back(logits);
    pos += static_cast<size_t>(n);
  }
  return out;
}

std::vector<int32_t> table_of(int first, int n, int stride = 1) {
  std::vector<int32_t> t;
  for (int i = 0; i < n; ++i) t.push_back(first + i * stride);
  return t;
}

void expect_same_schedules(const LlmConfig& cfg) {
  for (int bs : {1, 4, 16}) {
    Fixture f(cfg, bs, 128);
    const auto p = prompt(23);
    const auto whole = run_chunks(*f.r, p, 64, table_of(0, (23 + bs - 1) / bs));
    ASSERT_EQ(whole.size(), 1u);
    for (int chunk : {1, 3, 4, 5, 16}) {
      // Another region of the cache, blocks in reverse order.
      std::vector<int32_t> t = table_of(40, (23 + bs - 1) / bs);
      std::reverse(t.begin(), t.end());
      const auto parts = run_chunks(*f.r, p, chunk, t);
      EXPECT_EQ(parts.back(), whole.back()) << "block " << bs << " chunk " << chunk;
      if (chunk == 1) {
        // Token by token, every prefix's logits equal a fresh prefill of that prefix.
        for (int n : {1, 4, 5, 17}) {
          const auto fresh =
              run_chunks(*f.r, std::vector<int32_t>(p.begin(), p.begin() + n), 64, table_of(100, (n + bs - 1) / bs));
          EXPECT_EQ(parts[static_cast<size_t>(n - 1)], fresh.back()) << "prefix " << n;
        }
      }
    }
  }
}

TEST(CpuRunner, LlamaChunksAndDecodeMatchOnePrefill) {
  expect_same_schedules(config("LlamaForCausalLM"));
}

TEST(CpuRunner, Qwen2BiasTiedMatches) {
  const LlmConfig c = config("Qwen2ForCausalLM", R"(, "tie_word_embeddings": true)");
  ASSERT_TRUE(c.qkv_bias);
  expect_same_schedules(c);
}

TEST(CpuRunner, MistralSlidingWindow) {
  const LlmConfig w = config("MistralForCausalLM", R"(, "sliding_window": 5)");
  expect_same_schedules(w);
  const LlmConfig full = config("MistralForCausalLM");
  Fixture a(w, 4), b(full, 4);
  // Within the window the two agree; past it they differ.
  const auto short_p = prompt(5), long_p = prompt(12);
  EXPECT_EQ(run_chunks(*a.r, short_p, 64, table_of(0, 2)).back(), run_chunks(*b.r, short_p, 64, table_of(0, 2)).back());
  EXPECT_NE(run_chunks(*a.r, long_p, 64, table_of(0, 3)).back(), run_chunks(*b.r, long_p, 64, table_of(0, 3)).back());
}

TEST(CpuRunner, BatchedSequencesMatchAlone) {
  Fixture f(config("LlamaForCausalLM"), 4);
  const auto p0 = prompt(9, 0), p1 = prompt(6, 1);
  const auto t0 = table_of(0, 3), t1 = table_of(10, 2), t2 = table_of(20, 3), t3 = table_of(30, 2);
  const auto a0 = run_chunks(*f.r, p0, 64, t0).back(), a1 = run_chunks(*f.r, p1, 64, t1).back();
  // Both prompts in one step; then one decode token each in one step (plus a non-sampling chunk).
  StepBatch b;
  b.seqs.push_back({.num_tokens = 9, .start_pos = 0, .block_table = &t2, .sample = true});
  b.seqs.push_back({.num_tokens = 5, .start_pos = 0, .block_table = &t3, .sample = false});
  b.tokens.insert(b.tokens.end(), p0.begin(), p0.end());
  b.tokens.insert(b.tokens.end(), p1.begin(), p1.begin() + 5);
  std::vector<float> logits;
  ASSERT_TRUE(f.r->step(b, &logits).ok());
  ASSERT_EQ(logits.size(), 64u);  // only the sampling sequence
  EXPECT_EQ(std::vector<float>(logits.begin(), logits.end()), a0);
  StepBatch d;
  d.seqs.push_back({.num_tokens = 1, .start_pos = 5, .block_table = &t3, .sample = true});
  d.tokens = {p1[5]};
  ASSERT_TRUE(f.r->step(d, &logits).ok());
  EXPECT_EQ(logits, a1);
  // Decode after the prefill: one more token for both, batched, equals each alone.
  const int32_t nxt = 17;
  std::vector<int32_t> t0b = t0, t1b = t1;
  StepBatch e;
  e.seqs.push_back({.num_tokens = 1, .start_pos = 9, .block_table = &t0b, .sample = true});
  e.seqs.push_back({.num_tokens = 1, .start_pos = 6, .block_table = &t1b, .sample = true});
  e.tokens = {nxt, nxt};
  ASSERT_TRUE(f.r->step(e, &logits).ok());
  ASSERT_EQ(logits.size(), 128u);
  std::vector<int32_t> q0 = p0, q1 = p1;
  q0.push_back(nxt);
  q1.push_back(nxt);
  EXPECT_EQ(std::vector<float>(logits.begin(), logits.begin() + 64), run_chunks(*f.r, q0, 64, t2).back());
  EXPECT_EQ(std::vector<float>(logits.begin() + 64, logits.end()), run_chunks(*f.r, q1, 64, t3).back());
}

TEST(CpuRunner, RefusesBadSteps) {
  Fixture f(config("LlamaForCausalLM"), 4, 8);
  std::vector<float> logits;
  const std::vector<int32_t> t = {0};
  StepBatch b;
  b.seqs.push_back({.num_tokens = 5, .start_pos = 0, .block_table = &t, .sample = true});  // 5 > one block of 4
  b.tokens = {1, 2, 3, 4, 5};
  EXPECT_NE(f.r->step(b, &logits).message().find("do not cover position 4"), std::string::npos);
  const std::vector<int32_t> bad = {9};
  b.seqs[0] = {.num_tokens = 1, .start_pos = 0, .block_table = &bad, .sample = true};
  b.tokens = {1};
  EXPECT_NE(f.r->step(b, &logits).message().find("block 9"), std::string::npos);
  b.seqs[0].block_table = &t;
  b.tokens = {64};
  EXPECT_NE(f.r->step(b, &logits).message().find("token id 64"), std::string::npos);
  b.tokens = {1, 2};
  EXPECT_FALSE(f.r->step(b, &logits).ok());
  EXPECT_EQ(f.r->num_kv_blocks(), 8);
  EXPECT_EQ(f.r->block_size(), 4);
}

TEST(CpuRunner, WeightsInAnyFloatDtypeLoad) {
  const LlmConfig c = config("LlamaForCausalLM");
  auto h = random_checkpoint(c, DType::BF16, 3);
  RunnerOptions o;
  o.num_kv_blocks = 4;
  auto r = make_cpu_runner(c, *h, o);
  ASSERT_TRUE(r.ok());
  const auto l = run_chunks(**r, prompt(3), 8, table_of(0, 1));
  EXPECT_TRUE(std::all_of(l.back().begin(), l.back().end(), [](float x) { return std::isfinite(x); }));
  // decode_bytes: f32 weights (LM head counted, embedding table not) plus K and V of every token.
  const int64_t weights = (c.num_params() - c.vocab_size * c.hidden_size) * 4;
  EXPECT_EQ((*r)->decode_bytes(3, 10), weights + 3 * 10 * c.kv_bytes_per_token(DType::F32));
}

}  // namespace
}  // namespace gpuopt::llm

namespace gpuopt::llm {
namespace {

// hidden_states (decoder embeddings) is the step up to the final norm: times the LM head it gives
// step()'s logits; random_checkpoint's norm weights are 1, so each row's mean square is about 1; a
// sequence batched with another gives its hidden state alone, bitwise.
TEST(CpuRunner, HiddenStatesAreTheLmHeadsInput) {
  const LlmConfig cfg = config("LlamaForCausalLM");
  Fixture f(cfg, 4, 64);
  Fixture g(cfg, 4, 64);  // a fresh cache for the second pass
  const auto p = prompt(9), q = prompt(5, 1);
  const auto tp = table_of(0, 3), tq = table_of(10, 2);
  StepBatch b;
  b.seqs.push_back({.num_tokens = 9, .start_pos = 0, .block_table = &tp, .sample = true});
  b.seqs.push_back({.num_tokens = 5, .start_pos = 0, .block_table = &tq, .sample = true});
  b.tokens = p;
  b.tokens.insert(b.tokens.end(), q.begin(), q.end());
  std::vector<float> h, logits;
  ASSERT_TRUE(f.r->hidden_states(b, &h).ok());
  ASSERT_TRUE(g.r->step(b, &logits).ok());
  const int64_t H = cfg.hidden_size, V = cfg.vocab_size;
  ASSERT_EQ(h.size(), static_cast<size_t>(2 * H));
  ASSERT_EQ(logits.size(), static_cast<size_t>(2 * V));
  const WeightView* head = f.ck->find("lm_head.weight");
  ASSERT_NE(head, nullptr);
  const float* w = static_cast<const float*>(head->data);
  for (int s = 0; s < 2; ++s) {
    double ms = 0;
    for (int64_t i = 0; i < H; ++i) ms += double(h[s * H + i]) * h[s * H + i];
    // x / sqrt(mean(x^2) + eps): a mean square just under 1 (eps weighs with these small weights).
    EXPECT_GT(ms / static_cast<double>(H), 0.9);
    EXPECT_LE(ms / static_cast<double>(H), 1.0 + 1e-5);
    for (int64_t v = 0; v < V; ++v) {
      double dot = 0;
      for (int64_t i = 0; i < H; ++i) dot += double(h[s * H + i]) * w[v * H + i];
      EXPECT_NEAR(dot, logits[s * V + v], 1e-5 + 1e-4 * std::fabs(dot)) << s << " " << v;
    }
  }
  StepBatch one;
  one.seqs.push_back({.num_tokens = 5, .start_pos = 0, .block_table = &tq, .sample = true});
  one.tokens = q;
  std::vector<float> alone;
  ASSERT_TRUE(g.r->hidden_states(one, &alone).ok());
  EXPECT_TRUE(std::equal(alone.begin(), alone.end(), h.begin() + H));
}

}  // namespace
}  // namespace gpuopt::llm
