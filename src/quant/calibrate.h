// Activation statistics for int8 calibration: a 2048-bin histogram of |x| per tensor and the four
// ways of choosing a clipping range (amax) from it (docs/quantization.md):
//  - minmax:     the largest |x| seen;
//  - percentile: the right edge of the bin where the cumulative count reaches p percent;
//  - entropy:    TensorRT's entropy calibrator: the threshold i (128..2048 bins) whose 128-level
//                quantization Q of the histogram is closest to the clipped histogram P in KL(P||Q);
//  - mse:        the threshold minimizing the mean squared int8 quantize-dequantize error of the
//                bin centres, weighted by their counts.
// Scales are symmetric int8: scale = amax / 127, zero point 0.
//
//   Histogram h;  h.add(x.data<float>(), x.numel());   // any number of batches
//   double amax = choose_amax(h, CalibMethod::kEntropy);
#pragma once

#include "core/status.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace gpuopt::quant {

enum class CalibMethod { kMinMax, kPercentile, kEntropy, kMse };

Result<CalibMethod> parse_calib_method(std::string_view name);  // "minmax", "percentile", ...
std::string_view calib_method_name(CalibMethod m);

constexpr int kHistBins = 2048;

// Histogram of |x| over [0, range) in kHistBins equal bins. The first batch with a non-zero
// value sets the range to its largest |x|; a later, larger value doubles the range (merging
// bins in pairs) until it fits, so the bin count stays kHistBins.
class Histogram {
 public:
  void add(const float* x, int64_t n);
  double max_abs() const { return max_abs_; }
  double range() const { return range_; }
  double bin_width() const { return range_ / kHistBins; }
  uint64_t total() const { return total_; }
  const std::vector<double>& counts() const { return counts_; }
  // Test hook: a histogram with given counts over [0, range).
  static Histogram from_counts(std::vector<double> counts, double range, double max_abs);

 private:
  std::vector<double> counts_ = std::vector<double>(kHistBins, 0.0);
  double range_ = 0;
  double max_abs_ = 0;
  uint64_t total_ = 0;
};

struct CalibParams {
  double percentile = 99.99;  // for kPercentile, in (0, 100]
};

// The clipping range the method picks (0 when the tensor was all zeros).
double choose_amax(const Histogram& h, CalibMethod m, const CalibParams& p = {});
// Each method on the raw bins (what the NumPy oracle in tests reimplements): `counts` over
// bins of width `w`. Entropy and MSE search thresholds of 128..counts.size() bins.
double amax_percentile(const std::vector<double>& counts, double w, double percentile);
double amax_entropy(const std::vector<double>& counts, double w);
double amax_mse(const std::vector<double>& counts, double w);
// Share of the histogram's values above `amax` (they saturate at +-127), from the bins.
double saturation(const Histogram& h, double amax);

inline float int8_scale(double amax) { return amax > 0 ? static_cast<float>(amax / 127.0) : 1.0f; }

}  // namespace gpuopt::quant
