// The CPU sampler against hand-computed values: Philox's published answers, penalties that flip
// the argmax exactly at their threshold, top-k / top-p / min-p support sets and draw frequencies.
#include "llm/sampling.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>

namespace gpuopt::llm {
namespace {

TEST(Philox, MatchesRandom123KnownAnswers) {
  // Random123's kat_vectors for philox4x32_10: first output word >> 8, scaled by 2^-24.
  EXPECT_EQ(philox_uniform(0, 0, 0), static_cast<float>(0x6627e8d5u >> 8) * 0x1.0p-24f);
  EXPECT_EQ(philox_uniform(~0ull, ~0ull, ~0ull), static_cast<float>(0x408f276du >> 8) * 0x1.0p-24f);
  // ctr (243f6a88, 85a308d3, 13198a2e, 03707344), key (a4093822, 299f31d0) -> d16cfe09 ...
  EXPECT_EQ(philox_uniform(0x299f31d0a4093822ull, 0x0370734413198a2eull, 0x85a308d3243f6a88ull),
            static_cast<float>(0xd16cfe09u >> 8) * 0x1.0p-24f);
}

SamplingParams greedy() {
  SamplingParams p;
  p.temperature = 0;
  return p;
}

int64_t pick(const std::vector<float>& l, const SamplingParams& p, const std::vector<int64_t>& prompt = {},
             const std::vector<int64_t>& output = {}, uint64_t seed = 1, int64_t step = 0) {
  return sample_cpu(l.data(), static_cast<int64_t>(l.size()), p, seed, prompt, output, step).token;
}

TEST(SampleCpu, GreedyTiesGoToTheLowestId) {
  EXPECT_EQ(pick({1, 3, 3, 2}, greedy()), 1);
  EXPECT_EQ(pick({5, 5, 5}, greedy()), 0);
  EXPECT_EQ(pick({-INFINITY, -1, -1}, greedy()), 1);
}

TEST(SampleCpu, RepetitionPenaltyDividesPositiveAndMultipliesNegative) {
  SamplingParams p = greedy();
  // 2.0 / 1.5 = 1.33 < 1.5: token 1 wins; 2.0 / 1.3 = 1.54 > 1.5: token 0 keeps it.
  p.repetition_penalty = 1.5;
  EXPECT_EQ(pick({2.0f, 1.5f}, p, {0}), 1);
  EXPECT_EQ(pick({2.0f, 1.5f}, p, {}, {0}), 1);  // output counts too
  EXPECT_EQ(pick({2.0f, 1.5f}, p, {}, {}), 0);
  p.repetition_penalty = 1.3;
  EXPECT_EQ(pick({2.0f, 1.5f}, p, {0}), 0);
  // Negative: -1.0 * 1.5 = -1.5 < -1.4; -1.0 * 1.3 = -1.3 > -1.4.
  p.repetition_penalty = 1.5;
  EXPECT_EQ(pick({-1.0f, -1.4f}, p, {0}), 1);
  p.repetition_penalty = 1.3;
  EXPECT_EQ(pick({-1.0f, -1.4f}, p, {0}), 0);
}

TEST(SampleCpu, PresenceAndFrequencyCountTheOutputOnly) {
  SamplingParams p = greedy();
  p.frequency_penalty = 0.3;  // 3.0 - 3*0.3 = 2.1 > 2.0
  EXPECT_EQ(pick({3.0f, 2.0f}, p, {}, {0, 0, 0}), 0);
  p.frequency_penalty = 0.4;  // 3.0 - 1.2 = 1.8 < 2.0
  EXPECT_EQ(pick({3.0f, 2.0f}, p, {}, {0, 0, 0}), 1);
  EXPECT_EQ(pick({3.0f, 2.0f}, p, {0, 0, 0, 0, 0}, {}), 0);  // the prompt is not penalised
  p.frequency_penalty = 0;
  p.presence_penalty = 0.9;  // once, however often: 2.1
  EXPECT_EQ(pick({3.0f, 2.0f}, p, {}, {0, 0, 0}), 0);
  p.presence_penalty = 1.1;  // 1.9
  EXPECT_EQ(pick({3.0f, 2.0f}, p, {}, {0}), 1);
  p.presence_penalty = -2.0;  // negative: encourages
  EXPECT_EQ(pick({1.0f, 2.0f}, p, {}, {0}), 0);
}

// Frequencies of many draws (step varies, seed fixed).
std::map<int64_t, double> frequencies(const std::vector<float>& l, const SamplingParams& p, int n,
                                      const std::vector<int64_t>& output = {}) {
  std::map<int64_t, double> f;
  for (int s = 0; s < n; ++s) f[pick(l, p, {}, output, 42, s)] += 1.0 / n;
  return f;
}

std::vector<double> softmax(std::vector<double> l) {
  double m = -INFINITY, s = 0;
  for (double x : l) m = std::max(m, x);
  for (double& x : l) s += x = std::exp(x - m);
  for (double& x : l) x /= s;
  return l;
}

constexpr int kDraws = 20000;
// Four standard deviations of a frequency near 0.5 at kDraws draws, rounded up.
constexpr double kTol = 0.015;

TEST(SampleCpu, TemperatureOneFollowsTheSoftmax) {
  const std::vector<float> l = {1.0f, 0.0f, 2.0f, -1.0f};
  SamplingParams p;
  const auto f = frequencies(l, p, kDraws);
  const auto q = softmax({1, 0, 2, -1});
  for (int t = 0; t < 4; ++t) EXPECT_NEAR(f.count(t) ? f.at(t) : 0, q[t], kTol) << t;
  p.temperature = 0.5;  // sharper: logits doubled
  const auto f2 = frequencies(l, p, kDraws);
  const auto q2 = softmax({2, 0, 4, -2});
  for (int t = 0; t < 4; ++t) EXPECT_NEAR(f2.count(t) ? f2.at(t) : 0, q2[t], kTol) << t;
}

TEST(SampleCpu, TopKTopPMinPSupportSets) {
  // probabilities proportional to 8, 4, 2, 1, 1 (sum 16): 0.5, 0.25, 0.125, 0.0625, 0.0625
  const std::vector<float> l = {std::log(8.0f), std::log(4.0f), std::log(2.0f), 0.0f, 0.0f};
  SamplingParams p;
  p.top_k = 2;
  auto f = frequencies(l, p, kDraws);
  EXPECT_EQ(f.size(), 2u);
  EXPECT_NEAR(f[0], 2.0 / 3, kTol);
  EXPECT_NEAR(f[1], 1.0 / 3, kTol);

  p = SamplingParams();
  p.top_p = 0.7;  // 0.5 < 0.7, 0.75 >= 0.7: {0, 1}
  f = frequencies(l, p, kDraws);
  EXPECT_EQ(f.size(), 2u);
  EXPECT_NEAR(f[0], 2.0 / 3, kTol);
  p.top_p = 0.8;  // 0.75 < 0.8: {0, 1, 2}
  f = frequencies(l, p, kDraws);
  EXPECT_EQ(f.size(), 3u);
  EXPECT_TRUE(f.count(0) && f.count(1) && f.count(2));
  EXPECT_NEAR(f[2], 0.125 / 0.875, kTol);
  p.top_p = 0.01;  // the best alone
  f = frequencies(l, p, 500);
  EXPECT_EQ(f.size(), 1u);
  EXPECT_EQ(f.begin()->first, 0);

  p = SamplingParams();
  p.min_p = 0.24;  // prob >= 0.12: {0, 1, 2}
  f = frequencies(l, p, kDraws);
  EXPECT_EQ(f.size(), 3u);
  EXPECT_FALSE(f.count(3) || f.count(4));
  p.min_p = 0.26;  // > 0.125: {0, 1}
  f = frequencies(l, p, kDraws);
  EXPECT_EQ(f.size(), 2u);

  // top-k ties at the boundary keep the lower ids: {0, 1, 2, 3} of the equal 3 and 4.
  p = SamplingParams();
  p.top_k = 4;
  f = frequencies(l, p, kDraws);
  EXPECT_EQ(f.size(), 4u);
  EXPECT_FALSE(f.count(4));
  EXPECT_NEAR(f[3], 1.0 / 15, kTol);
}

TEST(SampleCpu, PenalisedDistribution) {
  // Logits 1, 1; output {0, 0}; frequency 0.5: logits 0, 1 -> p = (0.269, 0.731).
  SamplingParams p;
  p.frequency_penalty = 0.5;
  const auto f = frequencies({1.0f, 1.0f}, p, kDraws, {0, 0});
  const auto q = softmax({0, 1});
  EXPECT_NEAR(f.at(0), q[0], kTol);
  EXPECT_NEAR(f.at(1), q[1], kTol);
}

TEST(SampleCpu, SameSeedSameDrawsAndLogprobs) {
  const std::vector<float> l = {0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f, 0.7f, 0.8f};
  SamplingParams p;
  p.logprobs = 3;
  std::vector<int64_t> a, b, c;
  for (int s = 0; s < 64; ++s) {
    a.push_back(pick(l, p, {}, {}, 1234, s));
    b.push_back(pick(l, p, {}, {}, 1234, s));
    c.push_back(pick(l, p, {}, {}, 1235, s));
  }
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  const SampledToken t = sample_cpu(l.data(), 8, p, 9, {}, {}, 0);
  double lse = 0;
  for (float x : l) lse += std::exp(static_cast<double>(x));
  lse = std::log(lse);
  EXPECT_NEAR(t.logprob, l[static_cast<size_t>(t.token)] - lse, 1e-6);
  ASSERT_EQ(t.top.size(), 3u);
  EXPECT_EQ(t.top[0].token, 7);
  EXPECT_EQ(t.top[1].token, 6);
  EXPECT_EQ(t.top[2].token, 5);
  EXPECT_NEAR(t.top[0].logprob, 0.8 - lse, 1e-6);
}

}  // namespace
}  // namespace gpuopt::llm
