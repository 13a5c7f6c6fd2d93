// Embedding, gather_rows, rms_norm (+ residual), silu_mul and rope_and_cache against plain CPU
// code in double precision, in f32, f16 and bf16, on vectorised and odd (scalar-path) shapes.
#include <algorithm>
#include <cmath>

#include "llm/kernels/llm_kernels.h"
#include "llm_cuda_test_util.h"

namespace gpuopt::llm::test {
namespace {

namespace k = gpuopt::llm::cuda;
const DType kTypes[] = {DType::F32, DType::F16, DType::BF16};

TEST(LlmKernels, EmbeddingAndGatherCopyRows) {
  LLM_REQUIRE_DEVICE();
  std::mt19937 rng(1);
  for (DType dt : kTypes) {
    for (int64_t hidden : {4096, 37}) {  // 37: rows not a multiple of 16 bytes
      const int64_t vocab = 50, T = 19;
      const size_t es = dtype_size(dt);
      auto table = encode(random_vec(vocab * hidden, rng), dt);
      std::vector<int32_t> tok(T);
      for (auto& t : tok) t = static_cast<int32_t>(rng() % vocab);
      DevBuf dtable(table.size()), dtok(T * 4), dout(T * hidden * es), dg(5 * hidden * es);
      dtable.upload(table);
      dtok.upload(tok);
      k::embedding(dtok.as<int32_t>(), dtable.get(), dout.get(), T, hidden, dt, nullptr);
      auto out = dout.download<uint8_t>(T * hidden * es);
      for (int64_t t = 0; t < T; ++t)
        ASSERT_EQ(0, std::memcmp(out.data() + t * hidden * es, table.data() + tok[t] * hidden * es, hidden * es))
            << dt_name(dt) << " row " << t;
      EXPECT_TRUE(dout.guards_ok());
      std::vector<int32_t> rows = {18, 0, 7, 7, 3};
      DevBuf drows(rows.size() * 4);
      drows.upload(rows);
      k::gather_rows(dout.get(), drows.as<int32_t>(), dg.get(), 5, hidden, dt, nullptr);
      auto g = dg.download<uint8_t>(5 * hidden * es);
      for (int i = 0; i < 5; ++i)
        ASSERT_EQ(0, std::memcmp(g.data() + i * hidden * es, out.data() + rows[i] * hidden * es, hidden * es));
      EXPECT_TRUE(dg.guards_ok());
      CUDA_OK(cudaDeviceSynchronize());
    }
  }
}

TEST(LlmKernels, RmsNormWithAndWithoutResidual) {
  LLM_REQUIRE_DEVICE();
  std::mt19937 rng(2);
  for (DType dt : kTypes) {
    for (int64_t dim : {4096, 1000, 33}) {
      for (bool with_res : {false, true}) {
        const int64_t rows = 7;
        const float eps = 1e-5f;
        const size_t es = dtype_size(dt);
        auto x = round_to(random_vec(rows * dim, rng, -2, 2), dt);
        auto res = round_to(random_vec(rows * dim, rng, -2, 2), dt);
        auto w = round_to(random_vec(dim, rng, 0.5f, 1.5f), dt);
        DevBuf dx(rows * dim * es), dr(rows * dim * es), dw(dim * es), dout(rows * dim * es);
        dx.upload(encode(x, dt));
        dr.upload(encode(res, dt));
        dw.upload(encode(w, dt));
        k::rms_norm(dx.get(), with_res ? dr.get() : nullptr, dw.get(), dout.get(), rows, dim, eps, dt, nullptr);
        CUDA_OK(cudaDeviceSynchronize());
        std::vector<double> ref(rows * dim);
        std::vector<float> new_res = res;
        for (int64_t r = 0; r < rows; ++r) {
          std::vector<double> h(dim);
          for (int64_t i = 0; i < dim; ++i) {
            double v = x[r * dim + i];
            if (with_res) {  // the new residual stream, rounded to the model's dtype (HF)
              new_res[r * dim + i] = round_to({static_cast<float>(v + res[r * dim + i])}, dt)[0];
              v = new_res[r * dim + i];
            }
            h[i] = v;
          }
          double ss = 0;
          for (double v : h) ss += v * v;
          const double inv = 1.0 / std::sqrt(ss / dim + eps);
          for (int64_t i = 0; i < dim; ++i) ref[r * dim + i] = h[i] * inv * w[i];
        }
        auto got = decode(dout.download<uint8_t>(rows * dim * es), dt);
        EXPECT_EQ(0u, count_bad(got, ref, tol_for(dt), "rms_norm")) << dt_name(dt) << " dim " << dim;
        if (with_res) {
          auto got_res = decode(dr.download<uint8_t>(rows * dim * es), dt);
          std::vector<double> rr(new_res.begin(), new_res.end());
          EXPECT_EQ(0u, count_bad(got_res, rr, tol_for(dt), "residual"));
        }
        EXPECT_TRUE(dout.guards_ok() && dr.guards_ok());
      }
    }
  }
}

TEST(LlmKernels, SiluMul) {
  LLM_REQUIRE_DEVICE();
  std::mt19937 rng(3);
  for (DType dt : kTypes) {
    for (int64_t inter : {11008, 45}) {
      const int64_t T = 5;
      const size_t es = dtype_size(dt);
      auto gu = round_to(random_vec(T * 2 * inter, rng, -6, 6), dt);
      DevBuf dgu(gu.size() * es), dout(T * inter * es);
      dgu.upload(encode(gu, dt));
      k::silu_mul(dgu.get(), dout.get(), T, inter, dt, nullptr);
      CUDA_OK(cudaDeviceSynchronize());
      std::vector<double> ref(T * inter);
      for (int64_t t = 0; t < T; ++t)
        for (int64_t i = 0; i < inter; ++i) {
          const double g = gu[t * 2 * inter + i], u = gu[t * 2 * inter + inter + i];
          ref[t * inter + i] = g / (1 + std::exp(-g)) * u;
        }
      auto got = decode(dout.download<uint8_t>(T * inter * es), dt);
      EXPECT_EQ(0u, count_bad(got, ref, tol_for(dt), "silu_mul")) << dt_name(dt) << " " << inter;
      EXPECT_TRUE(dout.guards_ok());
    }
  }
}

// Rotation of q and k in place, then k/v into scattered cache slots (some tokens unwritten).
TEST(LlmKernels, RopeAndCache) {
  LLM_REQUIRE_DEVICE();
  std::mt19937 rng(4);
  struct Case {
    DType dt, kv_dt;
    int H, KV, D;
  };
  for (Case c : {Case{DType::F32, DType::F32, 4, 2, 64}, Case{DType::F16, DType::F16, 8, 2, 128},
                 Case{DType::BF16, DType::BF16, 4, 4, 128}, Case{DType::BF16, DType::F32, 6, 2, 64}}) {
    const int T = 9, bs = 16, num_blocks = 8;
    const int W = (c.H + 2 * c.KV) * c.D;
    const size_t es = dtype_size(c.dt), kes = dtype_size(c.kv_dt);
    auto qkv = round_to(random_vec(static_cast<size_t>(T) * W, rng), c.dt);
    std::vector<int32_t> pos(T), slots(T);
    std::vector<float> inv(c.D / 2);
    for (int i = 0; i < c.D / 2; ++i) inv[i] = static_cast<float>(std::pow(500000.0, -2.0 * i / c.D));
    for (int t = 0; t < T; ++t) {
      pos[t] = static_cast<int32_t>(rng() % 9000);
      slots[t] = t == 4 ? -1 : ((t * 3 + 1) % num_blocks) * bs + (t * 5) % bs;  // scattered
    }
    const size_t cache_n = static_cast<size_t>(num_blocks) * bs * c.KV * c.D;
    auto kc0 = round_to(random_vec(cache_n, rng), c.kv_dt), vc0 = round_to(random_vec(cache_n, rng), c.kv_dt);
    DevBuf dqkv(qkv.size() * es), dpos(T * 4), dinv(inv.size() * 4), dslots(T * 4), dk(cache_n * kes),
        dv(cache_n * kes);
    dqkv.upload(encode(qkv, c.dt));
    dpos.upload(pos);
    dinv.upload(inv);
    dslots.upload(slots);
    dk.upload(encode(kc0, c.kv_dt));
    dv.upload(encode(vc0, c.kv_dt));
    k::rope_and_cache(dqkv.get(), dpos.as<int32_t>(), dinv.as<float>(), dslots.as<int32_t>(), dk.get(), dv.get(), T,
                      c.H, c.KV, c.D, bs, c.dt, c.kv_dt, nullptr);
    CUDA_OK(cudaDeviceSynchronize());
    std::vector<double> ref(qkv.begin(), qkv.end());
    for (int t = 0; t < T; ++t)
      for (int h = 0; h < c.H + c.KV; ++h)
        for (int i = 0; i < c.D / 2; ++i) {
          const double ang = static_cast<float>(static_cast<float>(pos[t]) * inv[i]);  // f32 angle, as HF
          const size_t a = static_cast<size_t>(t) * W + h * c.D + i, b = a + c.D / 2;
          ref[a] = qkv[a] * std::cos(ang) - qkv[b] * std::sin(ang);
          ref[b] = qkv[b] * std::cos(ang) + qkv[a] * std::sin(ang);
        }
    auto got = decode(dqkv.download<uint8_t>(qkv.size() * es), c.dt);
    EXPECT_EQ(0u, count_bad(got, ref, tol_for(c.dt), "rope qkv")) << dt_name(c.dt);
    std::vector<double> kref(kc0.begin(), kc0.end()), vref(vc0.begin(), vc0.end());
    for (int t = 0; t < T; ++t) {
      if (slots[t] < 0) continue;
      for (int e = 0; e < c.KV * c.D; ++e) {
        kref[static_cast<size_t>(slots[t]) * c.KV * c.D + e] = ref[static_cast<size_t>(t) * W + c.H * c.D + e];
        vref[static_cast<size_t>(slots[t]) * c.KV * c.D + e] = ref[static_cast<size_t>(t) * W + (c.H + c.KV) * c.D + e];
      }
    }
    Tol tol = tol_for(c.dt);  // k went through the activation dtype first
    auto gk = decode(dk.download<uint8_t>(cache_n * kes), c.kv_dt);
    auto gv = decode(dv.download<uint8_t>(cache_n * kes), c.kv_dt);
    EXPECT_EQ(0u, count_bad(gk, kref, tol, "k cache"));
    EXPECT_EQ(0u, count_bad(gv, vref, tol, "v cache"));
    EXPECT_TRUE(dqkv.guards_ok() && dk.guards_ok() && dv.guards_ok());
  }
}

}  // namespace
}  // namespace gpuopt::llm::test
