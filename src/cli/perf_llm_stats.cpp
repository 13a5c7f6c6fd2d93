// gpuopt perf (OpenAI mode): numpy-compatible random draws, the request schedule, percentiles
// and the per-level summary (perf_llm.h).
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "cli/perf_llm.h"

namespace gpuopt::cli::llmperf {

double NumpyRandom::uniform() {
  // numpy's legacy_double / genrand_res53: 27 + 26 bits of two 32-bit draws.
  const uint32_t a = static_cast<uint32_t>(mt_()) >> 5, b = static_cast<uint32_t>(mt_()) >> 6;
  return (a * 67108864.0 + b) / 9007199254740992.0;
}

double NumpyRandom::exponential() { return -std::log(1.0 - uniform()); }

double NumpyRandom::normal() {
  // numpy's legacy_gauss: the polar Box-Muller method, the second value kept for the next call.
  if (gauss_) {
    double g = *gauss_;
    gauss_.reset();
    return g;
  }
  double x1, x2, r2;
  do {
    x1 = 2.0 * uniform() - 1.0;
    x2 = 2.0 * uniform() - 1.0;
    r2 = x1 * x1 + x2 * x2;
  } while (r2 >= 1.0 || r2 == 0.0);
  const double f = std::sqrt(-2.0 * std::log(r2) / r2);
  gauss_ = f * x1;
  return f * x2;
}

int64_t NumpyRandom::integer(int64_t n) {
  if (n <= 1) return 0;
  // numpy's masked rejection sampling on 32-bit draws (ranges below 2^32).
  const uint32_t rng = static_cast<uint32_t>(n - 1);
  uint32_t mask = rng;
  for (int s = 1; s < 32; s <<= 1) mask |= mask >> s;
  uint32_t v;
  do {
    v = static_cast<uint32_t>(mt_()) & mask;
  } while (v > rng);
  return v;
}

std::vector<double> poisson_schedule(NumpyRandom& rng, int64_t n, double rate) {
  std::vector<double> at(static_cast<size_t>(std::max<int64_t>(n, 0)), 0.0);
  if (!(rate > 0) || std::isinf(rate)) return at;
  double t = 0;
  for (auto& x : at) {
    t += rng.exponential() / rate;
    x = t;
  }
  return at;
}

std::vector<int64_t> sample_lengths(NumpyRandom& rng, int64_t n, int64_t mean, int64_t stddev) {
  std::vector<int64_t> out(static_cast<size_t>(std::max<int64_t>(n, 0)), std::max<int64_t>(mean, 1));
  if (stddev <= 0) return out;
  for (auto& x : out) {
    const double v = static_cast<double>(mean) + static_cast<double>(stddev) * rng.normal();
    x = std::max<int64_t>(1, static_cast<int64_t>(std::llround(v)));
  }
  return out;
}

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  // numpy's "linear" method: the rank (n - 1) * q / 100 between its two neighbours.
  const double rank = (static_cast<double>(v.size()) - 1) * q / 100.0;
  const size_t lo = static_cast<size_t>(std::floor(rank));
  const size_t hi = std::min(lo + 1, v.size() - 1);
  const double frac = rank - static_cast<double>(lo);
  return v[lo] + (v[hi] - v[lo]) * frac;
}

Stat summarize(const std::vector<double>& v) {
  Stat s;
  s.count = v.size();
  if (v.empty()) return s;
  s.mean = std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
  double ss = 0;
  for (double x : v) ss += (x - s.mean) * (x - s.mean);
  s.stddev = std::sqrt(ss / static_cast<double>(v.size()));
  auto [mn, mx] = std::minmax_element(v.begin(), v.end());
  s.min = *mn;
  s.max = *mx;
  s.p50 = percentile(v, 50);
  s.p90 = percentile(v, 90);
  s.p99 = percentile(v, 99);
  return s;
}

Result<Slo> parse_goodput(const std::vector<std::string>& specs) {
  Slo slo;
  for (const auto& spec : specs) {
    auto colon = spec.find(':');
    std::string key = spec.substr(0, colon);
    double ms = 0;
    size_t used = 0;
    bool ok = colon != std::string::npos;
    if (ok) {
      try {
        ms = std::stod(spec.substr(colon + 1), &used);
      } catch (const std::exception&) {
        ok = false;
      }
    }
    ok = ok && used == spec.size() - colon - 1 && ms > 0 && std::isfinite(ms);
    if (!ok) return Status::InvalidArgument("--goodput '{}': expected ttft:MS, itl:MS or e2e:MS with MS > 0", spec);
    if (key == "ttft" || key == "time_to_first_token")
      slo.ttft_ms = ms;
    else if (key == "itl" || key == "tpot" || key == "inter_token_latency")
      slo.itl_ms = ms;
    else if (key == "e2e" || key == "e2el" || key == "request_latency")
      slo.e2e_ms = ms;
    else
      return Status::InvalidArgument("--goodput '{}': unknown metric '{}' (ttft, itl or e2e)", spec, key);
  }
  return slo;
}

Summary summarize_level(const std::vector<Record>& records, const Slo& slo) {
  Summary s;
  std::vector<double> ttft, itl, tpot, e2e;
  double start = std::numeric_limits<double>::infinity(), end = 0;
  const bool with_slo = slo.ttft_ms || slo.itl_ms || slo.e2e_ms;
  for (const auto& r : records) {
    start = std::min(start, r.sent);
    if (!r.error.empty() || r.done < 0) {
      ++s.failed;
      end = std::max(end, r.done);
      continue;
    }
    ++s.completed;
    end = std::max(end, r.done);
    s.input_tokens += r.input_tokens;
    s.output_tokens += r.output_tokens;
    const double e = (r.done - r.sent) * 1e3;
    e2e.push_back(e);
    std::optional<double> t, per_token;
    if (r.first_token >= 0) {
      t = (r.first_token - r.sent) * 1e3;
      ttft.push_back(*t);
    }
    for (size_t i = 1; i < r.chunk_times.size(); ++i) itl.push_back((r.chunk_times[i] - r.chunk_times[i - 1]) * 1e3);
    if (r.output_tokens > 1 && r.first_token >= 0) {
      per_token = (r.done - r.first_token) * 1e3 / static_cast<double>(r.output_tokens - 1);
      tpot.push_back(*per_token);
    }
    if (with_slo) {
      bool good = true;
      if (slo.ttft_ms) good = good && t && *t <= *slo.ttft_ms;
      if (slo.itl_ms) good = good && (!per_token || *per_token <= *slo.itl_ms);
      if (slo.e2e_ms) good = good && e <= *slo.e2e_ms;
      s.good += good;
    }
  }
  s.duration_s = records.empty() || !(end > start) ? 0 : end - start;
  if (s.duration_s > 0) {
    s.request_throughput = static_cast<double>(s.completed) / s.duration_s;
    s.output_throughput = static_cast<double>(s.output_tokens) / s.duration_s;
    s.total_token_throughput = static_cast<double>(s.input_tokens + s.output_tokens) / s.duration_s;
    if (with_slo) s.goodput = static_cast<double>(s.good) / s.duration_s;
  } else if (with_slo) {
    s.goodput = 0;
  }
  s.ttft_ms = summarize(ttft);
  s.itl_ms = summarize(itl);
  s.tpot_ms = summarize(tpot);
  s.e2e_ms = summarize(e2e);
  return s;
}

}  // namespace gpuopt::cli::llmperf
