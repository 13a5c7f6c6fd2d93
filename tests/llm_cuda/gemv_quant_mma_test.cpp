// The tensor-core W4A16 / W8A16 GEMV (llm_kernels.h gemv_quant with QuantGemvKernel::Mma,
// gemv_quant_mma.cu) against dequantize-then-multiply in double on the host: int4 and int8, groups
// 32/64/128, M (tokens) = 1, 2, 3, 4, 8, 16 in one launch and 17, 64 through quant_linear's
// 16-token chunks; K and N of Llama-2-7B's decode products (4096, 11008, 12288, 22016) and small
// odd shapes (a partial warp of columns, slices that end inside a group); with and without the
// split-K workspace, bias, twice (bit-identical). Where it does not apply (act-order, bf16) the
// request falls back to the other kernels, still correct.
//
// Tolerance, from what the kernel computes: x (f16) times (q - z) (an integer, exact in f16) is
// exact in the tensor cores' f32; the mma sums a group's products in f32, scales the sum by the
// f16 scale in f32 and adds the group totals and the K slices in f32; the result is rounded once
// to f16. So per output |err| <= 2^-11 |y| (the f16 rounding) + n 2^-24 A, A = sum_k |x_k w_k| (the
// standard bound for n f32 additions, n = gs/16 + K/gs + 32 slices), taken 8x for the tensor
// cores' truncating alignment of addends. No f16 accumulation is involved; an indexing error
// moves an output by ~A / sqrt(K), orders of magnitude beyond this.
#include <cmath>
#include <cstdio>

#include "llm/cuda/gemm.h"
#include "llm/cuda/quant_gemm.h"
#include "llm/kernels/llm_kernels.h"
#include "llm_cuda_test_util.h"
#include "quant_test_util.h"

