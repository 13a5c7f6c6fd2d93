// gpuopt perf's open-loop arrivals: constant intervals, or a Poisson process (exponential
// intervals: mean 1/rate, standard deviation equal to the mean, memoryless median at ln 2/rate).
#include "cli/perf_data.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

namespace gpuopt::cli {
namespace {

std::vector<double> intervals(bool poisson, double rate, int n) {
  const auto t0 = ArrivalSchedule::Clock::now();
  ArrivalSchedule s(rate, poisson, t0, 7);
  std::vector<double> v;
  auto prev = s.next();
  EXPECT_EQ(prev, t0);  // the first request goes at once
  for (int i = 0; i < n; ++i) {
    const auto t = s.next();
    v.push_back(std::chrono::duration<double>(t - prev).count());
    prev = t;
  }
  return v;
}

TEST(PerfArrivals, ConstantIntervals) {
  for (double x : intervals(false, 250, 1000)) EXPECT_NEAR(x, 0.004, 1e-8);
}

TEST(PerfArrivals, PoissonIntervals) {
  const int n = 40000;
  std::vector<double> v = intervals(true, 1000, n);
  double mean = 0;
  for (double x : v) mean += x;
  mean /= n;
  double var = 0;
  for (double x : v) var += (x - mean) * (x - mean);
  const double sd = std::sqrt(var / (n - 1));
  EXPECT_NEAR(mean, 1e-3, 0.03e-3);
  EXPECT_NEAR(sd / mean, 1.0, 0.03);
  std::sort(v.begin(), v.end());
  EXPECT_NEAR(v[n / 2], std::log(2.0) * 1e-3, 0.04e-3);
  EXPECT_GE(v.front(), 0.0);
}

}  // namespace
}  // namespace gpuopt::cli
