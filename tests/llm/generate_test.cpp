// The generate loop over a scripted runner: the next token is a fixed function of the sequence so
// far, which the runner reads back through the block table from its own paged "cache" (so wrong
// tokens, positions, chunking or shared blocks change the output). The expected sequences are
// computed here from the same rule, directly.
#include "llm/generate.h"

#include <gtest/gtest.h>

#include <map>
#include <numeric>

namespace gpuopt::llm {
namespace {

constexpr int64_t kVocab = 16;
constexpr int64_t kEos = 15;

LlmConfig fake_config(int64_t max_position = 40) {
  LlmConfig c;
  c.architecture = "LlamaForCausalLM";
  c.vocab_size = kVocab;
  c.hidden_size = 8;
  c.intermediate_size = 8;
  c.num_layers = 1;
  c.num_heads = 1;
  c.num_kv_heads = 1;
  c.head_dim = 8;
  c.max_position = max_position;
  c.eos_token_ids = {kEos};
  return c;
}

// The rule: after the history h, the next token is (sum(h) + 3 * len(h)) % 13, or EOS once the
// history reaches `eos_at` tokens.
int64_t next_token(const std::vector<int64_t>& h, size_t eos_at) {
  if (h.size() >= eos_at) return kEos;
  return (std::accumulate(h.begin(), h.end(), int64_t{0}) + 3 * static_cast<int64_t>(h.size())) % 13;
}

class ScriptedRunner final : public ModelRunner {
 public:
  ScriptedRunner(LlmConfig c, int block_size, int64_t blocks, size_t eos_at = 1000)
      : c_(std::move(c)),
        bs_(block_size),
        blocks_(blocks),
        eos_at_(eos_at),
        cache_(static_cast<size_t>(blocks * block_size), -1) {}
  const LlmConfig& config() const override { return c_; }
  int64_t num_kv_blocks() const override { return blocks_; }
  int block_size() const override { return bs_; }
  int64_t decode_bytes(int batch, int64_t context) const override { return 1000000 * batch + context; }

  Status step(const StepBatch& b, std::vector<float>* logits) override {
    logits->clear();
    size_t t = 0;
    ++steps;
    for (const StepSeq& s : b.seqs) {
      max_tokens_in_step = std::max<int64_t>(max_tokens_in_step, static_cast<int64_t>(b.tokens.size()));
      const auto& table = *s.block_table;
      EXPECT_GE(static_cast<int64_t>(table.size()) * bs_, s.start_pos + s.num_tokens);
      for (int32_t i = 0; i < s.num_tokens; ++i, ++t) {
        const int64_t p = s.start_pos + i;
        cache_[static_cast<size_t>(table[static_cast<size_t>(p / bs_)] * bs_ + p % bs_)] = b.tokens[t];
      }
      if (!s.sample) continue;
      std::vector<int64_t> h;  // read back through the table: positions 0 .. start_pos + num_tokens - 1
      for (int64_t p = 0; p < s.start_pos + s.num_tokens; ++p)
        h.push_back(cache_[static_cast<size_t>(table[static_cast<size_t>(p / bs_)] * bs_ + p % bs_)]);
      std::vector<float> l(kVocab, 0.0f);
      l[static_cast<size_t>(next_token(h, eos_at_))] = 5.0f;
      logits->insert(logits->end(), l.begin(), l.end());
    }
    return Status::Ok();
  }

  int steps = 0;
  int64_t max_tokens_in_step = 0;

