// Summary statistics of repeated timings: the median is what every benchmark reports (robust to
// the odd slow repetition); min and max show the spread.
#pragma once

#include <vector>

namespace gpuopt::bench {

struct TimingStats {
  double median = 0, min = 0, max = 0;
  int count = 0;
};

// Empty input gives all zeros.
TimingStats summarize(std::vector<double> samples);

// Point where `b` first beats `a` (b[i] < a[i]) and stays ahead for every later x; -1 if never.
// Used by cpu-vs-gpu: x = matrix size, a = CPU time, b = GPU time.
int crossover_index(const std::vector<double>& a, const std::vector<double>& b);

}  // namespace gpuopt::bench
