// The CUDA runner against the CPU runner (the fp32 oracle) on tiny random Llama / Qwen2 / GQA
// models: f32 logits within 1e-4 relative over prefill + 20 decode steps, chunked prefill, a batch
// of sequences of different lengths; fp16 within a tolerance argued below; CUDA graphs on and off
// bit-identical. Skipped without a GPU.
#include <cuda_runtime.h>
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "llm/checkpoint.h"
#include "llm/config.h"
#include "llm/kv_cache.h"
#include "llm/runner.h"

namespace gpuopt::llm {
namespace {

bool have_gpu() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

#define REQUIRE_GPU() \
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device"

LlmConfig tiny(LlmArch arch, int64_t heads, int64_t kv_heads) {
  LlmConfig c;
  c.arch = arch;
  c.architecture = arch == LlmArch::Qwen2 ? "Qwen2ForCausalLM" : "LlamaForCausalLM";
  c.vocab_size = 101;  // odd sizes on purpose: nothing may assume multiples of 8
  c.hidden_size = heads * 64;
  c.intermediate_size = 88;
  c.num_layers = 2;
  c.num_heads = heads;
  c.num_kv_heads = kv_heads;
  c.head_dim = 64;  // the attention kernel serves 64 and 128
  c.max_position = 512;
  c.rms_norm_eps = 1e-5;
  c.rope_theta = 10000;
  c.qkv_bias = arch == LlmArch::Qwen2;
  c.dtype = DType::F32;
  return c;
}

RunnerOptions opts_for(DType dt, bool graphs, int block_size = 16) {
  RunnerOptions o;
  o.compute_dtype = dt;
  o.block_size = block_size;
  o.num_kv_blocks = 128;
  o.max_batch = 8;
  o.max_step_tokens = 256;
  o.cuda_graphs = graphs;
  return o;
}

// random_checkpoint's norms are all 1 and its biases all 0, which would let a runner that skips
// either pass: these copies give them varied values (norms 1 +- 0.5, biases +- 0.5).
class VariedCheckpoint : public Checkpoint {
 public:
  VariedCheckpoint(const LlmConfig& cfg, uint64_t seed) {
    auto base = random_checkpoint(cfg, DType::F32, seed);
    uint64_t state = seed * 2654435761u + 1;
    auto next = [&] {  // uniform in [-0.5, 0.5), xorshift: reproducible everywhere
      state ^= state << 13;
      state ^= state >> 7;
      state ^= state << 17;
      return static_cast<float>(static_cast<double>(state >> 11) * 0x1.0p-53) - 0.5f;
    };
    for (const WeightView& w : base->tensors()) {
      std::vector<float> v(w.bytes / 4);
      std::memcpy(v.data(), w.data, w.bytes);
      const bool norm = w.name.find("norm") != std::string::npos;
      const bool bias = w.name.size() > 5 && w.name.compare(w.name.size() - 5, 5, ".bias") == 0;
      if (norm)
        for (float& x : v) x = 1.0f + next();
      if (bias)
        for (float& x : v) x = next();
      data_.push_back(std::move(v));
      views_.push_back(w);
    }
    for (size_t i = 0; i < views_.size(); ++i) views_[i].data = data_[i].data();
  }
  const WeightView* find(const std::string& name) const override {
    for (const WeightView& w : views_)
      if (w.name == name) return &w;
    return nullptr;
  }
  const std::vector<WeightView>& tensors() const override { return views_; }
  // An f32 scalar tensor (such as a layer's self_attn.k_scale).
  void add_scalar(const std::string& name, float v) {
    data_.push_back({v});
    WeightView w;
    w.name = name;
    w.dtype = DType::F32;
    w.shape = {};
    w.data = data_.back().data();
    w.bytes = 4;
    w.file_dtype = "F32";
    views_.push_back(w);
  }
  size_t total_bytes() const override {
    size_t n = 0;
    for (const WeightView& w : views_) n += w.bytes;
    return n;
  }

