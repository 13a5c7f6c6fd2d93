// Shared by the serving engine's tests: a tiny random Llama on the CPU runner (the fp32 oracle),
// a tokenizer whose ids decode to fixed pieces, and a collector of the engine's updates.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "llm/engine.h"
#include "llm/generate.h"
#include "llm/runner.h"

namespace gpuopt::llm::testing {

inline LlmConfig tiny_config(int64_t max_position = 128) {
  const std::string j = R"({"architectures": ["LlamaForCausalLM"], "vocab_size": 64, "hidden_size": 32,
    "intermediate_size": 48, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
    "max_position_embeddings": )" +
                        std::to_string(max_position) + R"(, "rms_norm_eps": 1e-6, "eos_token_id": 63})";
  auto c = parse_llm_config(j, "test config");
  EXPECT_TRUE(c.ok()) << c.status().to_string();
  return *c;
}

struct TinyModel {
  LlmConfig cfg;
  std::unique_ptr<Checkpoint> ck;
  explicit TinyModel(int64_t max_position = 128, uint64_t seed = 7)
      : cfg(tiny_config(max_position)), ck(random_checkpoint(cfg, DType::F32, seed)) {}
  std::unique_ptr<ModelRunner> runner(int64_t blocks, int block_size = 4) const {
    RunnerOptions o;
    o.block_size = block_size;
    o.num_kv_blocks = blocks;
    auto r = make_cpu_runner(cfg, *ck, o);
    EXPECT_TRUE(r.ok()) << r.status().to_string();
    return r.ok() ? std::move(*r) : nullptr;
  }
};

// Id i decodes to kPieces[i % 26 letters...]: a few pieces are longer so stop strings can span
// tokens; 63 is EOS (special).
class PieceTokenizer final : public Tokenizer {
 public:
  static std::string piece(int64_t id) {
    if (id == 63) return "</s>";
    if (id < 26) return std::string(1, static_cast<char>('a' + id));
    if (id < 52) return std::string(1, static_cast<char>('A' + id - 26));
    return std::string("xy") + static_cast<char>('0' + (id - 52) % 10);
  }
  std::vector<int64_t> encode(std::string_view, bool) const override { return {}; }
  std::string decode(const std::vector<int64_t>& ids, bool skip_special) const override {
    std::string s;
    for (int64_t id : ids)
      if (!(skip_special && id == 63)) s += piece(id);
    return s;
  }
  int64_t vocab_size() const override { return 64; }
  std::optional<int64_t> token_to_id(std::string_view) const override { return std::nullopt; }
  std::optional<std::string> id_to_token(int64_t id) const override { return piece(id); }
  bool is_special(int64_t id) const override { return id == 63; }
};

struct Collected {
  std::vector<int64_t> tokens;
  std::string text;
  std::string reason, error;
  int finals = 0;
  int updates = 0;
  int64_t cached_prompt_tokens = 0;
  int64_t completion_tokens = 0;
};

// Gathers every request's updates; wait() blocks until `n` requests have finished.
class Collector {
 public:
  OutputCallback callback() {
    return [this](const EngineOutput& o) {
      std::lock_guard<std::mutex> lk(mu_);
      Collected& c = got_[o.id];
      for (const SampledToken& t : o.tokens) c.tokens.push_back(t.token);
      c.text += o.text;
      ++c.updates;
      c.completion_tokens = o.completion_tokens;
      c.cached_prompt_tokens = o.cached_prompt_tokens;
      if (o.finished) {
        EXPECT_EQ(c.finals, 0) << "request " << o.id << " finished twice";
        ++c.finals;
        c.reason = o.finish_reason;
        c.error = o.error;
        ++finished_;
        cv_.notify_all();
      }
    };
  }
  bool wait(int n, std::chrono::seconds limit = std::chrono::seconds(60)) {
    std::unique_lock<std::mutex> lk(mu_);
    return cv_.wait_for(lk, limit, [&] { return finished_ >= n; });
  }
  Collected get(uint64_t id) {
    std::lock_guard<std::mutex> lk(mu_);
    return got_[id];
  }
  int finished() {
    std::lock_guard<std::mutex> lk(mu_);
    return finished_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<uint64_t, Collected> got_;
  int finished_ = 0;
};

// What generate() gives for one request alone on a fresh runner: the oracle.
inline SequenceResult alone(const TinyModel& m, const std::vector<int64_t>& prompt, const SamplingParams& p,
                            const Tokenizer* tok = nullptr) {
  auto r = m.runner(256);
  GenerateOptions go;
  go.tokenizer = tok;
  auto res = generate(*r, {{prompt, p}}, go);
  EXPECT_TRUE(res.ok()) << res.status().to_string();
  return res.ok() ? res->seqs[0] : SequenceResult{};
}

inline EngineRequest request(std::vector<int64_t> prompt, SamplingParams p) {
  EngineRequest r;
  r.prompt = std::move(prompt);
  r.params = std::move(p);
  return r;
}

inline std::vector<int64_t> make_prompt(int n, int salt) {
  std::vector<int64_t> p;
  for (int i = 0; i < n; ++i) p.push_back((i * 7 + 3 + salt * 13 + salt * i) % 63);
  return p;
}

}  // namespace gpuopt::llm::testing
