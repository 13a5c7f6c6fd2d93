// paged_attention against attention_ref.h's double-precision reference: decode at block edges
// (contexts 1..8192) split and unsplit, GQA 1/4/8, head dims 64/128, block sizes 8..64, graph
// padding (sequences with no queries), sliding windows, and prefill / chunked prefill with query
// lengths 1..300 mixed in one batch; an FP8 (e4m3) cache with its scales.
#include "attention_ref.h"

namespace gpuopt::llm::test {
namespace {

const DType kTypes[] = {DType::F32, DType::F16, DType::BF16};

void run_and_check(AttnBatch& b, bool split, const std::string& what) {
  cudaMemset(b.dout.get(), 0xA5, b.dout.bytes());  // stale bytes must all be overwritten
  cuda::paged_attention(b.args(split), nullptr);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << what;
  const size_t es = dtype_size(b.dt);
  auto got = decode(b.dout.download<uint8_t>(static_cast<size_t>(b.T) * b.H * b.D * es), b.dt);
  EXPECT_EQ(0u, count_bad(got, b.reference(), attention_tol(b.dt), what.c_str())) << what;
  EXPECT_TRUE(b.dout.guards_ok()) << what;
  EXPECT_TRUE(b.dws.guards_ok()) << what;
}

TEST(LlmAttention, DecodeAtBlockEdgesSplitAndUnsplit) {
  LLM_REQUIRE_DEVICE();
  std::mt19937 rng(10);
  for (DType dt : kTypes)
    for (int D : {64, 128})
      for (int G : {1, 4, 8}) {
        AttnBatch b;
        b.KV = 2;
        b.H = 2 * G;
        b.D = D;
        b.bs = 16;
        b.dt = dt;
        for (int c : {1, 15, 16, 17, 255, 1000, 8192}) b.seqs.push_back({1, c});
        b.padded_seqs = 2;
        b.build(rng);
        for (bool split : {false, true}) {
          const std::string what = std::string(dt_name(dt)) + " D" + std::to_string(D) + " G" + std::to_string(G) +
                                   (split ? " split" : " unsplit");
          run_and_check(b, split, what);
        }
      }
}

TEST(LlmAttention, DecodeBlockSizesAndOddGroups) {
  LLM_REQUIRE_DEVICE();
  std::mt19937 rng(11);
  struct Case {
    int bs, H, KV;
  };
  for (Case c : {Case{8, 8, 8}, Case{32, 12, 4}, Case{64, 28, 4}, Case{16, 16, 1}})
    for (DType dt : {DType::F16, DType::BF16}) {
      AttnBatch b;
      b.H = c.H;
      b.KV = c.KV;
      b.D = 128;
      b.bs = c.bs;
      b.dt = dt;
      for (int ctx : {3, 64, 65, 700, 3000}) b.seqs.push_back({1, ctx});
      b.build(rng);
      run_and_check(b, true,
                    std::string(dt_name(dt)) + " bs" + std::to_string(c.bs) + " H" + std::to_string(c.H) + "/" +
                        std::to_string(c.KV));
    }
}

TEST(LlmAttention, SlidingWindow) {
  LLM_REQUIRE_DEVICE();
  std::mt19937 rng(12);
  for (DType dt : kTypes) {
    AttnBatch dec;
    dec.H = 8;
    dec.KV = 2;
    dec.D = 128;
    dec.bs = 16;
    dec.dt = dt;
    dec.window = 100;
    for (int ctx : {50, 100, 101, 2000}) dec.seqs.push_back({1, ctx});
    dec.build(rng);
    run_and_check(dec, true, std::string("window decode ") + dt_name(dt));
    AttnBatch pre;
    pre.H = 8;
    pre.KV = 2;
    pre.D = 64;
    pre.bs = 16;
    pre.dt = dt;
    pre.window = 37;
    pre.seqs = {{90, 90}, {1, 200}, {64, 300}};
    pre.build(rng);
    run_and_check(pre, false, std::string("window prefill ") + dt_name(dt));
  }
}

TEST(LlmAttention, PrefillAndChunkedPrefillMixed) {
  LLM_REQUIRE_DEVICE();
  std::mt19937 rng(13);
  for (DType dt : kTypes)
    for (int D : {64, 128})
      for (int G : {1, 4, 8}) {
        AttnBatch b;
        b.KV = 2;
        b.H = 2 * G;
        b.D = D;
        b.bs = 16;
        b.dt = dt;
        // Fresh prompts, chunks of a longer prompt (context beyond the queries) and decode rows.
        b.seqs = {{1, 1}, {300, 300}, {7, 7}, {37, 1000}, {1, 513}, {128, 200}, {65, 65}, {16, 17}};
        b.padded_seqs = 1;
        b.build(rng);
        run_and_check(b, false,
                      std::string("prefill ") + dt_name(dt) + " D" + std::to_string(D) + " G" + std::to_string(G));
      }
}

}  // namespace
}  // namespace gpuopt::llm::test

