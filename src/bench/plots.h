// Turns benchmark sections into plots (svg.h) and fits the empirical roofline.
#pragma once

#include "bench/result.h"
#include "bench/svg.h"

#include <vector>

namespace gpuopt::bench {

struct RooflinePoint {
  double intensity = 0;    // FLOP/byte
  double flops_per_s = 0;  // achieved
};

// The two measured ceilings: the highest bandwidth any point reached (its FLOP/s over its
// intensity) and the highest FLOP/s; the ridge is where they meet (peak / bandwidth).
struct RooflineCeilings {
  double bandwidth = 0;  // bytes/s
  double peak = 0;       // FLOP/s
  double ridge() const { return bandwidth > 0 ? peak / bandwidth : 0; }
};
RooflineCeilings fit_roofline(const std::vector<RooflinePoint>& points);

// Roofline section (tests "roofline_<type>", x = intensity, value in TFLOP/s; extra holds the
// fitted ceilings per type): log-log axes, points, both ceilings per type, ridge labelled.
Plot roofline_plot(const Section& s);
// Memory section: GB/s against transfer size (log x), one series per test.
Plot bandwidth_plot(const Section& s);
// Compute section's GEMM rows: TFLOP/s against n, one series per type.
Plot gemm_plot(const Section& s);
// cpu-vs-gpu: milliseconds against n on log-log axes, one series per side.
Plot cpu_gpu_plot(const Section& s);

}  // namespace gpuopt::bench
