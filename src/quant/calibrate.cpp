// Histogram collection and the four amax choices (calibrate.h; the algorithms are documented in
// docs/quantization.md and reimplemented in NumPy by tests/python/test_quantize.py).
#include "quant/calibrate.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace gpuopt::quant {

Result<CalibMethod> parse_calib_method(std::string_view name) {
  if (name == "minmax") return CalibMethod::kMinMax;
  if (name == "percentile") return CalibMethod::kPercentile;
  if (name == "entropy") return CalibMethod::kEntropy;
  if (name == "mse") return CalibMethod::kMse;
  return Status::InvalidArgument("calibration method '{}' is not one of minmax, percentile, entropy, mse", name);
}

std::string_view calib_method_name(CalibMethod m) {
  switch (m) {
    case CalibMethod::kMinMax: return "minmax";
    case CalibMethod::kPercentile: return "percentile";
    case CalibMethod::kEntropy: return "entropy";
    case CalibMethod::kMse: return "mse";
  }
  return "?";
}

void Histogram::add(const float* x, int64_t n) {
  double m = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double a = std::fabs(static_cast<double>(x[i]));
    if (std::isfinite(a)) m = std::max(m, a);
  }
  max_abs_ = std::max(max_abs_, m);
  if (range_ == 0 && m > 0) range_ = m;
  while (range_ > 0 && m > range_) {  // double the range: merge bins in pairs
    for (int k = 0; k < kHistBins / 2; ++k) counts_[k] = counts_[2 * k] + counts_[2 * k + 1];
    std::fill(counts_.begin() + kHistBins / 2, counts_.end(), 0.0);
    range_ *= 2;
  }
  const double inv_w = range_ > 0 ? kHistBins / range_ : 0;
  for (int64_t i = 0; i < n; ++i) {
    const double a = std::fabs(static_cast<double>(x[i]));
    if (!std::isfinite(a)) continue;
    const int b = std::min(static_cast<int>(a * inv_w), kHistBins - 1);
    counts_[static_cast<size_t>(b)] += 1;
    ++total_;
  }
}

Histogram Histogram::from_counts(std::vector<double> counts, double range, double max_abs) {
  Histogram h;
  h.counts_ = std::move(counts);
  h.range_ = range;
  h.max_abs_ = max_abs;
  double t = 0;
  for (double c : h.counts_) t += c;
  h.total_ = static_cast<uint64_t>(t);
  return h;
}

double amax_percentile(const std::vector<double>& counts, double w, double percentile) {
  double total = 0;
  for (double c : counts) total += c;
  if (total <= 0) return 0;
  double cum = 0;
  for (size_t j = 0; j < counts.size(); ++j) {
    cum += counts[j];
    if (cum / total >= percentile / 100.0) return static_cast<double>(j + 1) * w;
  }
  return static_cast<double>(counts.size()) * w;
}

double amax_entropy(const std::vector<double>& hist, double w) {
  constexpr int kLevels = 128;
  const int n = static_cast<int>(hist.size());
  if (n <= kLevels) return n * w;
  // Bin 0 counts as bin 1, as NVIDIA's pytorch-quantization does: the exact zeros of a Relu's
  // output (half of its values) would otherwise dominate P, and Q spreading them over level 0's
  // bins makes every wide threshold look bad (entropy then clipped a tenth of some layers).
  std::vector<double> counts = hist;
  counts[0] = counts[1];
  std::vector<double> suffix(static_cast<size_t>(n) + 1, 0.0);  // suffix[i] = sum counts[i:]
  for (int j = n - 1; j >= 0; --j) suffix[j] = suffix[j + 1] + counts[j];
  const double total = suffix[0];
  if (total <= 0) return 0;
  double best = std::numeric_limits<double>::infinity();
  int best_i = n;
  std::vector<double> level_sum(kLevels), level_nonzero(kLevels);
  for (int i = kLevels; i <= n; ++i) {
    std::fill(level_sum.begin(), level_sum.end(), 0.0);
    std::fill(level_nonzero.begin(), level_nonzero.end(), 0.0);
    for (int j = 0; j < i; ++j) {
      const int l = static_cast<int>(static_cast<int64_t>(j) * kLevels / i);
      level_sum[l] += counts[j];
      if (counts[j] != 0) level_nonzero[l] += 1;
    }
    const double q_total = total - suffix[i];  // sum of Q (= sum of counts[:i])
    double kl = 0;
    for (int j = 0; j < i && std::isfinite(kl); ++j) {
      const double p = (counts[j] + (j == i - 1 ? suffix[i] : 0.0)) / total;
      if (p <= 0) continue;
      const int l = static_cast<int>(static_cast<int64_t>(j) * kLevels / i);
      const double q = counts[j] != 0 && q_total > 0 ? level_sum[l] / level_nonzero[l] / q_total : 0.0;
      kl = q > 0 ? kl + p * std::log(p / q) : std::numeric_limits<double>::infinity();
    }
    if (kl <= best) {  // ties: the larger threshold, as TensorRT's calibrator
      best = kl;
      best_i = i;
    }
  }
  return best_i * w;
}

double amax_mse(const std::vector<double>& counts, double w) {
  const int n = static_cast<int>(counts.size());
  const int start = std::min(128, n);
  double best = std::numeric_limits<double>::infinity();
  int best_i = n;
  for (int i = std::max(start, 1); i <= n; ++i) {
    const double amax = i * w, s = amax / 127.0;
    double err = 0;
    for (int j = 0; j < n; ++j) {
      if (counts[j] == 0) continue;
      const double c = (j + 0.5) * w;
      const double q = std::clamp(std::nearbyint(c / s), -127.0, 127.0) * s;
      err += (q - c) * (q - c) * counts[j];
    }
    if (err < best) {
      best = err;
      best_i = i;
    }
  }
  return best_i * w;
}

double choose_amax(const Histogram& h, CalibMethod m, const CalibParams& p) {
  if (h.max_abs() <= 0) return 0;
  double a = h.max_abs();
  switch (m) {
    case CalibMethod::kMinMax: return a;
    case CalibMethod::kPercentile: a = amax_percentile(h.counts(), h.bin_width(), p.percentile); break;
    case CalibMethod::kEntropy: a = amax_entropy(h.counts(), h.bin_width()); break;
    case CalibMethod::kMse: a = amax_mse(h.counts(), h.bin_width()); break;
  }
  return std::min(a, h.max_abs());
}

double saturation(const Histogram& h, double amax) {
  if (h.total() == 0 || amax >= h.max_abs()) return 0;
  const double w = h.bin_width();
  double above = 0;
  for (size_t j = 0; j < h.counts().size(); ++j)
    if (static_cast<double>(j) * w >= amax) above += h.counts()[j];
  return above / static_cast<double>(h.total());
}

}  // namespace gpuopt::quant