namespace gpuopt::llm::test {
namespace {

namespace k = gpuopt::llm::cuda;

// Outputs of the checked columns outside the bound above; reports the first few.
size_t count_bad_mma(const std::vector<float>& y, int64_t T, const std::vector<float>& x, const HostQuant& h,
                     const std::vector<int64_t>& cols, const std::vector<float>& bias, const char* what) {
  const double n_add = static_cast<double>(h.group / 16 + h.K / h.group + 32);
  size_t bad = 0;
  for (int64_t t = 0; t < T; ++t)
    for (int64_t c : cols) {
      double want = bias.empty() ? 0.0 : bias[static_cast<size_t>(c)], mag = 0;
      const float* wr = h.w.data() + c * h.K;
      for (int64_t kk = 0; kk < h.K; ++kk) {
        const double p = static_cast<double>(x[static_cast<size_t>(t * h.K + kk)]) * wr[kk];
        want += p;
        mag += std::fabs(p);
      }
      const double got = y[static_cast<size_t>(t * h.N + c)];
      const double tol = std::ldexp(std::fabs(want), -11) + 8 * n_add * std::ldexp(mag, -24) + 1e-7;
      if (!(std::fabs(got - want) <= tol)) {
        if (bad < 5)
          ADD_FAILURE() << what << " t " << t << " n " << c << ": got " << got << " want " << want << " (tol " << tol
                        << ", sum |x w| " << mag << ")";
        ++bad;
      }
    }
  return bad;
}

struct Case {
  int64_t N, K;
  std::vector<int64_t> groups;
};

TEST(LlmQuantMma, GemvMatchesDequantizedProduct) {
  LLM_REQUIRE_DEVICE();
  std::mt19937 rng(40);
  SplitWs split;
  // 72 columns: the tile's second warp has live lanes only up to column 71; K 192 / 384: slices
  // of a few steps that end inside a group.
  const Case cases[] = {{72, 192, {32, 64}},  {200, 384, {32, 64, 128}}, {4096, 4096, {32, 64, 128}},
                        {12288, 4096, {128}}, {22016, 4096, {128}},      {4096, 11008, {64}}};
  for (int bits : {4, 8})
    for (const Case& cs : cases)
      for (int64_t group : cs.groups) {
        const HostQuant h = make_quant(bits, cs.N, cs.K, group, false, rng);
        const DevQuant d(h);
        const auto cols = columns(cs.N);
        for (int64_t T : {1, 2, 3, 4, 8, 16}) {
          const auto x = round_to(random_vec(static_cast<size_t>(T * cs.K), rng), DType::F16);
          const auto b = round_to(random_vec(static_cast<size_t>(cs.N), rng), DType::F16);
          DevBuf dx(x.size() * 2), dy(static_cast<size_t>(T * cs.N) * 2), db(b.size() * 2);
          dx.upload(encode(x, DType::F16));
          db.upload(encode(b, DType::F16));
          for (int variant = 0; variant < 3; ++variant) {
            const bool with_bias = variant == 1, with_ws = variant != 2;
            if (!with_ws && cs.N * cs.K > 4096 * 4096) continue;  // one slice: 7B shapes only o_proj
            const k::GemvSplitScratch* ws = with_ws ? &split.ws : nullptr;
            const std::string what = "int" + std::to_string(bits) + " " + std::to_string(cs.N) + "x" +
                                     std::to_string(cs.K) + " g" + std::to_string(group) + " T " + std::to_string(T) +
                                     (with_bias ? " bias" : "") + (with_ws ? " split-K" : " one slice");
            if (!k::gemv_quant_mma_runs(d.args(h), T, cs.N, cs.K, DType::F16, ws)) {
              // Without a workspace the whole K must fit one slice's shared memory (48 KB).
              EXPECT_FALSE(with_ws) << what << ": the mma kernel refused";
              continue;
            }
            const void* bias = with_bias ? db.get() : nullptr;
            ASSERT_EQ(k::gemv_quant(dx.get(), d.args(h), bias, dy.get(), T, cs.N, cs.K, DType::F16, nullptr, ws,
                                    k::QuantGemvKernel::Mma),
                      k::QuantGemvKernel::Mma)
                << what;
            CUDA_OK(cudaDeviceSynchronize());
            const auto raw = dy.download<uint8_t>(static_cast<size_t>(T * cs.N) * 2);
            EXPECT_EQ(0u, count_bad_mma(decode(raw, DType::F16), T, x, h, cols, with_bias ? b : std::vector<float>{},
                                        what.c_str()))
                << what;
            EXPECT_TRUE(dy.guards_ok()) << what;
            k::gemv_quant(dx.get(), d.args(h), bias, dy.get(), T, cs.N, cs.K, DType::F16, nullptr, ws,
                          k::QuantGemvKernel::Mma);
            CUDA_OK(cudaDeviceSynchronize());
            EXPECT_EQ(raw, dy.download<uint8_t>(raw.size())) << what << ": not deterministic";
          }
        }
      }
}

// 17 and 64 tokens: quant_linear runs the kernel over 16-token chunks (the last one short).
TEST(LlmQuantMma, ChunkedAboveSixteenTokens) {
  LLM_REQUIRE_DEVICE();
  std::mt19937 rng(41);
  SplitWs split;
  k::LtGemm lt;
  ASSERT_TRUE(lt.init(32 << 20).ok());
  const Shape shapes[] = {{200, 384}, {4096, 4096}, {4096, 11008}};
  for (int bits : {4, 8})
    for (const Shape& s : shapes) {
      const HostQuant h = make_quant(bits, s.N, s.K, 128, false, rng);
      const DevQuant d(h);
      DevBuf scratch(s.N * s.K * 2);
      const auto cols = columns(s.N);
      for (int64_t T : {17, 64}) {
        const std::string what = "int" + std::to_string(bits) + " " + std::to_string(s.N) + "x" + std::to_string(s.K) +
                                 " T " + std::to_string(T);
        ASSERT_TRUE(k::gemv_quant_mma_runs(d.args(h), k::kQuantGemvMaxTokens, s.N, s.K, DType::F16, &split.ws)) << what;
        const auto x = round_to(random_vec(static_cast<size_t>(T * s.K), rng), DType::F16);
        DevBuf dx(x.size() * 2), dy(static_cast<size_t>(T * s.N) * 2);
        dx.upload(encode(x, DType::F16));
        ASSERT_TRUE(k::quant_linear(lt, dx.get(), d.args(h), nullptr, dy.get(), T, s.N, s.K, DType::F16, scratch.get(),
                                    nullptr, &split.ws)
                        .ok());
        CUDA_OK(cudaDeviceSynchronize());
        const auto y = decode(dy.download<uint8_t>(static_cast<size_t>(T * s.N) * 2), DType::F16);
        EXPECT_EQ(0u, count_bad_mma(y, T, x, h, cols, {}, what.c_str())) << what;
        EXPECT_TRUE(dy.guards_ok()) << what;
      }
    }
}

// Act-order and bf16 are not the mma kernel's: asked for it, gemv_quant runs another, correctly.
TEST(LlmQuantMma, FallsBackWhereItDoesNotApply) {
  LLM_REQUIRE_DEVICE();
  std::mt19937 rng(42);
  SplitWs split;
  for (bool act : {true, false}) {
    const DType dt = act ? DType::F16 : DType::BF16;
    const HostQuant h = make_quant(4, 256, 512, 128, act, rng);
    const DevQuant d(h, dt);
    const int64_t T = 3;
    EXPECT_FALSE(k::gemv_quant_mma_runs(d.args(h), T, h.N, h.K, dt, &split.ws));
    const auto x = round_to(random_vec(static_cast<size_t>(T * h.K), rng), dt);
    DevBuf dx(x.size() * 2), dy(static_cast<size_t>(T * h.N) * 2);
    dx.upload(encode(x, dt));
    const auto ran =
        k::gemv_quant(dx.get(), d.args(h), nullptr, dy.get(), T, h.N, h.K, dt, nullptr, &split.ws, k::QuantGemvKernel::Mma);
    EXPECT_EQ(ran, act ? k::QuantGemvKernel::Column : k::QuantGemvKernel::Wide);
    CUDA_OK(cudaDeviceSynchronize());
    const auto cols = columns(h.N);
    const auto y = decode(dy.download<uint8_t>(static_cast<size_t>(T * h.N) * 2), dt);
    EXPECT_EQ(0u, count_bad(pick(y, T, h.N, cols), reference(x, h, T, cols), tol_k(dt, h.K), "fallback"))
        << (act ? "act-order" : "bf16");
  }
}

}  // namespace
}  // namespace gpuopt::llm::test