 private:
  std::vector<WeightView> views_;
  std::vector<std::vector<float>> data_;
};

struct Seq {
  std::vector<int32_t> tokens;  // prompt, then generated
  int64_t cached = 0;
  std::vector<int32_t> table;
};

// Drives several runners through the same steps with shared block tables; after each step the
// runners' logits are handed to `check` and the first runner's argmax extends decoding sequences.
class Driver {
 public:
  Driver(std::vector<ModelRunner*> runners, int block_size)
      : runners_(std::move(runners)), alloc_(128), bs_(block_size) {}
  int add(std::vector<int32_t> prompt) {
    seqs_.push_back({std::move(prompt), 0, {}});
    return static_cast<int>(seqs_.size()) - 1;
  }
  // One step: for each (seq, n) the next n uncached tokens of seq.
  template <typename Check>
  void step(const std::vector<std::pair<int, int>>& work, Check check) {
    StepBatch b;
    for (auto [i, n] : work) {
      Seq& s = seqs_[static_cast<size_t>(i)];
      ASSERT_LE(s.cached + n, static_cast<int64_t>(s.tokens.size()));
      ASSERT_TRUE(alloc_.grow(s.table, s.cached + n, bs_));
      b.seqs.push_back({n, s.cached, &s.table, true});
      b.tokens.insert(b.tokens.end(), s.tokens.begin() + s.cached, s.tokens.begin() + s.cached + n);
    }
    std::vector<std::vector<float>> out(runners_.size());
    for (size_t r = 0; r < runners_.size(); ++r) {
      Status st = runners_[r]->step(b, &out[r]);
      ASSERT_TRUE(st.ok()) << st.to_string();
      ASSERT_EQ(out[r].size(), work.size() * static_cast<size_t>(runners_[0]->config().vocab_size));
    }
    check(out);
    const int64_t V = runners_[0]->config().vocab_size;
    for (size_t k = 0; k < work.size(); ++k) {
      Seq& s = seqs_[static_cast<size_t>(work[k].first)];
      s.cached += work[k].second;
      if (s.cached == static_cast<int64_t>(s.tokens.size())) {
        const float* row = out[0].data() + k * static_cast<size_t>(V);
        s.tokens.push_back(static_cast<int32_t>(std::max_element(row, row + V) - row));
      }
    }
  }

