// tune's outputs for people and machines: the table, JSON, and the HTML/SVG report.
#include "bench/svg.h"
#include "core/table.h"
#include "tune/tune.h"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <map>

namespace gpuopt::tune {
namespace {

std::string opt_num(double v, const char* spec = "{:.1f}") { return v >= 0 ? fmt::format(fmt::runtime(spec), v) : "n/a"; }

const char* kColors[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2"};

bench::Plot throughput_latency_plot(const TuneResult& r) {
  bench::Plot p;
  p.title = "Throughput vs p99 latency";
  p.x_label = "p99 latency (ms)";
  p.y_label = "inferences/s";
  std::map<std::string, bench::PlotSeries> series;
  for (const Point& q : r.points) {
    if (!q.ok) continue;
    const std::string key = q.mode == "online" ? fmt::format("online {} mbs {} x{} d{}us", q.precision, q.batch, q.instances, q.delay_us)
                                               : fmt::format("offline {}", q.precision);
    auto& s = series[key];
    s.name = key;
    s.points.emplace_back(q.p99_ms, q.throughput);
  }
  size_t k = 0;
  for (auto& [name, s] : series) {
    s.color = kColors[k++ % 6];
    p.series.push_back(s);
  }
  if (r.chosen >= 0) {
    const Point& c = r.points[static_cast<size_t>(r.chosen)];
    p.labels.push_back({c.p99_ms, c.throughput, "chosen"});
  }
  if (r.options.latency_budget_ms > 0) {
    double top = 1;
    for (const Point& q : r.points) top = std::max(top, q.throughput);
    p.lines.push_back({"latency budget", r.options.latency_budget_ms, 0, r.options.latency_budget_ms, top, "#d62728", true});
  }
  return p;
}

bench::Plot memory_batch_plot(const TuneResult& r) {
  bench::Plot p;
  p.title = "Peak memory vs batch (engine)";
  p.x_label = "batch";
  p.y_label = "MiB";
  p.log_x = true;
  std::map<std::string, bench::PlotSeries> series;
  for (const Point& q : r.points) {
    if (q.mode != "offline" || !q.ok) continue;
    auto& s = series[q.precision];
    s.name = q.precision;
    s.points.emplace_back(static_cast<double>(q.batch), static_cast<double>(q.memory_bytes) / (1 << 20));
  }
  size_t k = 0;
  for (auto& [name, s] : series) {
    std::sort(s.points.begin(), s.points.end());
    s.color = kColors[k++ % 6];
    p.series.push_back(s);
  }
  for (const auto& [prec, edge] : r.memory_edge)
    if (edge > 0) p.labels.push_back({static_cast<double>(edge), 0, fmt::format("{} out of memory at {}", prec, edge)});
  if (r.options.memory_limit > 0) {
    double hi = 2;
    for (const Point& q : r.points) hi = std::max(hi, static_cast<double>(q.batch));
    const double mib = static_cast<double>(r.options.memory_limit) / (1 << 20);
    p.lines.push_back({"--memory-limit", 1, mib, hi, mib, "#d62728", true});
  }
  return p;
}

}  // namespace

std::string render_table(const TuneResult& r) {
  Table t({"#", "mode", "precision", "batch", "inst", "delay us", "conc", "infer/s", "p50 ms", "p99 ms", "memory", "GPU %",
           "result"},
          fmt::format("gpuopt tune {} ({}, {} mode): {} points in {:.1f} s", r.options.model, r.options.device,
                      r.options.mode, r.points.size(), r.elapsed_s));
  for (size_t i = 0; i < r.points.size(); ++i) {
    const Point& p = r.points[i];
    const bool on = p.mode == "online";
    std::string res = !p.ok ? (p.oom ? "out of memory" : "failed: " + p.error) : p.violates.empty() ? "ok" : p.violates;
    if (p.pareto) res += " (front)";
    if (static_cast<int>(i) == r.chosen) res = "CHOSEN " + res;
    t.add({fmt::format("{}", i + 1), p.mode, p.precision, fmt::format("{}", p.batch), on ? fmt::format("{}", p.instances) : "-",
           on ? fmt::format("{}", p.delay_us) : "-", on ? fmt::format("{}", p.concurrency) : "-",
           p.ok ? fmt::format("{:.1f}", p.throughput) : "-", p.ok ? fmt::format("{:.3f}", p.p50_ms) : "-",
           p.ok ? fmt::format("{:.3f}", p.p99_ms) : "-", p.memory_bytes > 0 ? format_bytes(static_cast<double>(p.memory_bytes)) : "-",
           opt_num(p.gpu_util, "{:.0f}"), res});
  }
  std::string o = t.render();
  for (const auto& [prec, edge] : r.memory_edge)
    o += edge > 0 ? fmt::format("{}: memory edge between batch {} (fits) and {} (does not)\n", prec, r.best_batch.at(prec), edge)
                  : fmt::format("{}: no memory edge up to batch {}\n", prec, r.best_batch.count(prec) ? r.best_batch.at(prec) : 0);
  for (const std::string& n : r.notes) o += "note: " + n + "\n";
  o += (r.chosen >= 0 ? "chosen: " : "") + r.why + "\n";
  return o;
}

nlohmann::json result_json(const TuneResult& r) {
  const TuneOptions& o = r.options;
  nlohmann::json j = {{"model", o.model},
                      {"model_name", o.model_name},
                      {"mode", o.mode},
                      {"device", o.device},
                      {"constraints",
                       {{"latency_budget_ms", o.latency_budget_ms > 0 ? nlohmann::json(o.latency_budget_ms) : nlohmann::json(nullptr)},
                        {"memory_limit_bytes", o.memory_limit > 0 ? nlohmann::json(o.memory_limit) : nlohmann::json(nullptr)},
                        {"min_throughput", o.min_throughput > 0 ? nlohmann::json(o.min_throughput) : nlohmann::json(nullptr)}}},
                      {"elapsed_s", r.elapsed_s},
                      {"time_budget_hit", r.time_budget_hit},
                      {"memory_edge", r.memory_edge},
                      {"largest_batch_that_fit", r.best_batch},
                      {"notes", r.notes},
                      {"why", r.why}};
  j["points"] = nlohmann::json::array();
  for (const Point& p : r.points) {
    nlohmann::json e = {{"mode", p.mode},         {"precision", p.precision}, {"batch", p.batch},
                        {"ok", p.ok},             {"oom", p.oom},             {"throughput", p.throughput},
                        {"p50_ms", p.p50_ms},     {"p99_ms", p.p99_ms},       {"memory_bytes", p.memory_bytes},
                        {"seconds", p.seconds},   {"feasible", p.ok && p.violates.empty()},
                        {"violates", p.violates}, {"pareto", p.pareto}};
    e["gpu_util"] = p.gpu_util >= 0 ? nlohmann::json(p.gpu_util) : nlohmann::json(nullptr);
    e["error"] = p.ok ? nlohmann::json(nullptr) : nlohmann::json(p.error);
    if (p.mode == "online") {
      e["instances"] = p.instances;
      e["max_queue_delay_us"] = p.delay_us;
      e["concurrency"] = p.concurrency;
    }
    j["points"].push_back(e);
  }
  j["chosen"] = r.chosen >= 0 ? nlohmann::json(r.chosen) : nlohmann::json(nullptr);
  j["pareto"] = nlohmann::json::array();
  for (size_t i = 0; i < r.points.size(); ++i)
    if (r.points[i].pareto) j["pareto"].push_back(i);
  j["config_pbtxt"] = r.chosen >= 0 ? nlohmann::json(config_pbtxt(r)) : nlohmann::json(nullptr);
  return j;
}

Status write_report(const TuneResult& r, const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return Status::InvalidArgument("--output-dir '{}': {}", dir, ec.message());
  const std::string tl = bench::render_svg(throughput_latency_plot(r)), mb = bench::render_svg(memory_batch_plot(r));
  auto write = [&](const std::string& name, const std::string& text) -> Status {
    std::ofstream f(fs::path(dir) / name, std::ios::binary | std::ios::trunc);
    f << text;
    f.flush();
    if (!f) return Status::Internal("cannot write {}", (fs::path(dir) / name).string());
    return Status::Ok();
  };
  GPUOPT_RETURN_IF_ERROR(write("throughput_latency.svg", tl));
  GPUOPT_RETURN_IF_ERROR(write("memory_batch.svg", mb));
  std::string h =
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>gpuopt tune report</title>\n"
      "<style>body{font-family:sans-serif;margin:2em;max-width:1100px}pre{background:#f6f6f6;padding:1em;"
      "overflow-x:auto}</style>\n</head>\n<body>\n<h1>gpuopt tune report</h1>\n";
  h += "<p>" + bench::xml_escape(r.why) + "</p>\n";
  h += tl + "\n" + mb + "\n";
  h += "<h2>Every point</h2>\n<pre>" + bench::xml_escape(render_table(r)) + "</pre>\n";
  if (r.chosen >= 0) h += "<h2>config.pbtxt</h2>\n<pre>" + bench::xml_escape(config_pbtxt(r)) + "</pre>\n";
  h += "</body>\n</html>\n";
  GPUOPT_RETURN_IF_ERROR(write("report.html", h));
  return Status::Ok();
}

}  // namespace gpuopt::tune
