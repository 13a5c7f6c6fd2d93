// The CPU sampler: penalties, temperature, top-k / top-p / min-p, one Philox draw. Probabilities
// are computed in double so the choice does not depend on summation order details; a GPU sampler
// that wants the same tokens keeps the same order of operations (sampling.h).
#include "llm/sampling.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <unordered_map>

namespace gpuopt::llm {
namespace {

inline uint32_t mulhi(uint32_t a, uint32_t b, uint32_t* lo) {
  const uint64_t p = static_cast<uint64_t>(a) * b;
  *lo = static_cast<uint32_t>(p);
  return static_cast<uint32_t>(p >> 32);
}

// Best first: higher value, then lower id.
std::vector<int64_t> order_desc(const std::vector<double>& v, int64_t keep) {
  std::vector<int64_t> idx(v.size());
  std::iota(idx.begin(), idx.end(), 0);
  auto better = [&](int64_t a, int64_t b) {
    const double x = v[static_cast<size_t>(a)], y = v[static_cast<size_t>(b)];
    return x > y || (x == y && a < b);
  };
  keep = std::min<int64_t>(keep, static_cast<int64_t>(idx.size()));
  std::partial_sort(idx.begin(), idx.begin() + keep, idx.end(), better);
  idx.resize(static_cast<size_t>(keep));
  return idx;
}

}  // namespace

float philox_uniform(uint64_t seed, uint64_t counter_hi, uint64_t counter_lo) {
  uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
  uint32_t c0 = static_cast<uint32_t>(counter_lo), c1 = static_cast<uint32_t>(counter_lo >> 32);
  uint32_t c2 = static_cast<uint32_t>(counter_hi), c3 = static_cast<uint32_t>(counter_hi >> 32);
  for (int r = 0; r < 10; ++r) {
    if (r > 0) {
      k0 += 0x9E3779B9u;
      k1 += 0xBB67AE85u;
    }
    uint32_t lo0, lo1;
    const uint32_t hi0 = mulhi(0xD2511F53u, c0, &lo0);
    const uint32_t hi1 = mulhi(0xCD9E8D57u, c2, &lo1);
    const uint32_t n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
    c0 = n0;
    c1 = lo1;
    c2 = n2;
    c3 = lo0;
  }
  return static_cast<float>(c0 >> 8) * 0x1.0p-24f;  // 24 bits: exact in float, < 1
}

SampledToken sample_cpu(const float* logits, int64_t vocab, const SamplingParams& p, uint64_t seed,
                        const std::vector<int64_t>& prompt, const std::vector<int64_t>& output, int64_t step) {
  const size_t V = static_cast<size_t>(vocab);
  std::vector<double> l(logits, logits + V);
  // Penalties (sampling.h's order): repetition over prompt and output, then presence and
  // frequency over the output alone.
  if (p.repetition_penalty != 1.0) {
    std::vector<char> seen(V, 0);
    for (int64_t t : prompt)
      if (t >= 0 && t < vocab) seen[static_cast<size_t>(t)] = 1;
    for (int64_t t : output)
      if (t >= 0 && t < vocab) seen[static_cast<size_t>(t)] = 1;
    for (size_t i = 0; i < V; ++i)
      if (seen[i]) l[i] = l[i] > 0 ? l[i] / p.repetition_penalty : l[i] * p.repetition_penalty;
  }
  if (p.presence_penalty != 0.0 || p.frequency_penalty != 0.0) {
    std::unordered_map<int64_t, int64_t> counts;
    for (int64_t t : output)
      if (t >= 0 && t < vocab) ++counts[t];
    for (const auto& [t, n] : counts)
      l[static_cast<size_t>(t)] -= p.presence_penalty + p.frequency_penalty * static_cast<double>(n);
  }

  SampledToken out;
  if (p.temperature <= 0.0) {
    size_t best = 0;
    for (size_t i = 1; i < V; ++i)
      if (l[i] > l[best]) best = i;  // strict: the lowest id wins ties
    out.token = static_cast<int64_t>(best);
  } else {
    double mx = -std::numeric_limits<double>::infinity();
    for (double& x : l) {
      x /= p.temperature;
      mx = std::max(mx, x);
    }
    std::vector<double> prob(V);
    double sum = 0;
    for (size_t i = 0; i < V; ++i) sum += prob[i] = std::exp(l[i] - mx);
    for (double& x : prob) x /= sum;
    const int64_t k = p.top_k > 0 ? std::min<int64_t>(p.top_k, vocab) : vocab;
    std::vector<int64_t> cand = order_desc(prob, k);  // top-k, best first
    if (p.top_p < 1.0) {
      // Keep the smallest best-first prefix whose mass reaches top_p (mass of the top-k set,
      // renormalised); the best token always stays.
      double kept_mass = 0;
      for (int64_t t : cand) kept_mass += prob[static_cast<size_t>(t)];
      double cum = 0;
      size_t n = 0;
      while (n < cand.size() && (n == 0 || cum < p.top_p * kept_mass)) cum += prob[static_cast<size_t>(cand[n++])];
      cand.resize(n);
    }
    if (p.min_p > 0.0) {
      const double floor = p.min_p * prob[static_cast<size_t>(cand[0])];
      size_t n = 1;
      while (n < cand.size() && prob[static_cast<size_t>(cand[n])] >= floor) ++n;
      cand.resize(n);
    }
    double mass = 0;
    for (int64_t t : cand) mass += prob[static_cast<size_t>(t)];
    const double u = static_cast<double>(philox_uniform(seed, static_cast<uint64_t>(step), 0)) * mass;
    double cum = 0;
    out.token = cand.back();
    for (int64_t t : cand) {
      cum += prob[static_cast<size_t>(t)];
      if (u < cum) {
        out.token = t;
        break;
      }
    }
  }

  // Log-probabilities of the raw logits (before penalties and temperature), as sampling.h says.
  double mx = -std::numeric_limits<double>::infinity();
  for (size_t i = 0; i < V; ++i) mx = std::max(mx, static_cast<double>(logits[i]));
  double sum = 0;
  for (size_t i = 0; i < V; ++i) sum += std::exp(static_cast<double>(logits[i]) - mx);
  const double lse = mx + std::log(sum);
  out.logprob = static_cast<float>(static_cast<double>(logits[out.token]) - lse);
  if (p.logprobs > 0) {
    std::vector<double> raw(logits, logits + V);
    for (int64_t t : order_desc(raw, p.logprobs))
      out.top.push_back({t, static_cast<float>(raw[static_cast<size_t>(t)] - lse)});
  }
  return out;
}

}  // namespace gpuopt::llm