 private:
  std::vector<ModelRunner*> runners_;
  std::vector<Seq> seqs_;
  BlockAllocator alloc_;
  int bs_;
};

std::vector<int32_t> prompt(int n, int salt, int64_t vocab) {
  std::vector<int32_t> p;
  for (int i = 0; i < n; ++i) p.push_back(static_cast<int32_t>((i * 37 + salt * 11 + 5) % vocab));
  return p;
}

// Worst relative error of `got` against `ref` over rows of V: max |got-ref| / max |ref| per row.
double rel_err(const std::vector<float>& got, const std::vector<float>& ref, int64_t V) {
  double worst = 0;
  for (size_t r = 0; r * static_cast<size_t>(V) < ref.size(); ++r) {
    double num = 0, den = 0;
    for (int64_t j = 0; j < V; ++j) {
      const size_t i = r * static_cast<size_t>(V) + static_cast<size_t>(j);
      if (!std::isfinite(got[i])) return INFINITY;
      num = std::max(num, std::fabs(static_cast<double>(got[i]) - ref[i]));
      den = std::max(den, std::fabs(static_cast<double>(ref[i])));
    }
    worst = std::max(worst, num / std::max(den, 1e-30));
  }
  return worst;
}

struct Pair {
  std::unique_ptr<Checkpoint> ckpt;
  std::unique_ptr<ModelRunner> cpu, gpu;
};

Pair make_pair_for(const LlmConfig& cfg, DType gpu_dt, bool graphs = true, int block_size = 16) {
  Pair p;
  p.ckpt = std::make_unique<VariedCheckpoint>(cfg, 1234);
  auto cpu = make_cpu_runner(cfg, *p.ckpt, opts_for(DType::F32, false, block_size));
  EXPECT_TRUE(cpu.ok()) << cpu.status().to_string();
  auto gpu = make_cuda_runner(cfg, *p.ckpt, opts_for(gpu_dt, graphs, block_size));
  EXPECT_TRUE(gpu.ok()) << gpu.status().to_string();
  if (cpu.ok()) p.cpu = std::move(cpu).value();
  if (gpu.ok()) p.gpu = std::move(gpu).value();
  return p;
}

// Prefill (in chunks of `chunk` tokens) + 20 decode steps of one sequence, logits compared at
// every step.
void prefill_and_decode(const LlmConfig& cfg, DType dt, double tol, int prompt_len, int chunk) {
  Pair p = make_pair_for(cfg, dt);
  ASSERT_TRUE(p.cpu && p.gpu);
  Driver d({p.cpu.get(), p.gpu.get()}, 16);
  const int s = d.add(prompt(prompt_len, 1, cfg.vocab_size));
  double worst = 0;
  auto check = [&](const std::vector<std::vector<float>>& out) {
    const double e = rel_err(out[1], out[0], cfg.vocab_size);
    worst = std::max(worst, e);
    EXPECT_LE(e, tol);
  };
  for (int done = 0; done < prompt_len; done += chunk) d.step({{s, std::min(chunk, prompt_len - done)}}, check);
  for (int i = 0; i < 20; ++i) d.step({{s, 1}}, check);
  ::testing::Test::RecordProperty("worst_rel_err", std::to_string(worst));
  std::printf("worst relative logits error: %.3g\n", worst);
}

TEST(CudaRunner, LlamaF32MatchesCpu) {
  REQUIRE_GPU();
  prefill_and_decode(tiny(LlmArch::Llama, 4, 4), DType::F32, 1e-4, 23, 23);
}

TEST(CudaRunner, Qwen2GqaF32MatchesCpu) {
  REQUIRE_GPU();
  prefill_and_decode(tiny(LlmArch::Qwen2, 4, 2), DType::F32, 1e-4, 19, 19);
}

TEST(CudaRunner, LlamaGqaF32ChunkedPrefill) {
  REQUIRE_GPU();
  // 45 tokens in chunks of 13: chunks cross block boundaries and attend to earlier chunks' cache.
  prefill_and_decode(tiny(LlmArch::Llama, 8, 2), DType::F32, 1e-4, 45, 13);
}

// fp16 activations and weights against the f32 oracle. fp16's unit roundoff is 2^-11 = 4.9e-4;
// each of the ~10 roundings per layer (weights, normed input, q/k/v, attention output, residual,
// gate/up, product, down output) adds at most that relative error, so two layers plus the head
// stay near 20 * 4.9e-4 = 1e-2 in the worst case; the logits' max-norm error measured on random
// data is well below. 1e-2 still fails on a wrong rotary pair, mask, scale or bias (errors of
// order one).
TEST(CudaRunner, LlamaF16NearCpu) {
  REQUIRE_GPU();
  prefill_and_decode(tiny(LlmArch::Llama, 4, 2), DType::F16, 1e-2, 30, 30);
}

TEST(CudaRunner, Qwen2F16NearCpu) {
  REQUIRE_GPU();
  prefill_and_decode(tiny(LlmArch::Qwen2, 4, 2), DType::F16, 1e-2, 21, 8);
}

// Three sequences of different lengths: one mixed prefill step, then batched decode (padded to a
// bucket of 4 on the GPU), a late joiner prefilled beside decoding sequences, all against the
// CPU runner running the same steps.
TEST(CudaRunner, BatchOfDifferentLengthsF32) {
  REQUIRE_GPU();
  const LlmConfig cfg = tiny(LlmArch::Llama, 4, 2);
  Pair p = make_pair_for(cfg, DType::F32);
  ASSERT_TRUE(p.cpu && p.gpu);
  Driver d({p.cpu.get(), p.gpu.get()}, 16);
  const int a = d.add(prompt(5, 2, cfg.vocab_size)), b = d.add(prompt(17, 3, cfg.vocab_size)),
            c = d.add(prompt(33, 4, cfg.vocab_size)), late = d.add(prompt(9, 5, cfg.vocab_size));
  auto check = [&](const std::vector<std::vector<float>>& out) {
    EXPECT_LE(rel_err(out[1], out[0], cfg.vocab_size), 1e-4);
  };
  d.step({{a, 5}, {b, 17}, {c, 33}}, check);
  for (int i = 0; i < 6; ++i) d.step({{a, 1}, {b, 1}, {c, 1}}, check);
  d.step({{a, 1}, {late, 9}, {c, 1}}, check);
  for (int i = 0; i < 6; ++i) d.step({{a, 1}, {b, 1}, {c, 1}, {late, 1}}, check);
}

// Graph replay must be the eager step exactly: same buckets, same GEMM algorithms. Block size 4
// makes the decode cross block-table width buckets (16 blocks = 64 tokens) mid-run.
TEST(CudaRunner, GraphsOnOffIdentical) {
  REQUIRE_GPU();
  const LlmConfig cfg = tiny(LlmArch::Qwen2, 4, 2);
  auto ckpt = std::make_unique<VariedCheckpoint>(cfg, 99);
  auto on = make_cuda_runner(cfg, *ckpt, opts_for(DType::F16, true, 4));
  auto off = make_cuda_runner(cfg, *ckpt, opts_for(DType::F16, false, 4));
  ASSERT_TRUE(on.ok() && off.ok()) << on.status().to_string() << off.status().to_string();
  Driver d({on->get(), off->get()}, 4);
  const int a = d.add(prompt(50, 6, cfg.vocab_size)), b = d.add(prompt(7, 7, cfg.vocab_size));
  int steps = 0;
  auto same = [&](const std::vector<std::vector<float>>& out) {
    ++steps;
    EXPECT_EQ(0, std::memcmp(out[0].data(), out[1].data(), out[0].size() * 4)) << "step " << steps;
  };
  d.step({{a, 50}, {b, 7}}, same);
  for (int i = 0; i < 24; ++i) d.step({{a, 1}, {b, 1}}, same);
  for (int i = 0; i < 3; ++i) d.step({{b, 1}}, same);  // another bucket, then back
  d.step({{a, 1}, {b, 1}}, same);
}

// An FP8 (e4m3) KV cache with per-layer scales from the checkpoint, GQA and MHA: the CUDA runner
// (f16 compute) against the CPU runner with the same cache, which stores the e4m3 codes of its
// f32 K/V. The GPU rounds K/V to f16 before e4m3, so now and then an element lands one e4m3 step
// (2^-3 relative) away from the CPU's; measured against f16's own 1e-2 bound (LlamaF16NearCpu),
// 3e-2 leaves room for those while a scale not applied (a factor 2-4 on K or V) or a wrong code
// layout is an error of order one.
TEST(CudaRunner, Fp8KvCacheNearCpuFp8Cache) {
  REQUIRE_GPU();
  for (int64_t kv_heads : {2, 8}) {
    const LlmConfig cfg = tiny(LlmArch::Llama, 8, kv_heads);
    auto ckpt = std::make_unique<VariedCheckpoint>(cfg, 77);
    const float scales[2][2] = {{0.5f, 2.0f}, {0.25f, 1.0f}};
    for (int l = 0; l < 2; ++l) {
      ckpt->add_scalar(fmt::format("model.layers.{}.self_attn.k_scale", l), scales[l][0]);
      ckpt->add_scalar(fmt::format("model.layers.{}.self_attn.v_scale", l), scales[l][1]);
    }
    RunnerOptions co = opts_for(DType::F32, false), go = opts_for(DType::F16, true);
    co.kv_cache_dtype = go.kv_cache_dtype = KvCacheDtype::Fp8E4m3;
    auto cpu = make_cpu_runner(cfg, *ckpt, co);
    auto gpu = make_cuda_runner(cfg, *ckpt, go);
    auto plain = make_cpu_runner(cfg, *ckpt, opts_for(DType::F32, false));
    ASSERT_TRUE(cpu.ok() && gpu.ok() && plain.ok()) << cpu.status().to_string() << gpu.status().to_string();
    // The same blocks hold twice fp16's tokens: decode reads half the cache bytes.
    go.kv_cache_dtype = KvCacheDtype::F16;
    auto f16 = make_cuda_runner(cfg, *ckpt, go);
    ASSERT_TRUE(f16.ok()) << f16.status().to_string();
    EXPECT_EQ((*f16)->decode_bytes(1, 1000) - (*gpu)->decode_bytes(1, 1000),
              1000 * kv_cache_bytes_per_token(cfg, KvCacheDtype::Fp8E4m3, DType::F16));
    Driver d({cpu->get(), gpu->get(), plain->get()}, 16);
    const int a = d.add(prompt(40, 8, cfg.vocab_size)), b = d.add(prompt(9, 9, cfg.vocab_size));
    double worst = 0, vs_plain = 0;
    auto check = [&](const std::vector<std::vector<float>>& out) {
      const double e = rel_err(out[1], out[0], cfg.vocab_size);
      worst = std::max(worst, e);
      vs_plain = std::max(vs_plain, rel_err(out[1], out[2], cfg.vocab_size));
      EXPECT_LE(e, 3e-2);
    };
    d.step({{a, 40}, {b, 9}}, check);
    for (int i = 0; i < 20; ++i) d.step({{a, 1}, {b, 1}}, check);
    std::printf("fp8 cache, %ld kv heads: worst relative logits error %.3g vs the CPU's fp8 cache, %.3g vs f32\n",
                static_cast<long>(kv_heads), worst, vs_plain);
  }
}

// Sized from --gpu-memory-utilization, the fp8 cache holds twice the blocks of the fp16 one in
// the same memory (each runner made after the other is gone, so both see the same free memory).
TEST(CudaRunner, Fp8KvCacheHoldsTwiceTheBlocks) {
  REQUIRE_GPU();
  const LlmConfig cfg = tiny(LlmArch::Llama, 8, 2);
  auto ckpt = random_checkpoint(cfg, DType::F32, 3);
  int64_t blocks[2] = {0, 0};
  for (int i = 0; i < 2; ++i) {
    RunnerOptions o = opts_for(DType::F16, false);
    o.num_kv_blocks = 0;
    o.gpu_memory_utilization = 0.05;
    o.kv_cache_dtype = i == 0 ? KvCacheDtype::F16 : KvCacheDtype::Fp8E4m3;
    auto r = make_cuda_runner(cfg, *ckpt, o);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    blocks[i] = (*r)->num_kv_blocks();
  }
  EXPECT_NEAR(static_cast<double>(blocks[1]) / static_cast<double>(blocks[0]), 2.0, 0.02)
      << blocks[0] << " fp16 blocks, " << blocks[1] << " fp8";
}

TEST(CudaRunner, RefusesBadSteps) {
  REQUIRE_GPU();
  const LlmConfig cfg = tiny(LlmArch::Llama, 4, 4);
  auto ckpt = random_checkpoint(cfg, DType::F32, 5);
  auto r = make_cuda_runner(cfg, *ckpt, opts_for(DType::F16, true));
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  std::vector<int32_t> table{0};
  std::vector<float> logits;
  StepBatch b;
  b.seqs = {{2, 0, &table, true}};
  b.tokens = {1, static_cast<int32_t>(cfg.vocab_size)};  // out of the vocabulary
  EXPECT_EQ((*r)->step(b, &logits).code(), StatusCode::kInvalidArgument);
  b.tokens = {1, 2};
  b.seqs[0].start_pos = 15;  // needs two blocks, the table has one
  EXPECT_EQ((*r)->step(b, &logits).code(), StatusCode::kInvalidArgument);
  table = {0, 500};  // past the cache's 128 blocks
  EXPECT_EQ((*r)->step(b, &logits).code(), StatusCode::kInvalidArgument);
  table = {0, 1};
  EXPECT_TRUE((*r)->step(b, &logits).ok());
  EXPECT_EQ(logits.size(), static_cast<size_t>(cfg.vocab_size));
}

// hidden_states (decoder embeddings): the final norm's rows of the sampled tokens, f32 on the GPU
// against the CPU runner, after a two-sequence prefill and after a decode step (graphs on: the
// decode bucket pads the batch, the real rows come first).
TEST(CudaRunner, HiddenStatesMatchCpu) {
  REQUIRE_GPU();
  const LlmConfig cfg = tiny(LlmArch::Llama, 4, 2);
  Pair p = make_pair_for(cfg, DType::F32);
  ASSERT_TRUE(p.cpu && p.gpu);
  const auto a = prompt(7, 8, cfg.vocab_size), c = prompt(12, 9, cfg.vocab_size);
  std::vector<int32_t> ta{0}, tc{1};
  StepBatch b;
  b.seqs = {{7, 0, &ta, true}, {12, 0, &tc, true}};
  b.tokens = a;
  b.tokens.insert(b.tokens.end(), c.begin(), c.end());
  for (int round = 0; round < 2; ++round) {
    std::vector<float> want, got;
    ASSERT_TRUE(p.cpu->hidden_states(b, &want).ok());
    ASSERT_TRUE(p.gpu->hidden_states(b, &got).ok());
    ASSERT_EQ(want.size(), static_cast<size_t>(2 * cfg.hidden_size));
    ASSERT_EQ(got.size(), want.size());
    EXPECT_LE(rel_err(got, want, cfg.hidden_size), 1e-4) << "round " << round;
    // Then one decode token each.
    b.seqs = {{1, 7, &ta, true}, {1, 12, &tc, true}};
    b.tokens = {3, 4};
  }
}

}  // namespace
}  // namespace gpuopt::llm
