#include "bench/svg.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace gpuopt::bench {

std::string xml_escape(const std::string& s) {
  std::string o;
  o.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&':
        o += "&amp;";
        break;
      case '<':
        o += "&lt;";
        break;
      case '>':
        o += "&gt;";
        break;
      case '"':
        o += "&quot;";
        break;
      default:
        o += c;
    }
  }
  return o;
}

std::vector<double> axis_ticks(double lo, double hi, bool log) {
  std::vector<double> t;
  if (!(hi > lo)) return {lo};
  if (log) {
    const int a = static_cast<int>(std::floor(std::log10(lo) + 1e-9));
    const int b = static_cast<int>(std::ceil(std::log10(hi) - 1e-9));
    // Few decades: add 2 and 5 so the axis has enough labels; powers of two read better for
    // intensity axes, but decades are what log plots conventionally show.
    for (int e = a; e <= b; ++e) {
      for (double m : (b - a <= 2 ? std::vector<double>{1, 2, 5} : std::vector<double>{1})) {
        const double v = m * std::pow(10.0, e);
        if (v >= lo * (1 - 1e-9) && v <= hi * (1 + 1e-9)) t.push_back(v);
      }
    }
    return t;
  }
  const double raw = (hi - lo) / 6;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (m * mag >= raw) {
      step = m * mag;
      break;
    }
  }
  for (double v = std::ceil(lo / step) * step; v <= hi + step * 1e-9; v += step)
    t.push_back(std::fabs(v) < step * 1e-9 ? 0 : v);
  return t;
}

std::string tick_label(double v) {
  if (v > 0 && v < 1) {
    const double inv = 1 / v;
    if (std::fabs(inv - std::round(inv)) < 1e-9) return fmt::format("1/{:.0f}", inv);
  }
  if (std::fabs(v) >= 1e6) return fmt::format("{:.0e}", v);
  if (std::fabs(v - std::round(v)) < 1e-9) return fmt::format("{:.0f}", v);
  return fmt::format("{:.3g}", v);
}

namespace {

struct Axis {
  double lo = 0, hi = 1;
  bool log = false;
  double px0 = 0, px1 = 1;  // pixel range
  double map(double v) const {
    const double t = log ? (std::log10(v) - std::log10(lo)) / (std::log10(hi) - std::log10(lo)) : (v - lo) / (hi - lo);
    return px0 + t * (px1 - px0);
  }
  bool valid(double v) const { return std::isfinite(v) && (!log || v > 0); }
};

void extend(Axis& a, double v, bool& any) {
  if (!a.valid(v)) return;
  if (!any) {
    a.lo = a.hi = v;
    any = true;
  }
  a.lo = std::min(a.lo, v);
  a.hi = std::max(a.hi, v);
}

void pad(Axis& a) {
  if (a.log) {
    a.lo = std::pow(10.0, std::floor(std::log10(a.lo)));
    a.hi = std::pow(10.0, std::ceil(std::log10(a.hi)));
    if (a.hi <= a.lo) a.hi = a.lo * 10;
  } else {
    if (a.lo > 0) a.lo = 0;
    const double span = a.hi - a.lo;
    a.hi += span > 0 ? span * 0.08 : 1;
  }
}

}  // namespace

