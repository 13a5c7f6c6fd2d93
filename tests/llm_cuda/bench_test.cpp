// Timing mode (LLM_KERNEL_BENCH=1; skipped otherwise): decode attention bandwidth for the 7B
// shape (32 heads, 32 kv heads, head_dim 128) and Llama-3-8B's (32/8), batch 1 and 64, contexts
// 1k and 4k, bf16, block 16; and prefill attention time for a 2048-token prompt.
#include <cstdio>
#include <cstdlib>

#include "llm/kernels/llm_kernels.h"
#include "llm_cuda_test_util.h"

namespace gpuopt::llm::test {
namespace {

bool bench_on() {
  const char* e = std::getenv("LLM_KERNEL_BENCH");
  return e && std::string(e) == "1";
}

struct Shape {
  const char* name;
  int H, KV, D;
};

// Median-free mean over `reps` launches after warm-up; `step(i)` launches repetition i.
template <class F>
float time_ms(int reps, F&& step) {
  for (int i = 0; i < 3; ++i) step(i);
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  cudaEventRecord(a);
  for (int i = 0; i < reps; ++i) step(i);
  cudaEventRecord(b);
  cudaEventSynchronize(b);
  float ms = 0;
  cudaEventElapsedTime(&ms, a, b);
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return ms / reps;
}

TEST(LlmKernelsBench, DecodeAttentionBandwidth) {
  LLM_REQUIRE_DEVICE();
  if (!bench_on()) GTEST_SKIP() << "set LLM_KERNEL_BENCH=1";
  const int bs = 16;
  std::printf("%-10s %5s %6s %10s %10s %8s\n", "shape", "batch", "ctx", "us", "GB/s", "split");
  for (Shape sh : {Shape{"7B", 32, 32, 128}, Shape{"L3-8B", 32, 8, 128}})
    for (int batch : {1, 64})
      for (int ctx : {1024, 4096})
        for (bool split : {true, false}) {
          const int blocks_per_seq = ctx / bs;
          const size_t kv_bytes = static_cast<size_t>(batch) * ctx * sh.KV * sh.D * 2 * 2;  // K+V bf16
          // Enough copies that consecutive launches read different memory (L2 is 60 MB).
          const int copies = static_cast<int>(std::min<size_t>(16, std::max<size_t>(1, (size_t{1} << 30) / kv_bytes)));
          const int64_t nblocks = static_cast<int64_t>(copies) * batch * blocks_per_seq;
          DevBuf k(nblocks * bs * sh.KV * sh.D * 2), v(nblocks * bs * sh.KV * sh.D * 2);
          cudaMemset(k.get(), 0x3c, k.bytes());  // bf16 ~0.01: finite values
          cudaMemset(v.get(), 0x3c, v.bytes());
          std::vector<int32_t> tables(static_cast<size_t>(copies) * batch * blocks_per_seq);
          for (size_t i = 0; i < tables.size(); ++i) tables[i] = static_cast<int32_t>(i);
          std::vector<int32_t> qs(batch + 1), cl(batch, ctx);
          for (int i = 0; i <= batch; ++i) qs[i] = i;
          const int qstride = (sh.H + 2 * sh.KV) * sh.D;
          DevBuf q(static_cast<size_t>(batch) * qstride * 2), out(static_cast<size_t>(batch) * sh.H * sh.D * 2),
              dtab(tables.size() * 4), dqs(qs.size() * 4), dcl(cl.size() * 4),
              ws(std::max<size_t>(16, cuda::paged_attention_workspace_bytes(batch, sh.H, sh.D, ctx)));
          cudaMemset(q.get(), 0x3c, q.bytes());
          dtab.upload(tables);
          dqs.upload(qs);
          dcl.upload(cl);
          cuda::PagedAttentionArgs a;
          a.q = q.get();
          a.q_stride = qstride;
          a.k_cache = k.get();
          a.v_cache = v.get();
          a.out = out.get();
          a.query_start = dqs.as<int32_t>();
          a.context_lens = dcl.as<int32_t>();
          a.num_seqs = batch;
          a.max_blocks_per_seq = blocks_per_seq;
          a.max_query_len = 1;
          a.max_context = ctx;
          a.num_heads = sh.H;
          a.num_kv_heads = sh.KV;
          a.head_dim = sh.D;
          a.block_size = bs;
          a.scale = 0.088f;
          a.dt = a.kv_dt = DType::BF16;
          a.workspace = split ? ws.get() : nullptr;
          const float ms = time_ms(50, [&](int i) {
            a.block_tables = dtab.as<int32_t>() + static_cast<size_t>(i % copies) * batch * blocks_per_seq;
            cuda::paged_attention(a, nullptr);
          });
          ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
          std::printf("%-10s %5d %6d %10.1f %10.0f %8s\n", sh.name, batch, ctx, ms * 1e3, kv_bytes / (ms * 1e-3) / 1e9,
                      split ? "yes" : "no");
        }
}

TEST(LlmKernelsBench, PrefillAttention2048) {
  LLM_REQUIRE_DEVICE();
  if (!bench_on()) GTEST_SKIP() << "set LLM_KERNEL_BENCH=1";
  const int bs = 16, L = 2048;
  for (Shape sh : {Shape{"7B", 32, 32, 128}, Shape{"L3-8B", 32, 8, 128}})
    for (DType dt : {DType::BF16, DType::F16}) {
      const int nb = L / bs;
      DevBuf k(static_cast<size_t>(nb) * bs * sh.KV * sh.D * 2), v(k.bytes());
      std::mt19937 rng(5);
      auto kv = encode(random_vec(k.bytes() / 2, rng), dt);
      k.upload(kv);
      v.upload(kv);
      const int qstride = (sh.H + 2 * sh.KV) * sh.D;
      DevBuf q(static_cast<size_t>(L) * qstride * 2), out(static_cast<size_t>(L) * sh.H * sh.D * 2);
      q.upload(encode(random_vec(q.bytes() / 2, rng), dt));
      std::vector<int32_t> tab(nb), qs = {0, L}, cl = {L};
      for (int i = 0; i < nb; ++i) tab[i] = (i * 7) % nb;
      DevBuf dtab(nb * 4), dqs(8), dcl(4);
      dtab.upload(tab);
      dqs.upload(qs);
      dcl.upload(cl);
      cuda::PagedAttentionArgs a;
      a.q = q.get();
      a.q_stride = qstride;
      a.k_cache = k.get();
      a.v_cache = v.get();
      a.out = out.get();
      a.query_start = dqs.as<int32_t>();
      a.context_lens = dcl.as<int32_t>();
      a.block_tables = dtab.as<int32_t>();
      a.num_seqs = 1;
      a.max_blocks_per_seq = nb;
      a.max_query_len = L;
      a.max_context = L;
      a.num_heads = sh.H;
      a.num_kv_heads = sh.KV;
      a.head_dim = sh.D;
      a.block_size = bs;
      a.scale = 0.088f;
      a.dt = a.kv_dt = dt;
      const float ms = time_ms(20, [&](int) { cuda::paged_attention(a, nullptr); });
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      const double flops = 4.0 * sh.D * sh.H * (static_cast<double>(L) * (L + 1) / 2);
      std::printf("prefill %-6s %s L=%d: %.3f ms per layer, %.1f TFLOP/s (causal)\n", sh.name,
                  dt == DType::BF16 ? "bf16" : "f16", L, ms, flops / (ms * 1e-3) / 1e12);
    }
}

TEST(LlmKernelsBench, SamplingRows) {
  LLM_REQUIRE_DEVICE();
  if (!bench_on()) GTEST_SKIP() << "set LLM_KERNEL_BENCH=1";
  const int64_t vocab = 128256;
  for (int64_t n : {1, 64}) {
    std::mt19937 rng(6);
    DevBuf x(n * vocab * 4), tok(n * 4), lp(n * 4), prm(n * sizeof(cuda::SampleRowParams));
    x.upload(random_vec(n * vocab, rng, -10, 10));
    std::vector<cuda::SampleRowParams> ps(n);
    for (auto& p : ps) {
      p.temperature = 0.8f;
      p.top_k = 50;
      p.top_p = 0.9f;
      p.seed = rng();
    }
    prm.upload(ps.data(), ps.size() * sizeof(cuda::SampleRowParams));
    const float greedy = time_ms(50, [&](int) {
      cuda::argmax_rows(x.as<float>(), n, vocab, vocab, tok.as<int32_t>(), lp.as<float>(), nullptr);
    });
    const float sample = time_ms(50, [&](int) {
      cuda::sample_rows(x.as<float>(), n, vocab, vocab, prm.as<cuda::SampleRowParams>(), nullptr, nullptr,
                        tok.as<int32_t>(), lp.as<float>(), nullptr);
    });
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    std::printf(
        "sampling vocab %lld, %lld rows: argmax_rows %.1f us, sample_rows (T 0.8, top-k 50, top-p 0.9) %.1f us\n",
        static_cast<long long>(vocab), static_cast<long long>(n), greedy * 1e3, sample * 1e3);
  }
}

}  // namespace
}  // namespace gpuopt::llm::test
