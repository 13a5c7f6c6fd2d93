// The quantized-weight kernels (llm_kernels.h gemv_quant / dequantize_weight, quant_gemm.h
// quant_linear and Fp8Gemm) against dequantize-then-multiply references: GPTQ-layout int4 and int8
// weights, groups 32/64/128, with and without act-order (a shuffled g_idx), v1 zeros; M = 1..16
// through the GEMV kernels (as the runner picks them: the tensor-core one for f16 without
// act-order, gemv_quant_mma_test.cpp tests it apart), M = 17/64 through it in 16-token chunks, 256
// through dequantize + GEMM; Llama-2-7B's K and N (4096x4096, 12288x4096, 22016x4096,
// 4096x11008). The host reference dequantizes with the format's formula (quant_test_util.h) and
// sums in double over a subset of columns (every output of the small shapes).
#include <cstdlib>
#include <cstring>
#include <string>
#include <numeric>

#include "llm/cuda/gemm.h"
#include "llm/cuda/quant_gemm.h"
#include "llm/kernels/llm_kernels.h"
#include "llm/quantized.h"
#include "llm_cuda_test_util.h"
#include "quant_test_util.h"

namespace gpuopt::llm::test {
namespace {

namespace k = gpuopt::llm::cuda;

TEST(LlmQuantKernels, DequantizeWeightIsExact) {
  LLM_REQUIRE_DEVICE();
  std::mt19937 rng(1);
  for (int bits : {4, 8})
    for (bool act : {false, true})
      for (int64_t group : {32, 128}) {
        const HostQuant h = make_quant(bits, 96, 256, group, act, rng);
        DevQuant d(h);
        DevBuf out(h.N * h.K * 2);
        k::dequantize_weight(d.args(h), out.get(), h.N, h.K, DType::F16, nullptr);
        CUDA_OK(cudaDeviceSynchronize());
        const auto got = out.download<uint16_t>(static_cast<size_t>(h.N * h.K));
        size_t bad = 0;
        for (size_t i = 0; i < got.size(); ++i) bad += got[i] != Half::from_float(h.w[i]);
        EXPECT_EQ(bad, 0u) << "bits " << bits << " act-order " << act << " group " << group;
        EXPECT_TRUE(out.guards_ok());
      }
}

// Every shape with the split-K workspace (the wide kernel, K split over CTAs; act-order: the
// one-column kernel), the small one also without it (one slice); twice each: bit-identical.
TEST(LlmQuantKernels, GemvMatchesDequantizedProduct) {
  LLM_REQUIRE_DEVICE();
  std::mt19937 rng(2);
  SplitWs split;
  const Shape shapes[] = {{96, 256}, {4096, 4096}, {12288, 4096}, {22016, 4096}, {4096, 11008}};
  for (int bits : {4, 8})
    for (const Shape& s : shapes)
      for (int64_t group : {32, 64, 128})
        for (bool act : {false, true}) {
          if (s.N > 4096 && group != 128 && !act) continue;  // the big shapes: group 128, and act-order once
          const HostQuant h = make_quant(bits, s.N, s.K, group, act, rng);
          const DevQuant d16(h), dbf(h, DType::BF16);
          const auto cols = columns(s.N);
          for (DType dt : {DType::F16, DType::BF16}) {
            const DevQuant& d = dt == DType::F16 ? d16 : dbf;
            for (int64_t T = 1; T <= k::kQuantGemvMaxTokens; ++T) {
              if (T > 8 && T != 12 && T != k::kQuantGemvMaxTokens) continue;
              if (s.N > 4096 && T != 1 && T != 8 && T != k::kQuantGemvMaxTokens) continue;
              const auto x = round_to(random_vec(static_cast<size_t>(T * s.K), rng), dt);
              auto b = round_to(random_vec(static_cast<size_t>(s.N), rng), dt);
              for (int variant = 0; variant < 3; ++variant) {
                const bool with_bias = variant == 1, with_ws = variant != 2;
                if (with_bias && T != 1) continue;
                if (!with_ws && s.N > 96) continue;
                const k::GemvSplitScratch* ws = with_ws ? &split.ws : nullptr;
                DevBuf dx(x.size() * 2), dy(static_cast<size_t>(T * s.N) * 2), db(b.size() * 2);
                dx.upload(encode(x, dt));
                db.upload(encode(b, dt));
                ASSERT_TRUE(k::gemv_quant_supported(d.args(h), T, s.N, s.K, dt));
                k::gemv_quant(dx.get(), d.args(h), with_bias ? db.get() : nullptr, dy.get(), T, s.N, s.K, dt, nullptr, ws);
                CUDA_OK(cudaDeviceSynchronize());
                auto ref = reference(x, h, T, cols);
                if (with_bias)
                  for (size_t c = 0; c < cols.size(); ++c) ref[c] += b[static_cast<size_t>(cols[c])];
                const auto raw = dy.download<uint8_t>(static_cast<size_t>(T * s.N) * 2);
                EXPECT_EQ(0u, count_bad(pick(decode(raw, dt), T, s.N, cols), ref, tol_k(dt, s.K), "gemv_quant"))
                    << "int" << bits << " " << s.N << "x" << s.K << " g" << group << " act " << act << " T " << T
                    << " " << dt_name(dt) << (with_ws ? " split-K" : " one slice");
                EXPECT_TRUE(dy.guards_ok());
                k::gemv_quant(dx.get(), d.args(h), with_bias ? db.get() : nullptr, dy.get(), T, s.N, s.K, dt, nullptr, ws);
                EXPECT_EQ(raw, dy.download<uint8_t>(raw.size())) << "not deterministic";
              }
            }
          }
        }
}

TEST(LlmQuantKernels, QuantLinearForLargerBatches) {
  LLM_REQUIRE_DEVICE();
  std::mt19937 rng(3);
  k::LtGemm lt;
  ASSERT_TRUE(lt.init(32 << 20).ok());
  const Shape shapes[] = {{96, 256}, {4096, 4096}, {4096, 11008}};
  for (int bits : {4, 8})
    for (const Shape& s : shapes)
      for (bool act : {false, true}) {
        const int64_t group = act ? 64 : 128;
        const HostQuant h = make_quant(bits, s.N, s.K, group, act, rng);
        DevQuant d(h);
        DevBuf scratch(s.N * s.K * 2);
        const auto cols = columns(s.N);
        for (int64_t T : {1, 5, 8, 9, 16, 17, 64, 256}) {
          const DType dt = DType::F16;
          const auto x = round_to(random_vec(static_cast<size_t>(T * s.K), rng), dt);
          DevBuf dx(x.size() * 2), dy(static_cast<size_t>(T * s.N) * 2);
          dx.upload(encode(x, dt));
          ASSERT_TRUE(k::quant_linear(lt, dx.get(), d.args(h), nullptr, dy.get(), T, s.N, s.K, dt, scratch.get(), nullptr)
                          .ok());
          CUDA_OK(cudaDeviceSynchronize());
          const auto y = decode(dy.download<uint8_t>(static_cast<size_t>(T * s.N) * 2), dt);
          const auto ref = reference(x, h, T, cols);
          // Above 8 tokens W is rounded to f16 before the product: a relative 2^-11 per weight, a
          // random walk over K (the abs term's sqrt(K) already scales with it).
          Tol tol = tol_k(dt, s.K);
          if (T > k::kQuantGemvMaxTokens) tol.abs *= 2;
          EXPECT_EQ(0u, count_bad(pick(y, T, s.N, cols), ref, tol, "quant_linear"))
              << "int" << bits << " " << s.N << "x" << s.K << " act " << act << " T " << T;
          EXPECT_TRUE(dy.guards_ok());
        }
      }
}

TEST(LlmQuantKernels, Fp8W8A8MatchesTheScaledProduct) {
  LLM_REQUIRE_DEVICE();
  std::mt19937 rng(4);
  k::Fp8Gemm f8;
  ASSERT_TRUE(f8.init(32 << 20).ok());
  const Shape shapes[] = {{96, 256}, {4096, 4096}, {4096, 11008}};
  for (const Shape& s : shapes)
    for (bool per_channel : {true, false})
      for (bool static_in : {false, true})
        for (int64_t T : {1, 7, 64, 256}) {
          const DType dt = DType::BF16;
          const auto x = round_to(random_vec(static_cast<size_t>(T * s.K), rng), dt);
          const auto w = random_vec(static_cast<size_t>(s.N * s.K), rng);
          // Weights quantized on the host (per channel or per tensor: max |w| -> 448).
          std::vector<float> wscale(per_channel ? static_cast<size_t>(s.N) : 1);
          std::vector<uint8_t> wq(w.size());
          for (int64_t n = 0; n < s.N; ++n) {
            float amax = 0;
            for (int64_t kk = 0; kk < s.K; ++kk) amax = std::max(amax, std::fabs(w[static_cast<size_t>(n * s.K + kk)]));
            if (per_channel) wscale[static_cast<size_t>(n)] = amax / 448.0f;
            else wscale[0] = std::max(wscale[0], amax / 448.0f);
          }
          for (size_t i = 0; i < w.size(); ++i)
            wq[i] = float_to_fp8_e4m3(w[i] / wscale[per_channel ? i / static_cast<size_t>(s.K) : 0]);
          const float in_scale = 1.0f / 448.0f;  // |x| <= 1
          // The activations as the kernel must quantize them (checked byte for byte below).
          std::vector<float> xs(static_cast<size_t>(T));
          std::vector<uint8_t> xq(x.size());
          for (int64_t t = 0; t < T; ++t) {
            float amax = 0;
            for (int64_t kk = 0; kk < s.K; ++kk) amax = std::max(amax, std::fabs(x[static_cast<size_t>(t * s.K + kk)]));
            xs[static_cast<size_t>(t)] = static_in ? in_scale : std::max(amax, 1e-12f) / 448.0f;
            for (int64_t kk = 0; kk < s.K; ++kk)
              xq[static_cast<size_t>(t * s.K + kk)] =
                  float_to_fp8_e4m3(x[static_cast<size_t>(t * s.K + kk)] * (1.0f / xs[static_cast<size_t>(t)]));
          }
          DevBuf dx(x.size() * 2), dw(wq.size()), dws(wscale.size() * 4), din(4), dy(static_cast<size_t>(T * s.N) * 2);
          DevBuf dxq(xq.size()), drs(static_cast<size_t>(T) * 4), dacc(static_cast<size_t>(T * s.N) * 4);
          dx.upload(encode(x, dt));
          dw.upload(wq);
          dws.upload(wscale);
          din.upload(&in_scale, 4);
          k::Fp8LinearArgs a;
          a.x = dx.get();
          a.w = dw.get();
          a.w_scale = dws.as<float>();
          a.per_channel = per_channel;
          a.input_scale = static_in ? din.as<float>() : nullptr;
          a.y = dy.get();
          a.T = T;
          a.N = s.N;
          a.K = s.K;
          a.dt = dt;
          a.xq = dxq.get();
          a.row_scale = drs.as<float>();
          a.acc = dacc.as<float>();
          const Status st = f8.linear(a, nullptr);
          ASSERT_TRUE(st.ok()) << st.to_string();
          CUDA_OK(cudaDeviceSynchronize());
          EXPECT_EQ(xq, dxq.download<uint8_t>(xq.size())) << "activation quantization differs";
          const auto cols = columns(s.N);
          std::vector<double> ref;
          for (int64_t t = 0; t < T; ++t)
            for (int64_t n : cols) {
              double acc = 0;
              for (int64_t kk = 0; kk < s.K; ++kk)
                acc += static_cast<double>(fp8_e4m3_to_float(xq[static_cast<size_t>(t * s.K + kk)])) *
                       fp8_e4m3_to_float(wq[static_cast<size_t>(n * s.K + kk)]);
              ref.push_back(acc * xs[static_cast<size_t>(t)] * wscale[per_channel ? static_cast<size_t>(n) : 0]);
            }
          const auto y = decode(dy.download<uint8_t>(static_cast<size_t>(T * s.N) * 2), dt);
          EXPECT_EQ(0u, count_bad(pick(y, T, s.N, cols), ref, tol_k(dt, s.K), "fp8"))
              << s.N << "x" << s.K << " T " << T << " per-channel " << per_channel << " static " << static_in;
          EXPECT_TRUE(dy.guards_ok());
        }
}

// With LLM_KERNEL_BENCH=1: the quantized GEMVs' time and effective bandwidth (packed weight bytes
// / time) on Llama-2-7B's decode products beside cuBLASLt on the fp16 weights, weights rotated
// through copies larger than L2 so every launch reads HBM. Up to 16 tokens: the tensor-core
// kernel (mma) and the f32 one (wide); 32 and 64: quant_linear (mma in 16-token chunks) and
// dequantize + GEMM (dq+gemm). The ratios are fp16's time over each.
TEST(LlmQuantKernelsBench, GemvBandwidthBesideFp16) {
  const char* e = std::getenv("LLM_KERNEL_BENCH");
  if (!e || std::string(e) != "1") GTEST_SKIP() << "timing mode: LLM_KERNEL_BENCH=1";
  LLM_REQUIRE_DEVICE();
  struct Named {
    const char* name;
    int64_t N, K;
  };
  const Named shapes[] = {{"qkv", 12288, 4096}, {"o_proj", 4096, 4096}, {"gate_up", 22016, 4096}, {"down", 4096, 11008}};
  k::LtGemm lt;
  ASSERT_TRUE(lt.init(32 << 20).ok());
  SplitWs split;
  for (const Named& s : shapes) {
    const size_t fbytes = static_cast<size_t>(s.N * s.K) * 2;
    const int fcopies = static_cast<int>(std::max<size_t>(2, (size_t{400} << 20) / fbytes));
    DevBuf dwf(fbytes * fcopies), dx(64 * s.K * 2), dy(64 * s.N * 2), deq(fbytes);
    cudaMemset(dwf.get(), 0x11, fbytes * fcopies);
    cudaMemset(dx.get(), 0x22, 64 * s.K * 2);
    for (int bits : {4, 8}) {
      const int64_t pack = 32 / bits, group = 128, G = s.K / group;
      const size_t qw = static_cast<size_t>(s.K / pack * s.N) * 4, qz = static_cast<size_t>(G * (s.N / pack)) * 4,
                   sc = static_cast<size_t>(G * s.N) * 2, per = qw + qz + sc;
      const int copies = static_cast<int>(std::max<size_t>(2, (size_t{400} << 20) / per));
      DevBuf dq(qw * copies), dz(qz * copies), ds(sc * copies);
      cudaMemset(dq.get(), 0x5a, qw * copies);
      cudaMemset(dz.get(), 0x33, qz * copies);
      cudaMemset(ds.get(), 0x11, sc * copies);  // f16 0x1111: a small positive scale
      auto args = [&](int i) {
        k::QuantWeightArgs a;
        a.qweight = reinterpret_cast<const int32_t*>(static_cast<char*>(dq.get()) + (i % copies) * qw);
        a.qzeros = reinterpret_cast<const int32_t*>(static_cast<char*>(dz.get()) + (i % copies) * qz);
        a.scales = static_cast<char*>(ds.get()) + (i % copies) * sc;
        a.bits = bits;
        a.group_size = group;
        return a;
      };
      for (int64_t T : {1, 2, 4, 8, 16, 32, 64}) {
        const bool gemv = T <= k::kQuantGemvMaxTokens;
        float mma = 0, other = 0;
        k::QuantGemvKernel ran = k::QuantGemvKernel::Wide;  // what the f32 request ran (wide or column)
        if (k::gemv_quant_mma_runs(args(0), std::min<int64_t>(T, k::kQuantGemvMaxTokens), s.N, s.K, DType::F16, &split.ws))
          mma = time_ms([&](int i) {
            if (gemv)
              EXPECT_EQ(k::gemv_quant(dx.get(), args(i), nullptr, dy.get(), T, s.N, s.K, DType::F16, nullptr, &split.ws,
                                      k::QuantGemvKernel::Mma),
                        k::QuantGemvKernel::Mma);
            else
              EXPECT_TRUE(k::quant_linear(lt, dx.get(), args(i), nullptr, dy.get(), T, s.N, s.K, DType::F16, deq.get(),
                                          nullptr, &split.ws)
                              .ok());
          });
        other = time_ms([&](int i) {
          if (gemv) {
            ran = k::gemv_quant(dx.get(), args(i), nullptr, dy.get(), T, s.N, s.K, DType::F16, nullptr, &split.ws,
                                k::QuantGemvKernel::Wide);
          } else {
            k::dequantize_weight(args(i), deq.get(), s.N, s.K, DType::F16, nullptr);
            EXPECT_TRUE(lt.linear(dx.get(), deq.get(), nullptr, dy.get(), T, s.N, s.K, DType::F16, DType::F16, nullptr, true)
                            .ok());
          }
        });
        const float f = time_ms([&](int i) {
          ASSERT_TRUE(lt.linear(dx.get(), static_cast<char*>(dwf.get()) + (i % fcopies) * fbytes, nullptr, dy.get(), T,
                                s.N, s.K, DType::F16, DType::F16, nullptr, true)
                          .ok());
        });
        std::printf("int%d g128 %-8s T=%-2ld  mma %7.1f us %6.0f GB/s %5.2fx | %s %7.1f us %5.2fx | fp16 %7.1f us %6.0f GB/s\n",
                    bits, s.name, static_cast<long>(T), mma * 1e3, mma > 0 ? per / (mma * 1e-3) / 1e9 : 0.0,
                    mma > 0 ? f / mma : 0.0, !gemv ? "dq+gemm" : ran == k::QuantGemvKernel::Wide ? "wide   " : "column ", other * 1e3, f / other, f * 1e3,
                    fbytes / (f * 1e-3) / 1e9);
      }
      CUDA_OK(cudaDeviceSynchronize());
    }
  }
}

TEST(LlmQuantKernels, RefusesWhatTheyCannotTake) {
  k::QuantWeightArgs w;
  int32_t dummy = 0;
  w.qweight = &dummy;
  w.qzeros = &dummy;
  w.scales = &dummy;
  w.group_size = 128;
  EXPECT_TRUE(k::gemv_quant_supported(w, 1, 64, 256, DType::F16));
  EXPECT_TRUE(k::gemv_quant_supported(w, 16, 64, 256, DType::F16));
  EXPECT_FALSE(k::gemv_quant_supported(w, 17, 64, 256, DType::F16));  // T > 16
  EXPECT_FALSE(k::gemv_quant_supported(w, 1, 60, 256, DType::F16));   // N % 8
  EXPECT_FALSE(k::gemv_quant_supported(w, 1, 64, 192, DType::F16));   // group 128 does not divide K
  EXPECT_FALSE(k::gemv_quant_supported(w, 1, 64, 256, DType::F32));   // f32
  w.bits = 3;
  EXPECT_FALSE(k::gemv_quant_supported(w, 1, 64, 256, DType::F16));
}

}  // namespace
}  // namespace gpuopt::llm::test