 private:
  LlmConfig c_;
  int bs_;
  int64_t blocks_;
  size_t eos_at_;
  std::vector<int64_t> cache_;
};

std::vector<int64_t> expected(std::vector<int64_t> h, int64_t n, size_t eos_at = 1000, bool ignore_eos = false) {
  std::vector<int64_t> out;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t t = next_token(h, eos_at);
    out.push_back(t);
    if (t == kEos && !ignore_eos) break;
    h.push_back(t);
  }
  return out;
}

GenerateRequest req(std::vector<int64_t> prompt, int64_t max_new) {
  GenerateRequest r;
  r.prompt = std::move(prompt);
  r.params.temperature = 0;
  r.params.max_new_tokens = max_new;
  return r;
}

TEST(Generate, BatchWithChunkedPrefillFollowsTheRule) {
  const std::vector<GenerateRequest> reqs = {req({1, 2, 3, 4, 5, 6, 7, 8, 9}, 6), req({4}, 9), req({2, 2, 2, 2, 2}, 3)};
  const LlmConfig c = fake_config();
  const int64_t need = blocks_needed(c, reqs, 4);
  EXPECT_EQ(need, 4 + 3 + 2);  // (9+5)/4 -> 4, (1+8)/4 -> 3, (5+2)/4 -> 2
  ScriptedRunner r(c, 4, need);
  GenerateOptions go;
  go.max_step_tokens = 4;
  go.bandwidth_gbs = 1;
  go.capture_first_logits = true;
  std::vector<std::pair<size_t, int64_t>> streamed;
  go.on_token = [&](size_t i, const SampledToken& t) { streamed.push_back({i, t.token}); };
  auto res = generate(r, reqs, go);
  ASSERT_TRUE(res.ok()) << res.status().to_string();
  ASSERT_EQ(res->seqs.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(res->seqs[i].tokens, expected(reqs[i].prompt, reqs[i].params.max_new_tokens)) << i;
    EXPECT_EQ(res->seqs[i].finish_reason, "length");
    EXPECT_GT(res->seqs[i].ttft_ms, 0);
    ASSERT_EQ(res->seqs[i].first_logits.size(), static_cast<size_t>(kVocab));
    EXPECT_EQ(res->seqs[i].first_logits[static_cast<size_t>(res->seqs[i].tokens[0])], 5.0f);
  }
  EXPECT_LE(r.max_tokens_in_step, 4);
  EXPECT_EQ(streamed.size(), 6u + 9 + 3);
  EXPECT_EQ(res->generated_tokens, 18);
  EXPECT_EQ(res->prompt_tokens, 15);
  EXPECT_GT(res->decode_steps, 0);
  EXPECT_GT(res->tok_s, 0);
  EXPECT_GT(res->itl_p99_ms, 0);
  EXPECT_GE(res->itl_p99_ms, res->itl_p50_ms);
  EXPECT_GT(res->roofline_frac, 0);  // ~1 MB per sequence per step / step time / 1 GB/s

  // One block fewer: refused up front, nothing run.
  ScriptedRunner small(c, 4, need - 1);
  auto no = generate(small, reqs, go);
  ASSERT_FALSE(no.ok());
  EXPECT_EQ(no.status().code(), StatusCode::kOutOfMemory);
  EXPECT_NE(no.status().message().find("need 9 blocks"), std::string::npos) << no.status().to_string();
  EXPECT_EQ(small.steps, 0);
}

TEST(Generate, ContextEndsGenerationAndLongPromptsAreRefused) {
  const LlmConfig c = fake_config(8);
  ScriptedRunner r(c, 4, 16);
  std::vector<int64_t> p(8, 1);
  auto res = generate(r, {req(p, 5)}, {});
  ASSERT_TRUE(res.ok()) << res.status().to_string();
  EXPECT_EQ(res->seqs[0].tokens.size(), 1u);  // a full context still yields its one next token
  EXPECT_EQ(res->seqs[0].finish_reason, "length");
  auto res2 = generate(r, {req({1, 2, 3, 4, 5, 6}, 10)}, {});
  ASSERT_TRUE(res2.ok());
  EXPECT_EQ(res2->seqs[0].tokens, expected({1, 2, 3, 4, 5, 6}, 3));  // positions 6, 7 fed, 3 tokens
  p.push_back(1);
  auto bad = generate(r, {req(p, 1)}, {});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("9 tokens, longer than the model's context of 8"), std::string::npos)
      << bad.status().to_string();
  EXPECT_NE(generate(r, {req({}, 1)}, {}).status().message().find("empty"), std::string::npos);
  EXPECT_NE(generate(r, {req({16}, 1)}, {}).status().message().find("token id 16"), std::string::npos);
}

TEST(Generate, EosAndStopIds) {
  const LlmConfig c = fake_config();
  ScriptedRunner r(c, 4, 32, /*eos_at=*/7);
  auto res = generate(r, {req({1, 2, 3}, 10)}, {});
  ASSERT_TRUE(res.ok());
  EXPECT_EQ(res->seqs[0].tokens, expected({1, 2, 3}, 10, 7));
  EXPECT_EQ(res->seqs[0].tokens.size(), 5u);  // 4 tokens, then EOS (included in the ids)
  EXPECT_EQ(res->seqs[0].tokens.back(), kEos);
  EXPECT_EQ(res->seqs[0].finish_reason, "stop");
  GenerateRequest ig = req({1, 2, 3}, 10);
  ig.params.ignore_eos = true;
  res = generate(r, {ig}, {});
  ASSERT_TRUE(res.ok());
  EXPECT_EQ(res->seqs[0].tokens.size(), 10u);
  EXPECT_EQ(res->seqs[0].finish_reason, "length");
  const auto want = expected({1, 2, 3}, 10);
  GenerateRequest st = req({1, 2, 3}, 10);
  st.params.stop_token_ids = {want[2]};
  ScriptedRunner r2(c, 4, 32);
  res = generate(r2, {st}, {});
  ASSERT_TRUE(res.ok());
  const size_t k = static_cast<size_t>(std::find(want.begin(), want.end(), want[2]) - want.begin());
  EXPECT_EQ(res->seqs[0].tokens, std::vector<int64_t>(want.begin(), want.begin() + static_cast<std::ptrdiff_t>(k + 1)));
  EXPECT_EQ(res->seqs[0].finish_reason, "stop");
}

