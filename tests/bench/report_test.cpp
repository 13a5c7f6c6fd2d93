// The report writers: table, JSON, SVG and HTML are parsed back and checked for the elements
// and numbers they must carry.
#include "bench/report.h"
#include "bench/plots.h"
#include "bench/result.h"
#include "bench/svg.h"

#include <gtest/gtest.h>
#include <boost/property_tree/ptree.hpp>
#include <boost/property_tree/xml_parser.hpp>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

namespace gpuopt::bench {
namespace {

namespace pt = boost::property_tree;

Measurement row(const std::string& test, double x, double value, const std::string& unit) {
  Measurement m;
  m.test = test;
  m.param = "p" + std::to_string(static_cast<int>(x));
  m.x = x;
  m.value = value;
  m.unit = unit;
  m.seconds = {1e-3, 0.9e-3, 1.2e-3, 10};
  m.work = {0, value * 1e9 * 1e-3};
  return m;
}

Section roofline_section() {
  Section s = make_section("roofline", "Empirical roofline");
  // f32: bandwidth-bound below the ridge at 4 TB/s, flat at 60 TFLOP/s above.
  std::vector<RooflinePoint> pts;
  for (double i : {0.125, 0.25, 1.0, 4.0, 16.0, 64.0, 1024.0}) {
    const double flops = std::min(60e12, i * 4e12) * 0.97;
    s.results.push_back(row("roofline_f32", i, flops / 1e12, "TFLOP/s"));
    pts.push_back({i, flops});
  }
  const RooflineCeilings c = fit_roofline(pts);
  s.extra["ceilings"]["roofline_f32"] = {
      {"bandwidth_GBps", c.bandwidth / 1e9}, {"peak_GFLOPs", c.peak / 1e9}, {"ridge_flop_per_byte", c.ridge()}};
  return s;
}

// All elements named `name` anywhere under `t`, depth first.
void collect(const pt::ptree& t, const std::string& name, std::vector<const pt::ptree*>* out) {
  for (const auto& [k, v] : t) {
    if (k == name) out->push_back(&v);
    collect(v, name, out);
  }
}

TEST(Roofline, FitFindsBothCeilingsAndTheRidge) {
  const RooflineCeilings c = fit_roofline({{0.125, 500e9}, {1, 3.9e12}, {64, 60e12}, {1024, 61e12}, {0, 5}, {2, -1}});
  EXPECT_DOUBLE_EQ(c.bandwidth, 4e12);  // 500 GFLOP/s at 1/8 FLOP/byte
  EXPECT_DOUBLE_EQ(c.peak, 61e12);
  EXPECT_DOUBLE_EQ(c.ridge(), 61e12 / 4e12);
}

TEST(Table, ShowsValuesPercentAndNaTelemetry) {
  Section s = make_section("memory", "Memory bandwidth");
  Measurement m = row("d2d_copy_kernel", 1 << 30, 2400, "GB/s");
  m.reference = 4800;
  m.reference_name = "theoretical";
  m.telemetry.sm_clock_mhz = 1980;
  s.results.push_back(m);
  s.notes.push_back("byte convention: bytes read + bytes written");
  const std::string t = render_table(s);
  EXPECT_NE(t.find("Memory bandwidth"), std::string::npos);
  EXPECT_NE(t.find("d2d_copy_kernel"), std::string::npos);
  EXPECT_NE(t.find("2400"), std::string::npos);
  EXPECT_NE(t.find("50.0%"), std::string::npos);
  EXPECT_NE(t.find("1980"), std::string::npos);
  EXPECT_NE(t.find("n/a"), std::string::npos);  // temperature, power: not read
  EXPECT_NE(t.find("byte convention"), std::string::npos);
  Section k = make_section("compute", "Compute");
  k.skipped = "no CUDA device";
  EXPECT_EQ(render_table(k), "Compute\n  skipped: no CUDA device\n");
}

TEST(Json, SectionRoundTrips) {
  Section s = roofline_section();
  s.results[0].telemetry.power_w = 412.5;
  s.results[0].reference = 0.6;
  s.notes.push_back("a note");
  const nlohmann::json j = section_to_json(s);
  EXPECT_EQ(j["results"].size(), s.results.size());
  EXPECT_EQ(j["results"][0]["telemetry"]["power_w"], 412.5);
  EXPECT_TRUE(j["results"][0]["telemetry"]["sm_clock_mhz"].is_null());
  EXPECT_NEAR(j["results"][0]["percent_of_reference"].get<double>(), 100 * s.results[0].value / 0.6, 1e-9);
  const Section r = section_from_json(nlohmann::json::parse(j.dump()));
  ASSERT_EQ(r.results.size(), s.results.size());
  EXPECT_EQ(r.results[3].value, s.results[3].value);
  EXPECT_EQ(r.results[3].x, s.results[3].x);
  EXPECT_EQ(*r.results[0].telemetry.power_w, 412.5);
  EXPECT_FALSE(r.results[0].telemetry.temperature_c);
  EXPECT_EQ(r.notes, s.notes);
  EXPECT_EQ(r.extra, s.extra);
}

TEST(Svg, RooflinePlotHasPointsCeilingsAndRidge) {
  const Section s = roofline_section();
  const std::string svg = render_svg(roofline_plot(s));
  std::istringstream in(svg);
  pt::ptree tree;
  ASSERT_NO_THROW(pt::read_xml(in, tree)) << svg;  // well-formed XML
  std::vector<const pt::ptree*> circles, lines, texts;
  collect(tree, "circle", &circles);
  collect(tree, "line", &lines);
  collect(tree, "text", &texts);
  std::vector<double> xs, ys;
  for (const auto* c : circles) {
    if (c->get("<xmlattr>.class", "") != "point") continue;
    xs.push_back(c->get<double>("<xmlattr>.data-x"));
    ys.push_back(c->get<double>("<xmlattr>.data-y"));
  }
  ASSERT_EQ(xs.size(), s.results.size());
  for (size_t i = 0; i < xs.size(); ++i) {
    EXPECT_NEAR(xs[i], s.results[i].x, 1e-6 * s.results[i].x);
    EXPECT_NEAR(ys[i], s.results[i].value * 1e3, 1e-5 * ys[i]);  // plotted in GFLOP/s
  }
  int ceilings = 0;
  for (const auto* l : lines)
    if (l->get("<xmlattr>.class", "") == "ceiling") ++ceilings;
  EXPECT_EQ(ceilings, 2);  // memory and compute
  bool ridge = false, log_axes = false;
  const double bw = s.extra["ceilings"]["roofline_f32"]["bandwidth_GBps"];
  const double peak = s.extra["ceilings"]["roofline_f32"]["peak_GFLOPs"];
  for (const auto* t : texts) {
    const std::string text = t->data();
    if (t->get("<xmlattr>.class", "") == "label" && text.find("ridge") != std::string::npos) {
      ridge = true;
      // "roofline_f32 ridge 15.0 FLOP/B (3880 GB/s, 58.2 TFLOP/s)"
      std::smatch m;
      ASSERT_TRUE(std::regex_search(text, m, std::regex(R"(ridge ([0-9.]+) FLOP/B \(([0-9]+) GB/s)"))) << text;
      EXPECT_NEAR(std::stod(m[1]), peak / bw, 0.05);
      EXPECT_NEAR(std::stod(m[2]), bw, 0.5);
    }
    if (t->get("<xmlattr>.class", "") == "xlabel" && text.find("(log)") != std::string::npos) log_axes = true;
  }
  EXPECT_TRUE(ridge);
  EXPECT_TRUE(log_axes);
}

TEST(Svg, TicksAndEscaping) {
  EXPECT_EQ(axis_ticks(0.1, 1000, true), (std::vector<double>{0.1, 1, 10, 100, 1000}));
  EXPECT_EQ(axis_ticks(0, 10, false).front(), 0);
  EXPECT_EQ(tick_label(0.125), "1/8");
  EXPECT_EQ(tick_label(1000), "1000");
  EXPECT_EQ(xml_escape("a<b & \"c\">"), "a&lt;b &amp; &quot;c&quot;&gt;");
  Plot p;
  p.series.push_back({"<evil>", {{1, 1}, {2, 4}}});
  const std::string svg = render_svg(p);
  EXPECT_EQ(svg.find("<evil>"), std::string::npos);
  EXPECT_NE(svg.find("&lt;evil&gt;"), std::string::npos);
  std::istringstream in(svg);
  pt::ptree tree;
  EXPECT_NO_THROW(pt::read_xml(in, tree));
}

std::vector<Section> fake_sections(double d2d, double bf16) {
  Section mem = make_section("memory", "Memory");
  mem.results.push_back(row("d2d_copy_kernel", 1 << 30, d2d, "GB/s"));
  mem.results.push_back(row("d2d_memcpy", 1 << 30, d2d - 100, "GB/s"));
  mem.results.push_back(row("h2d_pinned", 1 << 28, 53.1, "GB/s"));
  Section comp = make_section("compute", "Compute");
  comp.results.push_back(row("gemm_bf16", 8192, bf16, "TFLOP/s"));
  comp.results.push_back(row("gemm_bf16", 16384, bf16 - 10, "TFLOP/s"));
  Section lat = make_section("latency", "Latency");
  lat.skipped = "no CUDA device";
  return {mem, comp, roofline_section(), lat};
}

TEST(Summary, BestFigureAgainstTheH200Anchors) {
  const auto rows = summarize(fake_sections(4100, 750), "NVIDIA H200");
  auto find = [&](const std::string& f) -> const SummaryRow* {
    for (const auto& r : rows)
      if (r.figure == f) return &r;
    return nullptr;
  };
  const SummaryRow* d2d = find("D2D copy");
  ASSERT_TRUE(d2d);
  EXPECT_EQ(*d2d->measured, 4100);
  EXPECT_EQ(d2d->where, "d2d_copy_kernel p1073741824");
  EXPECT_NEAR(*d2d->anchor, 4232.8, 1e-9);
  EXPECT_NEAR(*d2d->goal, 0.95 * 4232.8, 1e-9);
  const SummaryRow* bf16 = find("GEMM bf16");
  ASSERT_TRUE(bf16);
  EXPECT_EQ(*bf16->measured, 750);
  EXPECT_NEAR(*bf16->goal, 0.95 * 773.6, 1e-9);
  EXPECT_NEAR(*find("H2D pinned")->goal, 52.0, 1e-9);
  const std::string t = render_summary_table(rows);
  EXPECT_NE(t.find("96.9%"), std::string::npos);  // 4100 / 4232.8
  EXPECT_EQ(t.find("NO"), std::string::npos);     // every measured goal met; f16 not measured: "-"
  EXPECT_TRUE(summary_to_json(rows)[0]["goal_met"].get<bool>());
  EXPECT_TRUE(summary_to_json(rows)[5]["goal_met"].is_null());  // GEMM f16: no measurement
  const auto low = summarize(fake_sections(3000, 700), "NVIDIA H200");
  EXPECT_FALSE(summary_to_json(low)[0]["goal_met"].get<bool>());
  // Another GPU: no anchors, no goals.
  for (const auto& r : summarize(fake_sections(900, 100), "NVIDIA A10")) {
    EXPECT_FALSE(r.anchor);
    EXPECT_FALSE(r.goal);
  }
}

TEST(Report, WritesJsonSvgAndHtml) {
  const auto dir = std::filesystem::temp_directory_path() / ("gpuopt_report_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  const nlohmann::json dev = {{"name", "NVIDIA H200"}, {"sm_count", 132}};
  ASSERT_TRUE(write_report(dir.string(), fake_sections(4100, 750), dev).ok());
  for (const char* f : {"bench.json", "index.html", "roofline.svg", "bandwidth.svg", "gemm.svg"})
    EXPECT_TRUE(std::filesystem::exists(dir / f)) << f;
  EXPECT_FALSE(std::filesystem::exists(dir / "cpu_vs_gpu.svg"));  // no such section
  std::ifstream jf(dir / "bench.json");
  const nlohmann::json j = nlohmann::json::parse(jf);
  EXPECT_EQ(j["sections"].size(), 4u);
  EXPECT_EQ(j["device"]["name"], "NVIDIA H200");
  EXPECT_EQ(j["summary"][0]["figure"], "D2D copy");
  std::ifstream hf(dir / "index.html");
  const std::string html((std::istreambuf_iterator<char>(hf)), std::istreambuf_iterator<char>());
  auto count = [&](const std::string& needle) {
    size_t n = 0;
    for (size_t p = html.find(needle); p != std::string::npos; p = html.find(needle, p + 1)) ++n;
    return n;
  };
  EXPECT_EQ(count("<svg"), 3u);  // bandwidth, gemm, roofline embedded inline
  EXPECT_EQ(count("<table class=\"results\">"), 3u);
  EXPECT_EQ(count("<table class=\"summary\">"), 1u);
  EXPECT_NE(html.find("skipped: no CUDA device"), std::string::npos);
  EXPECT_NE(html.find("<td>4100</td>"), std::string::npos);
  EXPECT_NE(html.find("<td>96.9%</td>"), std::string::npos);
  EXPECT_NE(html.find("id=\"roofline\""), std::string::npos);
  // The embedded SVG is the same text as the file.
  std::ifstream sf(dir / "roofline.svg");
  const std::string svg((std::istreambuf_iterator<char>(sf)), std::istreambuf_iterator<char>());
  EXPECT_NE(html.find(svg), std::string::npos);
  std::filesystem::remove_all(dir);
  // An unwritable place is one clear error.
  const Status bad = write_report("/proc/gpuopt/report", fake_sections(1, 1), dev);
  EXPECT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("/proc/gpuopt/report"), std::string::npos);
}

}  // namespace
}  // namespace gpuopt::bench
