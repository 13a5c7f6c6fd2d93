// argmax_rows and sample_rows against a CPU oracle: the filtered distribution of sampling.h's
// contract computed in double over the tokens sorted by (value desc, id asc), and the draw made
// with the same Philox u (philox.h, checked against Random123's known-answer vectors).
#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>

#include "llm/kernels/llm_kernels.h"
#include "llm/kernels/philox.h"
#include "llm_cuda_test_util.h"

namespace gpuopt::llm::test {
namespace {

namespace k = gpuopt::llm::cuda;

TEST(LlmSampling, PhiloxKnownAnswers) {
  // Random123's kat_vectors for philox4x32 with 10 rounds.
  auto run = [](philox::U32x4 c, uint32_t k0, uint32_t k1) { return philox::philox4x32_10(c, k0, k1); };
  auto r = run({{0, 0, 0, 0}}, 0, 0);
  EXPECT_EQ(r.v[0], 0x6627e8d5u);
  EXPECT_EQ(r.v[1], 0xe169c58du);
  EXPECT_EQ(r.v[2], 0xbc57ac4cu);
  EXPECT_EQ(r.v[3], 0x9b00dbd8u);
  r = run({{0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu}}, 0xffffffffu, 0xffffffffu);
  EXPECT_EQ(r.v[0], 0x408f276du);
  EXPECT_EQ(r.v[3], 0x6d5451fdu);
  r = run({{0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}}, 0xa4093822u, 0x299f31d0u);
  EXPECT_EQ(r.v[0], 0xd16cfe09u);
  EXPECT_EQ(r.v[1], 0x94fdccebu);
  EXPECT_EQ(r.v[2], 0x5001e420u);
  EXPECT_EQ(r.v[3], 0x24126ea1u);
  const float u = philox::uniform(0x0123456789abcdefull, 7, 3);
  EXPECT_GE(u, 0.0f);
  EXPECT_LT(u, 1.0f);
}

TEST(LlmSampling, ArgmaxRowsLowestIdOnTiesAndLogprob) {
  LLM_REQUIRE_DEVICE();
  std::mt19937 rng(20);
  const int64_t n = 6, vocab = 32003, ld = 32016;
  auto x = random_vec(n * ld, rng, -8, 8);
  for (int64_t r = 0; r < n; ++r) {  // a tie at the maximum in some rows
    if (r % 2 == 0) continue;
    x[r * ld + 700 + r] = 9.5f;
    x[r * ld + 31000] = 9.5f;
    x[r * ld + 32010] = 50.0f;  // past vocab: padding, never read
  }
  DevBuf dx(x.size() * 4), dt(n * 4), dl(n * 4);
  dx.upload(x);
  k::argmax_rows(dx.as<float>(), n, vocab, ld, dt.as<int32_t>(), dl.as<float>(), nullptr);
  CUDA_OK(cudaDeviceSynchronize());
  auto tok = dt.download<int32_t>(n);
  auto lp = dl.download<float>(n);
  for (int64_t r = 0; r < n; ++r) {
    const float* xr = &x[r * ld];
    const int64_t want = std::max_element(xr, xr + vocab) - xr;  // the first maximum
    double mx = xr[want], s = 0;
    for (int64_t i = 0; i < vocab; ++i) s += std::exp(static_cast<double>(xr[i]) - mx);
    EXPECT_EQ(tok[r], want) << "row " << r;
    // log-sum-exp over 32k terms in f32: relative 1e-6 of a sum near 1e4, so 1e-4 absolute.
    EXPECT_NEAR(lp[r], -std::log(s), 1e-4) << "row " << r;
  }
  EXPECT_TRUE(dt.guards_ok() && dl.guards_ok());
}

struct Oracle {
  std::vector<int> order;   // kept tokens, (z desc, id asc)
  std::vector<double> cum;  // cumulative mass of the kept prefix (unnormalised)
  std::vector<double> full_cum;
  double topk_mass = 0;
};

// sampling.h's order of operations in f32 where the kernel rounds (the processed logits) and in
// double for the masses.
std::vector<float> processed(const float* x, int64_t vocab, const k::SampleRowParams& p, const int32_t* cnt,
                             const uint8_t* pm, bool greedy) {
  std::vector<float> z(vocab);
  for (int64_t i = 0; i < vocab; ++i) {
    float l = x[i];
    const int c = cnt ? cnt[i] : 0;
    if (c > 0 || (pm && pm[i])) {
      if (p.repetition_penalty != 1.0f) l = l > 0 ? l / p.repetition_penalty : l * p.repetition_penalty;
    }
    volatile float fr = p.frequency_penalty * static_cast<float>(c);  // no contraction
    volatile float pen = (c > 0 ? p.presence_penalty : 0.0f) + fr;
    l = l - pen;
    z[i] = greedy ? l : l / p.temperature;
  }
  return z;
}

Oracle oracle(const std::vector<float>& z, const k::SampleRowParams& p) {
  const int64_t V = static_cast<int64_t>(z.size());
  std::vector<int> idx(V);
  std::iota(idx.begin(), idx.end(), 0);
  std::sort(idx.begin(), idx.end(), [&](int a, int b) { return z[a] > z[b] || (z[a] == z[b] && a < b); });
  const double zmax = z[idx[0]];
  std::vector<double> e(V), cum(V);
  double acc = 0;
  for (int64_t j = 0; j < V; ++j) {
    e[j] = std::exp(static_cast<double>(z[idx[j]]) - zmax);
    cum[j] = (acc += e[j]);
  }
  int64_t keep = V;
  if (p.top_k > 0 && p.top_k < V) keep = p.top_k;
  Oracle o;
  o.topk_mass = cum[keep - 1];
  if (p.top_p < 1.0f) {
    const double target = static_cast<double>(p.top_p) * cum[keep - 1];
    int64_t j = 0;
    while (j < keep - 1 && cum[j] < target) ++j;
    keep = j + 1;
  }
  if (p.min_p > 0.0f) {
    int64_t j = 0;
    while (j < keep && e[j] >= p.min_p) ++j;
    keep = std::max<int64_t>(1, j);
  }
  o.order.assign(idx.begin(), idx.begin() + keep);
  o.cum.assign(cum.begin(), cum.begin() + keep);
  o.full_cum = cum;
  return o;
}

// Rows of varied parameters, some with penalties and some with tied logits: the kernel's token
// must be the oracle's inverse-CDF pick for the same u, except where u * mass lies within float
// rounding of a boundary (then either neighbour is right; they must stay rare).
TEST(LlmSampling, SampleRowsMatchesInverseCdfOracle) {
  LLM_REQUIRE_DEVICE();
  std::mt19937 rng(21);
  const int64_t n = 384, vocab = 5003, ld = 5008;
  std::normal_distribution<float> nd(0.0f, 2.5f);
  std::vector<float> x(n * ld);
  for (int64_t r = 0; r < n; ++r)
    for (int64_t i = 0; i < ld; ++i) {
      float v = nd(rng);
      if (r % 5 == 4) v = std::round(v * 2.0f) / 2.0f;  // many exact ties
      x[r * ld + i] = v;
    }
  std::vector<int32_t> cnt(n * vocab, 0);
  std::vector<uint8_t> pm(n * vocab, 0);
  std::vector<k::SampleRowParams> ps(n);
  const float temps[] = {0.0f, 0.7f, 1.0f, 1.3f};
  const int tks[] = {0, 1, 5, 50, 1000};
  const float tps[] = {1.0f, 0.9f, 0.5f, 0.97f};
  for (int64_t r = 0; r < n; ++r) {
    auto& p = ps[r];
    p.temperature = temps[r % 4];
    p.top_k = tks[(r / 4) % 5];
    p.top_p = tps[(r / 20) % 4];
    p.min_p = (r / 80) % 2 ? 0.05f : 0.0f;
    p.seed = (static_cast<uint64_t>(rng()) << 32) | rng();
    p.counter_hi = static_cast<uint64_t>(r);
    p.counter_lo = r % 3;
    if (r % 3 == 1) {  // penalties over a random history
      p.repetition_penalty = 1.3f;
      p.presence_penalty = 0.4f;
      p.frequency_penalty = 0.25f;
      for (int t = 0; t < 40; ++t) cnt[r * vocab + rng() % vocab] += 1;
      for (int t = 0; t < 60; ++t) pm[r * vocab + rng() % vocab] = 1;
    }
  }
  DevBuf dx(x.size() * 4), dp(ps.size() * sizeof(k::SampleRowParams)), dc(cnt.size() * 4), dm(pm.size()), dt(n * 4),
      dl(n * 4);
  dx.upload(x);
  dp.upload(ps.data(), ps.size() * sizeof(k::SampleRowParams));
  dc.upload(cnt);
  dm.upload(pm);
  k::sample_rows(dx.as<float>(), n, vocab, ld, dp.as<k::SampleRowParams>(), dc.as<int32_t>(), dm.as<uint8_t>(),
                 dt.as<int32_t>(), dl.as<float>(), nullptr);
  CUDA_OK(cudaDeviceSynchronize());
  auto tok = dt.download<int32_t>(n);
  auto lp = dl.download<float>(n);
  int ambiguous = 0;
  for (int64_t r = 0; r < n; ++r) {
    const auto& p = ps[r];
    const bool greedy = !(p.temperature > 0);
    auto z = processed(&x[r * ld], vocab, p, &cnt[r * vocab], &pm[r * vocab], greedy);
    const Oracle o = oracle(z, p);
    int want;
    bool near_edge = false;
    if (greedy) {
      want = o.order[0];
    } else {
      const double mass = o.cum.back();
      const double target = philox::uniform(p.seed, p.counter_hi, p.counter_lo) * mass;
      size_t j = 0;
      while (j + 1 < o.cum.size() && o.cum[j] <= target) ++j;
      want = o.order[j];
      const double eps = 1e-4 * o.full_cum.back();
      near_edge = std::fabs(o.cum[j] - target) < eps || (j > 0 && std::fabs(o.cum[j - 1] - target) < eps);
      // a top-p cut that float masses could place one token either way
      if (p.top_p < 1.0f) {
        const double tp = p.top_p * o.topk_mass;
        near_edge |=
            std::fabs(o.cum.back() - tp) < eps || (o.cum.size() > 1 && std::fabs(o.cum[o.cum.size() - 2] - tp) < eps);
      }
    }
    if (tok[r] != want) {
      if (near_edge) {
        ++ambiguous;
      } else {
        ADD_FAILURE() << "row " << r << ": got " << tok[r] << " want " << want << " (T " << p.temperature << " k "
                      << p.top_k << " p " << p.top_p << " min_p " << p.min_p << ")";
      }
    }
    ASSERT_GE(tok[r], 0);
    ASSERT_LT(tok[r], vocab);
    EXPECT_TRUE(std::find(o.order.begin(), o.order.end(), tok[r]) != o.order.end() || near_edge)
        << "row " << r << ": token " << tok[r] << " outside the kept set";
    // logprob: log-softmax of the raw logits.
    const float* xr = &x[r * ld];
    double mx = *std::max_element(xr, xr + vocab), s = 0;
    for (int64_t i = 0; i < vocab; ++i) s += std::exp(static_cast<double>(xr[i]) - mx);
    EXPECT_NEAR(lp[r], xr[tok[r]] - mx - std::log(s), 1e-4) << "row " << r;
  }
  EXPECT_LE(ambiguous, 4) << "draws within rounding of a boundary";
  EXPECT_TRUE(dt.guards_ok() && dl.guards_ok());
}

// Many draws from one distribution (top-k 20, top-p 0.8, temperature 0.9): tokens outside the
// filtered set never appear and every frequency is within 5 sigma of its binomial expectation.
TEST(LlmSampling, SampleRowsFrequenciesWithinBinomialBounds) {
  LLM_REQUIRE_DEVICE();
  std::mt19937 rng(22);
  const int64_t n = 4096, vocab = 64, launches = 8;
  std::normal_distribution<float> nd(0.0f, 1.5f);
  std::vector<float> row(vocab);
  for (auto& v : row) v = nd(rng);
  std::vector<float> x(n * vocab);
  for (int64_t r = 0; r < n; ++r) std::copy(row.begin(), row.end(), x.begin() + r * vocab);
  k::SampleRowParams base;
  base.temperature = 0.9f;
  base.top_k = 20;
  base.top_p = 0.8f;
  auto z = processed(row.data(), vocab, base, nullptr, nullptr, false);
  const Oracle o = oracle(z, base);
  std::map<int, double> prob;
  for (size_t j = 0; j < o.order.size(); ++j) prob[o.order[j]] = (o.cum[j] - (j ? o.cum[j - 1] : 0.0)) / o.cum.back();
  DevBuf dx(x.size() * 4), dp(n * sizeof(k::SampleRowParams)), dt(n * 4);
  dx.upload(x);
  std::vector<int64_t> hits(vocab, 0);
  for (int64_t l = 0; l < launches; ++l) {
    std::vector<k::SampleRowParams> ps(n, base);
    for (int64_t r = 0; r < n; ++r) {
      ps[r].seed = 1234;
      ps[r].counter_hi = static_cast<uint64_t>(l);
      ps[r].counter_lo = static_cast<uint64_t>(r);
    }
    dp.upload(ps.data(), ps.size() * sizeof(k::SampleRowParams));
    k::sample_rows(dx.as<float>(), n, vocab, vocab, dp.as<k::SampleRowParams>(), nullptr, nullptr, dt.as<int32_t>(),
                   nullptr, nullptr);
    CUDA_OK(cudaDeviceSynchronize());
    for (int32_t t : dt.download<int32_t>(n)) ++hits[t];
  }
  const double N = static_cast<double>(n * launches);
  for (int t = 0; t < vocab; ++t) {
    const double p = prob.count(t) ? prob[t] : 0.0;
    if (p == 0.0) {
      EXPECT_EQ(hits[t], 0) << "token " << t << " is outside top-k/top-p";
      continue;
    }
    const double sd = std::sqrt(N * p * (1 - p));
    EXPECT_NEAR(static_cast<double>(hits[t]), N * p, 5 * sd + 1) << "token " << t;
  }
}

}  // namespace
}  // namespace gpuopt::llm::test