std::string render_svg(const Plot& p) {
  const double left = 80, right = 30, top = 40, bottom = 60;
  Axis ax{0, 1, p.log_x, left, p.width - right};
  Axis ay{0, 1, p.log_y, p.height - bottom, top};
  bool anyx = false, anyy = false;
  for (const auto& s : p.series)
    for (const auto& [x, y] : s.points)
      if (ax.valid(x) && ay.valid(y)) extend(ax, x, anyx), extend(ay, y, anyy);
  for (const auto& l : p.lines) {
    extend(ax, l.x0, anyx), extend(ax, l.x1, anyx);
    extend(ay, l.y0, anyy), extend(ay, l.y1, anyy);
  }
  if (!anyx) ax.lo = ax.log ? 1 : 0, ax.hi = ax.log ? 10 : 1;
  if (!anyy) ay.lo = ay.log ? 1 : 0, ay.hi = ay.log ? 10 : 1;
  pad(ax);
  pad(ay);

  std::string o = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" "
      "font-family=\"sans-serif\" font-size=\"12\">\n",
      p.width, p.height);
  o += fmt::format("<rect x=\"0\" y=\"0\" width=\"{}\" height=\"{}\" fill=\"white\"/>\n", p.width, p.height);
  o += fmt::format("<text class=\"title\" x=\"{}\" y=\"22\" text-anchor=\"middle\" font-size=\"15\">{}</text>\n",
                   p.width / 2, xml_escape(p.title));
  // Grid and ticks.
  for (double v : axis_ticks(ax.lo, ax.hi, ax.log)) {
    const double x = ax.map(v);
    o += fmt::format(
        "<line class=\"grid\" x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{0:.1f}\" y2=\"{2:.1f}\" stroke=\"#ddd\"/>\n", x,
        ay.px0, ay.px1);
    o += fmt::format("<text class=\"xtick\" x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>\n", x,
                     ay.px0 + 18, xml_escape(tick_label(v)));
  }
  for (double v : axis_ticks(ay.lo, ay.hi, ay.log)) {
    const double y = ay.map(v);
    o += fmt::format(
        "<line class=\"grid\" x1=\"{1:.1f}\" y1=\"{0:.1f}\" x2=\"{2:.1f}\" y2=\"{0:.1f}\" stroke=\"#ddd\"/>\n", y,
        ax.px0, ax.px1);
    o += fmt::format("<text class=\"ytick\" x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>\n", ax.px0 - 6,
                     y + 4, xml_escape(tick_label(v)));
  }
  o += fmt::format(
      "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"none\" stroke=\"#333\"/>\n", ax.px0,
      ay.px1, ax.px1 - ax.px0, ay.px0 - ay.px1);
  o += fmt::format("<text class=\"xlabel\" x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\">{}{}</text>\n",
                   (ax.px0 + ax.px1) / 2, p.height - 18, xml_escape(p.x_label), ax.log ? " (log)" : "");
  o += fmt::format(
      "<text class=\"ylabel\" x=\"18\" y=\"{0:.1f}\" text-anchor=\"middle\" transform=\"rotate(-90 18 "
      "{0:.1f})\">{1}{2}</text>\n",
      (ay.px0 + ay.px1) / 2, xml_escape(p.y_label), ay.log ? " (log)" : "");
  // Reference lines.
  for (const auto& l : p.lines) {
    if (!ax.valid(l.x0) || !ax.valid(l.x1) || !ay.valid(l.y0) || !ay.valid(l.y1)) continue;
    o += fmt::format(
        "<line class=\"ceiling\" data-label=\"{}\" x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" "
        "stroke=\"{}\" "
        "stroke-width=\"2\"{}/>\n",
        xml_escape(l.label), ax.map(l.x0), ay.map(l.y0), ax.map(l.x1), ay.map(l.y1), xml_escape(l.color),
        l.dashed ? " stroke-dasharray=\"6 4\"" : "");
  }
  // Series and legend.
  int legend = 0;
  for (const auto& s : p.series) {
    std::string poly;
    std::string dots;
    for (const auto& [x, y] : s.points) {
      if (!ax.valid(x) || !ay.valid(y)) continue;
      poly += fmt::format("{:.1f},{:.1f} ", ax.map(x), ay.map(y));
      dots += fmt::format(
          "<circle class=\"point\" data-series=\"{}\" data-x=\"{:.6g}\" data-y=\"{:.6g}\" cx=\"{:.1f}\" "
          "cy=\"{:.1f}\" r=\"3.5\" fill=\"{}\"/>\n",
          xml_escape(s.name), x, y, ax.map(x), ay.map(y), xml_escape(s.color));
    }
    if (s.connect && !poly.empty())
      o += fmt::format("<polyline class=\"series\" points=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"1.5\"/>\n",
                       poly, xml_escape(s.color));
    o += dots;
    const double lx = ax.px0 + 12, ly = ay.px1 + 16 + 16 * legend++;
    o += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"4\" fill=\"{}\"/>\n", lx, ly - 4, xml_escape(s.color));
    o += fmt::format("<text class=\"legend\" x=\"{:.1f}\" y=\"{:.1f}\">{}</text>\n", lx + 10, ly, xml_escape(s.name));
  }
  for (const auto& lb : p.labels) {
    if (!ax.valid(lb.x) || !ay.valid(lb.y)) continue;
    o += fmt::format("<text class=\"label\" x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"12\">{}</text>\n", ax.map(lb.x) + 6,
                     ay.map(lb.y) - 8, xml_escape(lb.text));
  }
  o += "</svg>\n";
  return o;
}

}  // namespace gpuopt::bench