namespace gpuopt::llm::test {
namespace {

// Captured once, replayed with new context lengths in device memory: the launch must read every
// per-step size from there (CUDA-graph safety), split path included.
TEST(LlmAttention, GraphReplayReadsSizesFromDevice) {
  LLM_REQUIRE_DEVICE();
  std::mt19937 rng(14);
  for (DType dt : {DType::F16, DType::F32}) {
    AttnBatch b;
    b.H = 32;
    b.KV = 8;
    b.D = 128;
    b.bs = 16;
    b.dt = dt;
    b.seqs = {{1, 4000}, {1, 33}, {1, 2500}};
    b.padded_seqs = 1;
    b.build(rng);
    cudaStream_t st;
    CUDA_OK(cudaStreamCreate(&st));
    cuda::paged_attention(b.args(true), st);  // first launch outside capture (kernel attributes)
    CUDA_OK(cudaStreamSynchronize(st));
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    CUDA_OK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
    cuda::paged_attention(b.args(true), st);
    CUDA_OK(cudaStreamEndCapture(st, &graph));
    CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
    for (auto ctxs : {std::vector<int>{4000, 33, 2500}, std::vector<int>{17, 3999, 1}}) {
      for (size_t s = 0; s < ctxs.size(); ++s) b.seqs[s].ctx = b.ctx[s] = ctxs[s];
      b.dctx.upload(b.ctx);
      CUDA_OK(cudaGraphLaunch(exec, st));
      CUDA_OK(cudaStreamSynchronize(st));
      const size_t es = dtype_size(dt);
      auto got = decode(b.dout.download<uint8_t>(static_cast<size_t>(b.T) * b.H * b.D * es), dt);
      EXPECT_EQ(0u, count_bad(got, b.reference(), attention_tol(dt), "graph replay")) << dt_name(dt);
    }
    EXPECT_TRUE(b.dout.guards_ok() && b.dws.guards_ok());
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
    cudaStreamDestroy(st);
  }
}

}  // namespace
}  // namespace gpuopt::llm::test

namespace gpuopt::llm::test {
namespace {

// Grouped-query decode runs on tensor cores in f16/bf16; the CUDA-core kernel stays selectable
// (GPUOPT_LLM_ATTN_CUDA_CORES=1) and must agree with the reference too.
TEST(LlmAttention, DecodeGqaCudaCorePath) {
  LLM_REQUIRE_DEVICE();
  std::mt19937 rng(15);
  setenv("GPUOPT_LLM_ATTN_CUDA_CORES", "1", 1);
  for (DType dt : {DType::F16, DType::BF16})
    for (int G : {4, 8}) {
      AttnBatch b;
      b.KV = 2;
      b.H = 2 * G;
      b.D = 128;
      b.bs = 16;
      b.dt = dt;
      for (int c : {1, 17, 1000, 5000}) b.seqs.push_back({1, c});
      b.build(rng);
      run_and_check(b, true, std::string("cuda cores ") + dt_name(dt) + " G" + std::to_string(G));
    }
  unsetenv("GPUOPT_LLM_ATTN_CUDA_CORES");
}

}  // namespace
}  // namespace gpuopt::llm::test

namespace gpuopt::llm::test {
namespace {

// An FP8 (e4m3) cache with per-layer scales: decode (split and unsplit, MHA and GQA) and prefill
// mixed with chunks and decode rows, against the reference on the decoded values; a k_scale or
// v_scale the kernel failed to apply would be an error of order one.
TEST(LlmAttention, Fp8CacheDecodeAndPrefill) {
  LLM_REQUIRE_DEVICE();
  std::mt19937 rng(16);
  for (DType dt : {DType::F16, DType::BF16})
    for (int D : {64, 128})
      for (int G : {1, 4}) {
        const std::string tag = std::string(dt_name(dt)) + " D" + std::to_string(D) + " G" + std::to_string(G);
        auto shape = [&](AttnBatch& b) {
          b.KV = 2;
          b.H = 2 * G;
          b.D = D;
          b.bs = 16;
          b.dt = dt;
          b.fp8 = true;
          b.k_scale = 0.25f;  // codes of K / 0.25: up to 4; of V / 4: down among the subnormals
          b.v_scale = 4.0f;
        };
        AttnBatch dec;
        shape(dec);
        for (int c : {1, 17, 1000, 8192}) dec.seqs.push_back({1, c});
        dec.padded_seqs = 1;
        dec.build(rng);
        for (bool split : {false, true}) run_and_check(dec, split, "fp8 cache decode " + tag + (split ? " split" : ""));
        AttnBatch pre;
        shape(pre);
        pre.seqs = {{1, 1}, {300, 300}, {37, 1000}, {16, 17}};
        pre.window = D == 64 ? 100 : 0;
        pre.build(rng);
        run_and_check(pre, false, "fp8 cache prefill " + tag);
      }
}

}  // namespace
}  // namespace gpuopt::llm::test
