#include "bench/plots.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

namespace gpuopt::bench {

namespace {
const char* kColors[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#17becf"};

// Groups measurements by test name (keeping first-seen order) into series of (x, f(m)).
template <typename F>
std::vector<PlotSeries> group_series(const Section& s, F y_of, bool (*keep)(const Measurement&)) {
  std::vector<PlotSeries> out;
  std::map<std::string, size_t> idx;
  for (const auto& m : s.results) {
    if (keep && !keep(m)) continue;
    auto it = idx.find(m.test);
    if (it == idx.end()) {
      it = idx.emplace(m.test, out.size()).first;
      PlotSeries ps;
      ps.name = m.test;
      ps.color = kColors[out.size() % std::size(kColors)];
      out.push_back(ps);
    }
    out[it->second].points.emplace_back(m.x, y_of(m));
  }
  return out;
}
}  // namespace

RooflineCeilings fit_roofline(const std::vector<RooflinePoint>& points) {
  RooflineCeilings c;
  for (const auto& p : points) {
    if (p.intensity <= 0 || p.flops_per_s <= 0) continue;
    c.bandwidth = std::max(c.bandwidth, p.flops_per_s / p.intensity);
    c.peak = std::max(c.peak, p.flops_per_s);
  }
  return c;
}

Plot roofline_plot(const Section& s) {
  Plot p;
  p.title = "Empirical roofline";
  p.x_label = "arithmetic intensity, FLOP/byte";
  p.y_label = "GFLOP/s";
  p.log_x = p.log_y = true;
  p.series = group_series(
      s, [](const Measurement& m) { return m.value * 1e3; }, nullptr);
  double xmin = 1e30, xmax = 0;
  for (const auto& m : s.results) xmin = std::min(xmin, m.x), xmax = std::max(xmax, m.x);
  if (xmax <= 0) return p;
  for (size_t i = 0; i < p.series.size(); ++i) {
    const auto& name = p.series[i].name;
    if (!s.extra.contains("ceilings") || !s.extra["ceilings"].contains(name)) continue;
    const auto& c = s.extra["ceilings"][name];
    const double bw = c.value("bandwidth_GBps", 0.0), peak = c.value("peak_GFLOPs", 0.0);
    if (bw <= 0 || peak <= 0) continue;
    const double ridge = peak / bw;
    const std::string color = p.series[i].color;
    p.lines.push_back(
        {fmt::format("{} memory ceiling {:.0f} GB/s", name, bw), xmin, bw * xmin, ridge, peak, color, true});
    p.lines.push_back({fmt::format("{} compute ceiling {:.0f} GFLOP/s", name, peak), ridge, peak, std::max(xmax, ridge),
                       peak, color, true});
    p.labels.push_back(
        {ridge, peak,
         fmt::format("{} ridge {:.1f} FLOP/B ({:.0f} GB/s, {:.1f} TFLOP/s)", name, ridge, bw, peak / 1e3)});
  }
  return p;
}

Plot bandwidth_plot(const Section& s) {
  Plot p;
  p.title = "Device memory bandwidth (bytes read + written)";
  p.x_label = "buffer size, bytes";
  p.y_label = "GB/s";
  p.log_x = true;
  p.series = group_series(
      s, [](const Measurement& m) { return m.value; },
      [](const Measurement& m) { return m.unit == "GB/s" && m.x > 0; });
  return p;
}

Plot gemm_plot(const Section& s) {
  Plot p;
  p.title = "cuBLASLt matrix multiply, square n x n x n";
  p.x_label = std::string("n");  // not `= "n"`: GCC 12 warns -Wrestrict on it (GCC bug 105329)
  p.y_label = "TFLOP/s (TOP/s for int8)";
  p.log_x = true;
  p.series = group_series(
      s, [](const Measurement& m) { return m.value; },
      [](const Measurement& m) { return m.test.rfind("gemm_", 0) == 0; });
  return p;
}

Plot cpu_gpu_plot(const Section& s) {
  Plot p;
  p.title = "Matrix multiply time, CPU (OpenBLAS) vs GPU (cuBLASLt)";
  p.x_label = std::string("n");
  p.y_label = std::string("ms");
  p.log_x = p.log_y = true;
  p.series = group_series(
      s, [](const Measurement& m) { return m.seconds.median * 1e3; },
      [](const Measurement& m) { return m.unit == "GFLOP/s"; });
  return p;
}

}  // namespace gpuopt::bench
