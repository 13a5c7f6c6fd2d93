// The serving engine over the CUDA runner (f32, CUDA graphs on, device sampling): concurrent
// greedy requests, a KV cache small enough to force preemption and a shared prompt prefix, against
// the CPU runner's greedy tokens for each request alone. The two runners' f32 logits differ by
// rounding (runner_test bounds it), so a token may differ only where the CPU's best two logits are
// within 1e-3 of the largest logit's magnitude; the sequence is compared up to that near tie.
// Skipped without a GPU.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <map>
#include <mutex>

#include "llm/engine.h"
#include "llm/runner.h"

namespace gpuopt::llm {
namespace {

using namespace std::chrono_literals;

bool have_gpu() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

LlmConfig tiny() {
  LlmConfig c;
  c.arch = LlmArch::Llama;
  c.architecture = "LlamaForCausalLM";
  c.vocab_size = 101;
  c.hidden_size = 128;
  c.intermediate_size = 88;
  c.num_layers = 2;
  c.num_heads = 2;
  c.num_kv_heads = 1;
  c.head_dim = 64;
  c.max_position = 256;
  c.rms_norm_eps = 1e-5;
  c.rope_theta = 10000;
  c.dtype = DType::F32;
  c.eos_token_ids = {100};
  return c;
}

RunnerOptions options(DType dt, int64_t blocks) {
  RunnerOptions o;
  o.compute_dtype = dt;
  o.block_size = 16;
  o.num_kv_blocks = blocks;
  o.max_batch = 32;
  o.max_step_tokens = 512;
  return o;
}

std::vector<int64_t> prompt(int n, int salt, int64_t vocab) {
  std::vector<int64_t> p;
  for (int i = 0; i < n; ++i) p.push_back((i * 31 + salt * 17 + 5) % (vocab - 1));
  return p;
}

// The CPU runner's greedy continuation with each step's logits (the oracle).
struct Reference {
  std::vector<int64_t> tokens;
  std::vector<std::vector<float>> logits;  // before each token
};
Reference cpu_greedy(const LlmConfig& cfg, const Checkpoint& ck, const std::vector<int64_t>& p, int64_t max_new) {
  Reference ref;
  auto r = make_cpu_runner(cfg, ck, options(DType::F32, 64));
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  if (!r.ok()) return ref;
  std::vector<int32_t> table;
  for (int32_t b = 0; b < 64; ++b) table.push_back(b);
  std::vector<int32_t> feed(p.begin(), p.end());
  int64_t pos = 0;
  for (int64_t i = 0; i < max_new; ++i) {
    StepBatch b;
    b.seqs.push_back({static_cast<int32_t>(feed.size()), pos, &table, true});
    b.tokens = feed;
    std::vector<float> logits;
    EXPECT_TRUE((*r)->step(b, &logits).ok());
    pos += static_cast<int64_t>(feed.size());
    const int64_t tok = std::max_element(logits.begin(), logits.end()) - logits.begin();
    ref.logits.push_back(logits);
    ref.tokens.push_back(tok);
    if (tok == 100) break;
    feed = {static_cast<int32_t>(tok)};
  }
  return ref;
}

// Compares up to the first difference, which must be a near tie of the CPU's logits.
void expect_matches(const Reference& ref, const std::vector<int64_t>& got, const std::string& what) {
  size_t i = 0;
  while (i < ref.tokens.size() && i < got.size() && ref.tokens[i] == got[i]) ++i;
  if (i == ref.tokens.size() && i == got.size()) return;
  ASSERT_LT(i, ref.tokens.size()) << what << ": more tokens than the reference";
  ASSERT_LT(i, got.size()) << what << ": fewer tokens than the reference";
  const auto& l = ref.logits[i];
  float top = 0;
  for (float x : l) top = std::max(top, std::fabs(x));
  const float gap = l[static_cast<size_t>(ref.tokens[i])] - l[static_cast<size_t>(got[i])];
  EXPECT_LE(gap, 1e-3f * top) << what << ": token " << i << " is " << got[i] << ", the CPU's " << ref.tokens[i]
                              << " leads it by " << gap << " (largest logit " << top << ")";
}

struct Sink {
  std::mutex mu;
  std::condition_variable cv;
  std::map<uint64_t, std::vector<int64_t>> tokens;
  std::map<uint64_t, std::string> reason;
  int done = 0;
  OutputCallback cb() {
    return [this](const EngineOutput& o) {
      std::lock_guard<std::mutex> lk(mu);
      for (const SampledToken& t : o.tokens) tokens[o.id].push_back(t.token);
      if (o.finished) {
        reason[o.id] = o.finish_reason + (o.error.empty() ? "" : ": " + o.error);
        ++done;
        cv.notify_all();
      }
    };
  }
  bool wait(int n) {
    std::unique_lock<std::mutex> lk(mu);
    return cv.wait_for(lk, 120s, [&] { return done >= n; });
  }
};

TEST(CudaEngine, ConcurrentRequestsPreemptionAndPrefixCacheMatchTheCpu) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  const LlmConfig cfg = tiny();
  auto ck = random_checkpoint(cfg, DType::F32, 77);
  // 12 blocks of 16 tokens; 16 requests of up to 40 + 24 tokens (4 blocks each) at once.
  auto runner = make_cuda_runner(cfg, *ck, options(DType::F32, 12));
  ASSERT_TRUE(runner.ok()) << runner.status().to_string();
  EngineOptions eo;
  eo.max_num_seqs = 32;
  eo.max_num_batched_tokens = 96;
  auto engine = LlmEngine::start(std::move(*runner), nullptr, eo);
  ASSERT_TRUE(engine.ok()) << engine.status().to_string();
  Sink sink;
  const auto shared = prompt(32, 99, cfg.vocab_size);  // two full blocks every request shares
  std::vector<std::pair<uint64_t, std::vector<int64_t>>> sent;
  for (int i = 0; i < 16; ++i) {
    auto p = i % 2 ? shared : std::vector<int64_t>{};
    const auto tail = prompt(3 + i, i, cfg.vocab_size);
    p.insert(p.end(), tail.begin(), tail.end());
    EngineRequest r;
    r.prompt = p;
    r.params.temperature = 0;
    r.params.max_new_tokens = 24;
    auto id = (*engine)->submit(std::move(r), sink.cb());
    ASSERT_TRUE(id.ok()) << id.status().to_string();
    sent.push_back({*id, p});
  }
  ASSERT_TRUE(sink.wait(16));
  (*engine)->stop(1s);
  for (const auto& [id, p] : sent) {
    EXPECT_TRUE(sink.reason[id] == "length" || sink.reason[id] == "stop") << sink.reason[id];
    expect_matches(cpu_greedy(cfg, *ck, p, 24), sink.tokens[id], "request " + std::to_string(id));
  }
  const EngineStats s = (*engine)->stats();
  EXPECT_GT(s.num_preemptions_total, 0);
  EXPECT_GT(s.prefix_cache_hits, 0);
  EXPECT_EQ(s.kv_cache_usage, 0.0);
  EXPECT_EQ(s.requests_finished_total, 16);
}

}  // namespace
}  // namespace gpuopt::llm
