// A small SVG writer for the benchmark plots: x/y axes (linear or log), point series, straight
// reference lines (ceilings) and text labels. Plain text out, no dependencies, so the report
// page works offline and the tests can parse it.
//
//   Plot p{"Roofline f32", "FLOP/byte", "GFLOP/s", /*log_x=*/true, /*log_y=*/true};
//   p.series.push_back({"f32", {{0.125, 480}, {1, 3900}}, "#1f77b4"});
//   p.lines.push_back({"memory 4.0 TB/s", 0.125, 500, 16, 64000, "#d62728", true});
//   std::string svg = render_svg(p);
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace gpuopt::bench {

struct PlotSeries {
  std::string name;
  std::vector<std::pair<double, double>> points;  // (x, y) in data units
  std::string color = "#1f77b4";
  bool connect = true;  // draw a polyline through the points too
};

// A straight segment in data coordinates (on log-log axes a bandwidth ceiling y = B*x is one).
struct PlotLine {
  std::string label;
  double x0 = 0, y0 = 0, x1 = 0, y1 = 0;
  std::string color = "#d62728";
  bool dashed = false;
};

struct PlotLabel {
  double x = 0, y = 0;  // data coordinates of the anchor
  std::string text;
};

struct Plot {
  std::string title, x_label, y_label;
  bool log_x = false, log_y = false;
  std::vector<PlotSeries> series;
  std::vector<PlotLine> lines;
  std::vector<PlotLabel> labels;
  int width = 760, height = 480;
};

// Escapes &, <, >, " for text and attribute values.
std::string xml_escape(const std::string& s);
// Tick values for an axis covering [lo, hi]: powers of ten on log axes, 1-2-5 steps otherwise.
std::vector<double> axis_ticks(double lo, double hi, bool log);
// Tick text: "1/8" style fractions for log axes below 1 when exact, else compact numbers.
std::string tick_label(double v);

// Every point is a <circle class="point" data-series=".." data-x=".." data-y="..">, every
// reference line a <line class="ceiling" data-label="..">, every label a <text class="label">.
// Non-positive values on a log axis are dropped.
std::string render_svg(const Plot& p);

}  // namespace gpuopt::bench
