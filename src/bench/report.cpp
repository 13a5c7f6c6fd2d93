#include "bench/report.h"

#include "bench/plots.h"
#include "bench/svg.h"
#include "core/table.h"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>

namespace gpuopt::bench {

const std::vector<Anchor>& h200_anchors() {
  static const std::vector<Anchor> a = {
      {"D2D copy", 4232.8, "GB/s", 0.95},      {"H2D pinned", 55.42, "GB/s", 52.0 / 55.42},
      {"D2H pinned", 55.34, "GB/s", 0},        {"H2D pageable", 9.30, "GB/s", 0},
      {"GEMM bf16", 773.6, "TFLOP/s", 0.95},   {"GEMM f16", 741.5, "TFLOP/s", 0.95},
      {"GEMM tf32", 395.3, "TFLOP/s", 0},      {"GEMM f32", 50.48, "TFLOP/s", 0},
      {"GEMM fp8 e4m3", 1414.8, "TFLOP/s", 0}, {"GEMM int8", 946.9, "TOP/s", 0},
  };
  return a;
}

namespace {

// Headline -> which measurements feed it.
struct Feed {
  const char* figure;
  const char* section;
  const char* test_prefix;
  const char* unit;
};
constexpr Feed kFeeds[] = {
    {"D2D copy", "memory", "d2d_", "GB/s"},
    {"H2D pinned", "memory", "h2d_pinned", "GB/s"},
    {"D2H pinned", "memory", "d2h_pinned", "GB/s"},
    {"H2D pageable", "memory", "h2d_pageable", "GB/s"},
    {"GEMM bf16", "compute", "gemm_bf16", "TFLOP/s"},
    {"GEMM f16", "compute", "gemm_f16", "TFLOP/s"},
    {"GEMM tf32", "compute", "gemm_tf32", "TFLOP/s"},
    {"GEMM f32", "compute", "gemm_f32", "TFLOP/s"},
    {"GEMM fp8 e4m3", "compute", "gemm_fp8", "TFLOP/s"},
    {"GEMM int8", "compute", "gemm_int8", "TOP/s"},
};

bool starts_with(const std::string& s, const char* p) {
  return s.rfind(p, 0) == 0;
}

}  // namespace

std::vector<SummaryRow> summarize(const std::vector<Section>& sections, const std::string& device_name) {
  const bool h200 = device_name.find("H200") != std::string::npos;
  std::vector<SummaryRow> rows;
  for (const auto& f : kFeeds) {
    SummaryRow r;
    r.figure = f.figure;
    r.unit = f.unit;
    for (const auto& s : sections) {
      if (s.name != f.section || s.skipped) continue;
      for (const auto& m : s.results) {
        if (!starts_with(m.test, f.test_prefix) || m.unit != f.unit) continue;
        if (!r.measured || m.value > *r.measured) {
          r.measured = m.value;
          r.where = m.test + " " + m.param;
        }
      }
    }
    if (h200) {
      for (const auto& a : h200_anchors()) {
        if (r.figure != a.figure) continue;
        r.anchor = a.value;
        if (a.goal_fraction > 0) r.goal = a.value * a.goal_fraction;
      }
    }
    if (r.measured || r.anchor) rows.push_back(r);
  }
  return rows;
}

std::string render_summary_table(const std::vector<SummaryRow>& rows) {
  Table t({"figure", "measured", "unit", "PyTorch anchor", "% of anchor", "goal", "met", "best at"}, "Summary");
  for (const auto& r : rows) {
    std::string pct = "-", met = "-";
    if (r.measured && r.anchor) pct = fmt::format("{:.1f}%", 100 * *r.measured / *r.anchor);
    if (r.goal && r.measured) met = *r.measured >= *r.goal ? "yes" : "NO";
    t.add({r.figure, r.measured ? format_value(*r.measured) : "n/a", r.unit, r.anchor ? format_value(*r.anchor) : "-",
           pct, r.goal ? format_value(*r.goal) : "-", met, r.where});
  }
  std::string out = t.render();
  if (rows.empty()) out += "  no headline figure measured (no GPU)\n";
  return out;
}

nlohmann::json summary_to_json(const std::vector<SummaryRow>& rows) {
  nlohmann::json j = nlohmann::json::array();
  auto opt = [](const std::optional<double>& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); };
  for (const auto& r : rows) {
    nlohmann::json e = {{"figure", r.figure}, {"measured", opt(r.measured)}, {"unit", r.unit},
                        {"best_at", r.where}, {"anchor", opt(r.anchor)},     {"goal", opt(r.goal)}};
    e["percent_of_anchor"] =
        r.measured && r.anchor ? nlohmann::json(100 * *r.measured / *r.anchor) : nlohmann::json(nullptr);
    e["goal_met"] = r.goal && r.measured ? nlohmann::json(*r.measured >= *r.goal) : nlohmann::json(nullptr);
    j.push_back(e);
  }
  return j;
}

namespace {

std::string html_table(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows,
                       const std::string& cls) {
  std::string o = "<table class=\"" + cls + "\">\n<tr>";
  for (const auto& h : header) o += "<th>" + xml_escape(h) + "</th>";
  o += "</tr>\n";
  for (const auto& r : rows) {
    o += "<tr>";
    for (const auto& c : r) o += "<td>" + xml_escape(c) + "</td>";
    o += "</tr>\n";
  }
  return o + "</table>\n";
}

}  // namespace

