// The decode GEMV kernel (llm_kernels.h gemv) against a double-precision CPU product of the same
// rounded inputs, f16 and bf16, T 1..8, with and without bias, odd and 7B-sized shapes; and, with
// LLM_KERNEL_BENCH=1, its bandwidth beside cuBLASLt's on Llama-2-7B's decode products (weights
// rotated through copies larger than L2, so every launch reads HBM).
#include <cstdio>
#include <cstdlib>
#include <string>

#include "llm/cuda/gemm.h"
#include "llm/kernels/llm_kernels.h"
#include "llm_cuda_test_util.h"

namespace gpuopt::llm::test {
namespace {

namespace k = gpuopt::llm::cuda;

TEST(LlmKernels, GemvMatchesTheCpuProduct) {
  LLM_REQUIRE_DEVICE();
  std::mt19937 rng(7);
  struct Case {
    int64_t N, K;
  };
  for (DType dt : {DType::F16, DType::BF16}) {
    for (Case c : {Case{37, 8}, Case{129, 4104}, Case{4096, 4096}, Case{301, 11008}}) {
      for (int64_t T : {1, 2, 3, 5, 8}) {
        for (bool with_bias : {false, true}) {
          if (c.N == 4096 && T > 2 && with_bias) continue;  // the big shape once per T is enough
          const size_t es = dtype_size(dt);
          auto x = round_to(random_vec(T * c.K, rng), dt);
          auto w = round_to(random_vec(c.N * c.K, rng), dt);
          auto b = round_to(random_vec(c.N, rng), dt);
          DevBuf dx(x.size() * es), dw(w.size() * es), db(b.size() * es), dy(T * c.N * es);
          dx.upload(encode(x, dt));
          dw.upload(encode(w, dt));
          db.upload(encode(b, dt));
          ASSERT_TRUE(k::gemv_supported(dx.get(), dw.get(), dy.get(), T, c.N, c.K, dt));
          k::gemv(dx.get(), dw.get(), with_bias ? db.get() : nullptr, dy.get(), T, c.N, c.K, dt, nullptr);
          CUDA_OK(cudaDeviceSynchronize());
          std::vector<double> ref(T * c.N);
          for (int64_t t = 0; t < T; ++t)
            for (int64_t n = 0; n < c.N; ++n) {
              double s = with_bias ? b[n] : 0.0;
              for (int64_t kk = 0; kk < c.K; ++kk) s += static_cast<double>(x[t * c.K + kk]) * w[n * c.K + kk];
              ref[t * c.N + n] = s;
            }
          auto raw = dy.download<uint8_t>(T * c.N * es);
          // Sums of K products of values in [-1, 1] reach |y| ~ sqrt(K)/2; the f32 accumulation's
          // own error grows with K, so abs scales with sqrt(K) (relative 1e-3 covers the output's
          // rounding, f16 half an ulp = 4.9e-4).
          Tol tol = tol_for(dt);
          tol.abs *= std::sqrt(static_cast<double>(c.K) / 64.0);
          EXPECT_EQ(0u, count_bad(decode(raw, dt), ref, tol, "gemv"))
              << dt_name(dt) << " T=" << T << " N=" << c.N << " K=" << c.K << " bias=" << with_bias;
          EXPECT_TRUE(dy.guards_ok());
          // Deterministic: the same bits again.
          k::gemv(dx.get(), dw.get(), with_bias ? db.get() : nullptr, dy.get(), T, c.N, c.K, dt, nullptr);
          EXPECT_EQ(raw, dy.download<uint8_t>(T * c.N * es));
        }
      }
    }
  }
}

TEST(LlmKernels, GemvRefusesWhatItCannotTake) {
  DevBuf dx(64 * 2 + 16), dw(64 * 64 * 2), dy(64 * 2 * 9);
  EXPECT_FALSE(k::gemv_supported(dx.get(), dw.get(), dy.get(), 9, 64, 64, DType::F16));  // T > 8
  EXPECT_FALSE(k::gemv_supported(dx.get(), dw.get(), dy.get(), 1, 64, 60, DType::F16));  // K % 8
  EXPECT_FALSE(k::gemv_supported(dx.get(), dw.get(), dy.get(), 1, 64, 64, DType::F32));  // f32
  EXPECT_FALSE(k::gemv_supported(static_cast<char*>(dx.get()) + 2, dw.get(), dy.get(), 1, 64, 64, DType::F16));
}

TEST(LlmKernelsBench, GemvBandwidthBesideCublasLt) {
  const char* e = std::getenv("LLM_KERNEL_BENCH");
  if (!e || std::string(e) != "1") GTEST_SKIP() << "timing mode: LLM_KERNEL_BENCH=1";
  LLM_REQUIRE_DEVICE();
  struct Shape {
    const char* name;
    int64_t N, K;
  };
  const Shape shapes[] = {{"qkv", 12288, 4096},
                          {"o_proj", 4096, 4096},
                          {"gate_up", 22016, 4096},
                          {"down", 4096, 11008},
                          {"lm_head", 32000, 4096}};
  const DType dt = DType::F16;
  k::LtGemm lt;
  ASSERT_TRUE(lt.init(32 << 20).ok());
  for (const Shape& s : shapes) {
    const size_t wbytes = s.N * s.K * 2;
    const int copies = static_cast<int>(std::max<size_t>(2, (size_t{400} << 20) / wbytes));  // >> 50 MB L2
    DevBuf dw(wbytes * copies), dx(8 * s.K * 2), dy(8 * s.N * 2);
    cudaMemset(dw.get(), 0x11, wbytes * copies);
    cudaMemset(dx.get(), 0x22, 8 * s.K * 2);
    auto wp = [&](int i) { return static_cast<char*>(dw.get()) + (i % copies) * wbytes; };
    for (int64_t T : {1, 4, 8}) {
      const int reps = 200;
      auto time = [&](auto&& launch) {
        for (int i = 0; i < 5; ++i) launch(i);
        cudaEvent_t a, b;
        cudaEventCreate(&a);
        cudaEventCreate(&b);
        cudaEventRecord(a);
        for (int i = 0; i < reps; ++i) launch(i);
        cudaEventRecord(b);
        cudaEventSynchronize(b);
        float ms = 0;
        cudaEventElapsedTime(&ms, a, b);
        return ms / reps;
      };
      const float g = time([&](int i) { k::gemv(dx.get(), wp(i), nullptr, dy.get(), T, s.N, s.K, dt, nullptr); });
      // cuBLASLt alone: a fresh LtGemm per shape would race in the GEMV too, so time its heuristic pick.
      k::LtGemm plain;
      ASSERT_TRUE(plain.init(32 << 20).ok());
      const float c = time([&](int i) {
        ASSERT_TRUE(plain.linear(dx.get(), wp(i), nullptr, dy.get(), T, s.N, s.K, dt, dt, nullptr, false).ok());
      });
      const float r = time([&](int i) {
        ASSERT_TRUE(lt.linear(dx.get(), wp(i), nullptr, dy.get(), T, s.N, s.K, dt, dt, nullptr, true).ok());
      });
      std::printf("gemv %-8s T=%ld  gemv %7.1f us %6.0f GB/s | cublasLt %7.1f us %6.0f GB/s | raced %7.1f us\n", s.name,
                  static_cast<long>(T), g * 1e3, wbytes / (g * 1e-3) / 1e9, c * 1e3, wbytes / (c * 1e-3) / 1e9,
                  r * 1e3);
    }
    CUDA_OK(cudaDeviceSynchronize());
  }
}

}  // namespace
}  // namespace gpuopt::llm::test
