#include "bench/stats.h"

#include <algorithm>

namespace gpuopt::bench {

TimingStats summarize(std::vector<double> s) {
  TimingStats t;
  if (s.empty()) return t;
  std::sort(s.begin(), s.end());
  const size_t n = s.size();
  t.median = n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
  t.min = s.front();
  t.max = s.back();
  t.count = static_cast<int>(n);
  return t;
}

int crossover_index(const std::vector<double>& a, const std::vector<double>& b) {
  const size_t n = std::min(a.size(), b.size());
  int idx = -1;
  for (size_t i = n; i-- > 0;) {
    if (b[i] < a[i])
      idx = static_cast<int>(i);
    else
      break;
  }
  return idx;
}

}  // namespace gpuopt::bench
