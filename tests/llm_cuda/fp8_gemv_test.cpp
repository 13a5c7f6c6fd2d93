// The FP8 W8A16 GEMV (llm_kernels.h gemv_fp8) against dequantize-then-multiply: e4m3 weights of
// every finite code (subnormals included) times per-channel or per-tensor f32 scales, f16/bf16
// activations, M = 1..16, Llama-2-7B's shapes (4096x4096, 11008x4096, 4096x11008); and
// quant_gemm.h fp8_linear's choice between it (T <= kFp8GemvMaxTokens) and the W8A8 GEMM. The
// host reference decodes the codes with quantized.h's e4m3 formula and sums in double.
#include <cstdlib>
#include <string>

#include "llm/cuda/gemm.h"
#include "llm/cuda/quant_gemm.h"
#include "llm/kernels/llm_kernels.h"
#include "llm/quantized.h"
#include "llm_cuda_test_util.h"
#include "quant_test_util.h"

namespace gpuopt::llm::test {
namespace {

namespace k = gpuopt::llm::cuda;

struct HostFp8 {
  int64_t N = 0, K = 0;
  bool per_channel = true;
  std::vector<uint8_t> w;    // e4m3 [N, K]
  std::vector<float> scale;  // [N] or [1]
};

// Uniformly random finite codes (0x7f and 0xff are NaN in e4m3fn), scales that keep y ~ O(1) for
// x in [-1, 1] (the codes' RMS is about 44).
HostFp8 make_fp8(int64_t N, int64_t K, bool per_channel, std::mt19937& rng) {
  HostFp8 h;
  h.N = N;
  h.K = K;
  h.per_channel = per_channel;
  h.w.resize(static_cast<size_t>(N * K));
  std::uniform_int_distribution<int> code(0, 255);
  for (auto& b : h.w) {
    int c = code(rng);
    while ((c & 0x7f) == 0x7f) c = code(rng);
    b = static_cast<uint8_t>(c);
  }
  std::uniform_real_distribution<float> sd(0.5f, 1.5f);
  const float base = 1.0f / (44.0f * std::sqrt(static_cast<float>(K)));
  h.scale.resize(per_channel ? static_cast<size_t>(N) : 1);
  for (auto& s : h.scale) s = base * sd(rng);
  return h;
}

// y[t, n] for the checked columns: x (as rounded to dt) times the decoded weights, in double.
std::vector<double> reference(const std::vector<float>& x, const HostFp8& h, int64_t T,
                              const std::vector<int64_t>& cols) {
  std::vector<float> row(static_cast<size_t>(h.K));
  std::vector<double> by_col(static_cast<size_t>(T) * cols.size());
  for (size_t c = 0; c < cols.size(); ++c) {
    const int64_t n = cols[c];
    for (int64_t kk = 0; kk < h.K; ++kk)
      row[static_cast<size_t>(kk)] = fp8_e4m3_to_float(h.w[static_cast<size_t>(n * h.K + kk)]);
    const double s = h.scale[h.per_channel ? static_cast<size_t>(n) : 0];
    for (int64_t t = 0; t < T; ++t) {
      double acc = 0;
      for (int64_t kk = 0; kk < h.K; ++kk)
        acc += static_cast<double>(x[static_cast<size_t>(t * h.K + kk)]) * row[static_cast<size_t>(kk)];
      by_col[static_cast<size_t>(t) * cols.size() + c] = acc * s;
    }
  }
  return by_col;
}

struct DevFp8 {
  DevBuf w, s;
  explicit DevFp8(const HostFp8& h) : w(h.w.size()), s(h.scale.size() * 4) {
    w.upload(h.w);
    s.upload(h.scale);
  }
};

// Every shape with the split-K workspace, the small ones also without it (one slice); twice
// each: bit-identical.
TEST(LlmQuantKernels, Fp8GemvMatchesDequantizedProduct) {
  LLM_REQUIRE_DEVICE();
  std::mt19937 rng(5);
  SplitWs split;
  const Shape shapes[] = {{96, 256}, {4096, 4096}, {11008, 4096}, {4096, 11008}};
  for (const Shape& s : shapes)
    for (bool per_channel : {true, false}) {
      const HostFp8 h = make_fp8(s.N, s.K, per_channel, rng);
      const DevFp8 d(h);
      const auto cols = columns(s.N);
      for (DType dt : {DType::F16, DType::BF16})
        for (int64_t T = 1; T <= k::kQuantGemvMaxTokens; ++T) {
          // The large shapes: the tokens where the kernel's rows per CTA and passes change.
          if (s.N * s.K > 4096 * 4096 && T != 1 && T != 2 && T != 3 && T != 8 && T != 9 && T != 16) continue;
          const auto x = round_to(random_vec(static_cast<size_t>(T * s.K), rng), dt);
          const auto b = round_to(random_vec(static_cast<size_t>(s.N), rng), dt);
          const auto ref0 = reference(x, h, T, cols);
          for (int variant = 0; variant < 3; ++variant) {
            const bool with_bias = variant == 1, with_ws = variant != 2;
            if (with_bias && T > 2) continue;
            if (!with_ws && s.N > 4096) continue;
            const k::GemvSplitScratch* ws = with_ws ? &split.ws : nullptr;
            DevBuf dx(x.size() * 2), dy(static_cast<size_t>(T * s.N) * 2), db(b.size() * 2);
            dx.upload(encode(x, dt));
            db.upload(encode(b, dt));
            ASSERT_TRUE(k::gemv_fp8_supported(dx.get(), d.w.get(), T, s.N, s.K, dt));
            k::gemv_fp8(dx.get(), d.w.get(), d.s.as<float>(), per_channel, with_bias ? db.get() : nullptr, dy.get(), T,
                        s.N, s.K, dt, nullptr, ws);
            CUDA_OK(cudaDeviceSynchronize());
            auto ref = ref0;
            if (with_bias)
              for (int64_t t = 0; t < T; ++t)
                for (size_t c = 0; c < cols.size(); ++c)
                  ref[static_cast<size_t>(t) * cols.size() + c] += b[static_cast<size_t>(cols[c])];
            const auto raw = dy.download<uint8_t>(static_cast<size_t>(T * s.N) * 2);
            EXPECT_EQ(0u, count_bad(pick(decode(raw, dt), T, s.N, cols), ref, tol_k(dt, s.K), "gemv_fp8"))
                << s.N << "x" << s.K << (per_channel ? " per-channel" : " per-tensor") << " T " << T << " "
                << dt_name(dt) << (with_bias ? " bias" : "") << (with_ws ? " split-K" : " one slice");
            EXPECT_TRUE(dy.guards_ok());
            k::gemv_fp8(dx.get(), d.w.get(), d.s.as<float>(), per_channel, with_bias ? db.get() : nullptr, dy.get(), T,
                        s.N, s.K, dt, nullptr, ws);
            EXPECT_EQ(raw, dy.download<uint8_t>(raw.size())) << "not deterministic";
          }
        }
    }
}

// fp8_linear: up to kFp8GemvMaxTokens tokens exactly the W8A16 GEMV's bytes; above, the W8A8
// product (activations quantized per token, checked against the host's e4m3 of them).
TEST(LlmQuantKernels, Fp8LinearIsW8A16ForDecodeAndW8A8Above) {
  LLM_REQUIRE_DEVICE();
  std::mt19937 rng(6);
  SplitWs split;
  k::Fp8Gemm f8;
  ASSERT_TRUE(f8.init(32 << 20).ok());
  const Shape s{4096, 4096};
  const DType dt = DType::F16;
  const HostFp8 h = make_fp8(s.N, s.K, true, rng);
  const DevFp8 d(h);
  const auto cols = columns(s.N);
  for (int64_t T : {int64_t{1}, k::kFp8GemvMaxTokens, k::kFp8GemvMaxTokens + 1, int64_t{32}}) {
    const auto x = round_to(random_vec(static_cast<size_t>(T * s.K), rng), dt);
    DevBuf dx(x.size() * 2), dy(static_cast<size_t>(T * s.N) * 2), dg(static_cast<size_t>(T * s.N) * 2);
    DevBuf dxq(x.size()), drs(static_cast<size_t>(T) * 4), dacc(static_cast<size_t>(T * s.N) * 4);
    dx.upload(encode(x, dt));
    k::Fp8LinearArgs a;
    a.x = dx.get();
    a.w = d.w.get();
    a.w_scale = d.s.as<float>();
    a.y = dy.get();
    a.T = T;
    a.N = s.N;
    a.K = s.K;
    a.dt = dt;
    a.xq = dxq.get();
    a.row_scale = drs.as<float>();
    a.acc = dacc.as<float>();
    const Status st = k::fp8_linear(f8, a, &split.ws, nullptr);
    ASSERT_TRUE(st.ok()) << st.to_string();
    CUDA_OK(cudaDeviceSynchronize());
    const auto got = dy.download<uint8_t>(static_cast<size_t>(T * s.N) * 2);
    if (T <= k::kFp8GemvMaxTokens) {
      k::gemv_fp8(dx.get(), d.w.get(), d.s.as<float>(), true, nullptr, dg.get(), T, s.N, s.K, dt, nullptr, &split.ws);
      CUDA_OK(cudaDeviceSynchronize());
      EXPECT_EQ(got, dg.download<uint8_t>(got.size())) << "T " << T << ": not the W8A16 GEMV";
      continue;
    }
    // W8A8: the reference multiplies the e4m3 activations the kernel must have produced.
    std::vector<float> xd(x.size());
    for (int64_t t = 0; t < T; ++t) {
      float amax = 0;
      for (int64_t kk = 0; kk < s.K; ++kk) amax = std::max(amax, std::fabs(x[static_cast<size_t>(t * s.K + kk)]));
      const float sc = std::max(amax, 1e-12f) / 448.0f;
      for (int64_t kk = 0; kk < s.K; ++kk) {
        const size_t i = static_cast<size_t>(t * s.K + kk);
        xd[i] = fp8_e4m3_to_float(float_to_fp8_e4m3(x[i] * (1.0f / sc))) * sc;
      }
    }
    EXPECT_EQ(0u,
              count_bad(pick(decode(got, dt), T, s.N, cols), reference(xd, h, T, cols), tol_k(dt, s.K), "fp8_linear"))
        << "T " << T;
  }
}

// With LLM_KERNEL_BENCH=1: the W8A16 GEMV beside the W8A8 cuBLASLt path and cuBLASLt on fp16
// weights, on Llama-2-7B's decode products, weights rotated through copies larger than L2.
TEST(LlmQuantKernelsBench, Fp8GemvBesideFp16) {
  const char* e = std::getenv("LLM_KERNEL_BENCH");
  if (!e || std::string(e) != "1") GTEST_SKIP() << "timing mode: LLM_KERNEL_BENCH=1";
  LLM_REQUIRE_DEVICE();
  struct Named {
    const char* name;
    int64_t N, K;
  };
  const Named shapes[] = {
      {"qkv", 12288, 4096}, {"o_proj", 4096, 4096}, {"gate_up", 22016, 4096}, {"down", 4096, 11008}};
  k::LtGemm lt;
  ASSERT_TRUE(lt.init(32 << 20).ok());
  k::Fp8Gemm f8;
  ASSERT_TRUE(f8.init(32 << 20).ok());
  SplitWs split;
  for (const Named& s : shapes) {
    const size_t fbytes = static_cast<size_t>(s.N * s.K) * 2, qbytes = fbytes / 2;
    const int fcopies = static_cast<int>(std::max<size_t>(2, (size_t{400} << 20) / fbytes));
    const int qcopies = static_cast<int>(std::max<size_t>(2, (size_t{400} << 20) / qbytes));
    DevBuf dwf(fbytes * fcopies), dwq(qbytes * qcopies), dsc(static_cast<size_t>(s.N) * 4), dx(16 * s.K * 2),
        dy(16 * s.N * 2);
    DevBuf dxq(16 * s.K), drs(16 * 4), dacc(16 * s.N * 4);
    cudaMemset(dwf.get(), 0x11, fbytes * fcopies);
    cudaMemset(dwq.get(), 0x31, qbytes * qcopies);  // e4m3 0x31: 0.28125
    cudaMemset(dsc.get(), 0, static_cast<size_t>(s.N) * 4);
    cudaMemset(dx.get(), 0x22, 16 * s.K * 2);
    for (int64_t T : {1, 2, 4, 8, 16}) {
      auto args = [&](int i) {
        k::Fp8LinearArgs a;
        a.x = dx.get();
        a.w = static_cast<char*>(dwq.get()) + (i % qcopies) * qbytes;
        a.w_scale = dsc.as<float>();
        a.y = dy.get();
        a.T = T;
        a.N = s.N;
        a.K = s.K;
        a.xq = dxq.get();
        a.row_scale = drs.as<float>();
        a.acc = dacc.as<float>();
        return a;
      };
      const float g = time_ms([&](int i) {
        const k::Fp8LinearArgs a = args(i);
        k::gemv_fp8(a.x, a.w, a.w_scale, true, nullptr, a.y, T, s.N, s.K, DType::F16, nullptr, &split.ws);
      });
      const float q8 = time_ms([&](int i) { ASSERT_TRUE(f8.linear(args(i), nullptr).ok()); });
      const float f = time_ms([&](int i) {
        ASSERT_TRUE(lt.linear(dx.get(), static_cast<char*>(dwf.get()) + (i % fcopies) * fbytes, nullptr, dy.get(), T,
                              s.N, s.K, DType::F16, DType::F16, nullptr, true)
                        .ok());
      });
      std::printf("fp8 %-8s T=%-2ld  w8a16 %7.1f us %6.0f GB/s | w8a8 %7.1f us | fp16 %7.1f us %6.0f GB/s | %.2fx\n",
                  s.name, static_cast<long>(T), g * 1e3, qbytes / (g * 1e-3) / 1e9, q8 * 1e3, f * 1e3,
                  fbytes / (f * 1e-3) / 1e9, f / g);
    }
    CUDA_OK(cudaDeviceSynchronize());
  }
}

TEST(LlmQuantKernels, Fp8GemvRefusesWhatItCannotTake) {
  alignas(16) static uint8_t buf[64];
  EXPECT_TRUE(k::gemv_fp8_supported(buf, buf, 1, 64, 256, DType::F16));
  EXPECT_TRUE(k::gemv_fp8_supported(buf, buf, 16, 64, 256, DType::BF16));
  EXPECT_FALSE(k::gemv_fp8_supported(buf, buf, 17, 64, 256, DType::F16));     // T > 16
  EXPECT_FALSE(k::gemv_fp8_supported(buf, buf, 0, 64, 256, DType::F16));      // no tokens
  EXPECT_FALSE(k::gemv_fp8_supported(buf, buf, 1, 64, 264, DType::F16));      // K % 16
  EXPECT_FALSE(k::gemv_fp8_supported(buf, buf, 1, 64, 256, DType::F32));      // f32
  EXPECT_FALSE(k::gemv_fp8_supported(buf + 8, buf, 1, 64, 256, DType::F16));  // x not 16-byte aligned
  EXPECT_FALSE(k::gemv_fp8_supported(buf, buf + 4, 1, 64, 256, DType::F16));  // W not 16-byte aligned
}

}  // namespace
}  // namespace gpuopt::llm::test