// Token i decodes to kPieces[i]; 15 (EOS) is special.
const char* kPieces[kVocab] = {"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m", "xy", "z", "</s>"};

class PieceTokenizer final : public Tokenizer {
 public:
  std::vector<int64_t> encode(std::string_view, bool) const override { return {}; }
  std::string decode(const std::vector<int64_t>& ids, bool skip_special) const override {
    std::string s;
    for (int64_t id : ids)
      if (!(skip_special && id == kEos)) s += kPieces[id];
    return s;
  }
  int64_t vocab_size() const override { return kVocab; }
  std::optional<int64_t> token_to_id(std::string_view) const override { return std::nullopt; }
  std::optional<std::string> id_to_token(int64_t id) const override { return kPieces[id]; }
  bool is_special(int64_t id) const override { return id == kEos; }
};

TEST(Generate, StopStringsCutTheTextAndStreamingHoldsItBack) {
  const LlmConfig c = fake_config();
  const std::vector<int64_t> prompt = {1, 2, 3};
  const auto want = expected(prompt, 12);
  std::string full;
  for (int64_t t : want) full += kPieces[t];
  // A stop string made of the text of tokens 3 and 4 of the output (it spans two tokens).
  const std::string stop = std::string(kPieces[want[3]]) + kPieces[want[4]];
  const size_t cut = full.find(stop);
  ASSERT_NE(cut, std::string::npos);
  PieceTokenizer tok;
  GenerateRequest r = req(prompt, 12);
  r.params.stop = {"never-there", stop};
  GenerateOptions go;
  go.tokenizer = &tok;
  std::string streamed;
  bool stopping = true;
  go.on_text = [&](size_t, const std::string& s) {
    streamed += s;
    if (stopping) {
      EXPECT_EQ(streamed.find(stop), std::string::npos);
    }
  };
  ScriptedRunner run(c, 4, 32);
  auto res = generate(run, {r}, go);
  ASSERT_TRUE(res.ok()) << res.status().to_string();
  EXPECT_EQ(res->seqs[0].text, full.substr(0, cut));
  EXPECT_EQ(streamed, res->seqs[0].text);
  EXPECT_EQ(res->seqs[0].finish_reason, "stop");
  EXPECT_LE(res->seqs[0].tokens.size(), 5u);

  // Without a stop string the whole text streams; EOS adds no text.
  ScriptedRunner run2(c, 4, 32, /*eos_at=*/8);
  r.params.stop.clear();
  streamed.clear();
  stopping = false;
  res = generate(run2, {r}, go);
  ASSERT_TRUE(res.ok());
  std::string until_eos;
  for (int64_t t : expected(prompt, 12, 8))
    if (t != kEos) until_eos += kPieces[t];
  EXPECT_EQ(res->seqs[0].text, until_eos);
  EXPECT_EQ(streamed, until_eos);

  // Stop strings need a tokenizer.
  r.params.stop = {"x"};
  EXPECT_NE(generate(run2, {r}, {}).status().message().find("tokenizer"), std::string::npos);
}

TEST(Generate, SeededSamplingIsReproducible) {
  const LlmConfig c = fake_config();
  GenerateRequest r = req({1, 2}, 6);
  r.params.temperature = 1.0;
  r.params.seed = 5;
  // The scripted logits put 5.0 on one token and 0 elsewhere: sampling picks others sometimes.
  ScriptedRunner a(c, 4, 32), b(c, 4, 32);
  auto x = generate(a, {r, r}, {}), y = generate(b, {r, r}, {});
  ASSERT_TRUE(x.ok() && y.ok());
  EXPECT_EQ(x->seqs[0].tokens, y->seqs[0].tokens);
  EXPECT_EQ(x->seqs[1].tokens, y->seqs[1].tokens);
}

}  // namespace
}  // namespace gpuopt::llm