std::string render_html(const std::vector<Section>& sections, const std::vector<SummaryRow>& summary,
                        const nlohmann::json& device, const std::vector<std::pair<std::string, std::string>>& svgs) {
  std::string o =
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>gpuopt bench report</title>\n"
      "<style>body{font-family:sans-serif;margin:2em;max-width:1100px}table{border-collapse:collapse;margin:1em 0}"
      "td,th{border:1px solid #ccc;padding:3px 8px;font-size:13px}td{text-align:right}td:first-child{text-align:left}"
      ".no{color:#b00;font-weight:bold}.skipped{color:#777}</style>\n</head>\n<body>\n<h1>gpuopt bench report</h1>\n";
  o += "<h2>Device</h2>\n<pre class=\"device\">" + xml_escape(device.dump(2)) + "</pre>\n";
  o += "<h2 id=\"summary\">Summary</h2>\n";
  std::vector<std::vector<std::string>> srows;
  for (const auto& r : summary) {
    srows.push_back({r.figure, r.measured ? format_value(*r.measured) : "n/a", r.unit,
                     r.anchor ? format_value(*r.anchor) : "-",
                     r.measured && r.anchor ? fmt::format("{:.1f}%", 100 * *r.measured / *r.anchor) : "-",
                     r.goal ? format_value(*r.goal) : "-",
                     r.goal && r.measured ? (*r.measured >= *r.goal ? "yes" : "NO") : "-", r.where});
  }
  o += html_table({"figure", "measured", "unit", "PyTorch anchor", "% of anchor", "goal", "met", "best at"}, srows,
                  "summary");
  for (const auto& s : sections) {
    o += fmt::format("<h2 id=\"{}\">{}</h2>\n", xml_escape(s.name), xml_escape(s.title));
    if (s.skipped) {
      o += "<p class=\"skipped\">skipped: " + xml_escape(*s.skipped) + "</p>\n";
      continue;
    }
    for (const auto& n : s.notes) o += "<p class=\"note\">" + xml_escape(n) + "</p>\n";
    for (const auto& [name, svg] : svgs)
      if (name == s.name) o += "<figure>\n" + svg + "</figure>\n";
    std::vector<std::vector<std::string>> rows;
    for (const auto& m : s.results) {
      const auto pct = percent_of_reference(m);
      rows.push_back({m.test, m.param, format_duration_us(m.seconds.median * 1e6), format_value(m.value), m.unit,
                      m.reference ? format_value(*m.reference) + " " + m.reference_name : "-",
                      pct ? fmt::format("{:.1f}%", *pct) : "-", m.note, format_optional(m.telemetry.sm_clock_mhz),
                      format_optional(m.telemetry.temperature_c), format_optional(m.telemetry.power_w)});
    }
    o += html_table(
        {"test", "param", "time", "achieved", "unit", "reference", "%", "note", "SM MHz", "temp C", "power W"}, rows,
        "results");
  }
  return o + "</body>\n</html>\n";
}

Status write_report(const std::string& dir, const std::vector<Section>& sections, const nlohmann::json& device) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Status::InvalidArgument("--report '{}': cannot create the directory: {}", dir, ec.message());
  auto write = [&](const std::string& name, const std::string& text) -> Status {
    const std::string path = (std::filesystem::path(dir) / name).string();
    std::ofstream f(path);
    f << text;
    f.close();
    if (!f) return Status::Internal("cannot write '{}'", path);
    return Status::Ok();
  };
  const std::string device_name = device.value("name", "");
  const auto summary = summarize(sections, device_name);
  std::vector<std::pair<std::string, std::string>> svgs;  // (section, svg)
  for (const auto& s : sections) {
    if (s.skipped || s.results.empty()) continue;
    std::vector<std::pair<std::string, Plot>> plots;
    if (s.name == "memory") plots.push_back({"bandwidth.svg", bandwidth_plot(s)});
    if (s.name == "compute") plots.push_back({"gemm.svg", gemm_plot(s)});
    if (s.name == "roofline") plots.push_back({"roofline.svg", roofline_plot(s)});
    if (s.name == "cpu_vs_gpu") plots.push_back({"cpu_vs_gpu.svg", cpu_gpu_plot(s)});
    for (auto& [file, plot] : plots) {
      if (plot.series.empty()) continue;
      const std::string svg = render_svg(plot);
      GPUOPT_RETURN_IF_ERROR(write(file, svg));
      svgs.emplace_back(s.name, svg);
    }
  }
  nlohmann::json j = {{"device", device}, {"summary", summary_to_json(summary)}, {"sections", nlohmann::json::array()}};
  for (const auto& s : sections) j["sections"].push_back(section_to_json(s));
  GPUOPT_RETURN_IF_ERROR(write("bench.json", j.dump(2) + "\n"));
  GPUOPT_RETURN_IF_ERROR(write("index.html", render_html(sections, summary, device, svgs)));
  return Status::Ok();
}

}  // namespace gpuopt::bench
