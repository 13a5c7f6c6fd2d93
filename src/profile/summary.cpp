// The profile's summary: per-node means over the profiled runs, achieved GB/s and TFLOP/s,
// roofline class against `gpuopt bench` ceilings, host-gap share; table and JSON.
#include "core/table.h"
#include "profile/kernels.h"
#include "profile/profile.h"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>

namespace gpuopt::profile {

double Ceilings::peak_for(const std::string& dtype) const {
  static const std::map<std::string, std::string> kind = {
      {"float32", "f32"}, {"float16", "f16"}, {"bfloat16", "bf16"}, {"int8", "int8"}, {"uint8", "int8"},
      {"f32", "f32"},     {"f16", "f16"},     {"bf16", "bf16"}};
  auto k = kind.find(dtype);
  if (k != kind.end())
    if (auto p = peak_TFLOPs.find(k->second); p != peak_TFLOPs.end()) return p->second;
  auto f = peak_TFLOPs.find("f32");
  return f == peak_TFLOPs.end() ? 0 : f->second;
}

Result<Ceilings> read_ceilings(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Status::InvalidArgument("--ceilings '{}': cannot open the file", path);
  nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object())
    return Status::InvalidArgument("--ceilings '{}': not JSON (expected `gpuopt bench ... --json` output or bench.json)", path);
  nlohmann::json sections = nlohmann::json::array();
  if (j.contains("sections") && j["sections"].is_array()) sections = j["sections"];
  if (j.contains("section") && j["section"].is_object()) sections.push_back(j["section"]);
  Ceilings c;
  c.source = path;
  if (j.contains("device") && j["device"].is_object()) c.device = j["device"].value("name", "");
  static const std::vector<std::string> kMemory = {"d2d_copy_kernel", "d2d_copy_kernel_cs", "d2d_memcpy", "read_kernel",
                                                   "write_kernel"};
  for (const auto& s : sections) {
    if (!s.is_object() || !s.contains("results") || !s["results"].is_array()) continue;
    for (const auto& m : s["results"]) {
      if (!m.is_object() || !m.contains("value") || !m["value"].is_number()) continue;
      const std::string test = m.value("test", "");
      const double v = m["value"].get<double>();
      if (std::find(kMemory.begin(), kMemory.end(), test) != kMemory.end() && m.value("unit", "") == "GB/s")
        c.bandwidth_GBps = std::max(c.bandwidth_GBps, v);
      if (test.rfind("gemm_", 0) == 0) {
        double& p = c.peak_TFLOPs[test.substr(5)];
        p = std::max(p, v);
      }
    }
    if (s.contains("extra") && s["extra"].is_object() && s["extra"].contains("ceilings"))
      for (const auto& [name, ce] : s["extra"]["ceilings"].items()) {
        if (!ce.is_object()) continue;
        c.bandwidth_GBps = std::max(c.bandwidth_GBps, ce.value("bandwidth_GBps", 0.0));
        const std::string t = name.rfind("roofline_", 0) == 0 ? name.substr(9) : name;  // CUDA-core FMA roof
        double& p = c.peak_TFLOPs[t];
        p = std::max(p, ce.value("peak_GFLOPs", 0.0) / 1e3);
      }
  }
  if (c.bandwidth_GBps <= 0 && c.peak_TFLOPs.empty())
    return Status::InvalidArgument("--ceilings '{}': no memory bandwidth or GEMM rows in it (run `gpuopt bench all --json`)",
                                   path);
  return c;
}

Summary summarize(const ProfileResult& r, const std::optional<Ceilings>& ceilings, int top_k) {
  Summary s;
  s.runs = static_cast<int>(r.runs.size());
  s.ceilings = ceilings;
  s.normal_run_us = r.normal_run_us;
  s.normal_device_us = r.normal_device_us;
  s.normal_mode = r.normal_mode;
  std::vector<NodeRow> rows(r.nodes.size());
  bool on_gpu = false;
  for (const ProfiledRun& run : r.runs) {
    s.run_us += run.end_us - run.start_us;
    for (size_t i = 0; i < run.profile.nodes.size() && i < rows.size(); ++i) {
      const NodeTime& n = run.profile.nodes[i];
      NodeRow& row = rows[i];
      ++row.count;
      row.device = n.device;
      row.wall_us += n.wall_us;
      row.time_us += n.device == "cpu" ? n.wall_us : n.gpu_us;
      s.node_wall_us += n.wall_us;
      on_gpu = on_gpu || n.device != "cpu";
    }
  }
  const double runs = std::max(1, s.runs);
  s.run_us /= runs;
  s.node_wall_us /= runs;
  for (size_t i = 0; i < rows.size(); ++i) {
    NodeRow& row = rows[i];
    const NodeInfo& ni = r.nodes[i];
    row.name = ni.name;
    row.op = ni.op;
    row.dtype = ni.dtype;
    row.shapes = ni.shapes;
    row.bytes = ni.bytes;
    row.flops = ni.flops;
    row.time_us /= runs;
    row.wall_us /= runs;
    s.node_time_us += row.time_us;
    if (row.time_us > 0) {
      row.gbps = row.bytes / (row.time_us * 1e-6) / 1e9;
      row.tflops = row.flops / (row.time_us * 1e-6) / 1e12;
    }
    row.intensity = row.bytes > 0 ? row.flops / row.bytes : 0;
    if (ceilings) {  // the ceilings of the device they came from, whatever ran the node
      const double peak = ceilings->peak_for(row.dtype) * 1e12, bw = ceilings->bandwidth_GBps * 1e9;
      if (peak > 0 && bw > 0 && row.bytes > 0) {
        row.bound = row.intensity < peak / bw ? "memory" : "compute";
        const double roof = std::min(peak, row.intensity * bw);  // FLOP/s attainable at this intensity
        row.roof_pct = row.bound == "memory" || roof <= 0 ? 100.0 * row.gbps * 1e9 / bw : 100.0 * row.tflops * 1e12 / roof;
      }
    }
  }
  for (NodeRow& row : rows) row.share = s.node_time_us > 0 ? row.time_us / s.node_time_us : 0;
  std::vector<std::map<std::string, double>> node_kernels(rows.size());  // per node: kernel -> time
  for (const ProfiledRun& run : r.runs)
    for (const KernelRecord& k : run.kernels)
      if (k.node >= 0 && static_cast<size_t>(k.node) < rows.size()) node_kernels[static_cast<size_t>(k.node)][k.name] += k.dur_us / runs;
  for (size_t i = 0; i < rows.size(); ++i) {
    rows[i].kernels.assign(node_kernels[i].begin(), node_kernels[i].end());
    std::stable_sort(rows[i].kernels.begin(), rows[i].kernels.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  }
  s.host_gap_share = s.run_us > 0 ? std::max(0.0, (s.run_us - s.node_wall_us) / s.run_us) : 0;
  double gpu = 0;
  for (const NodeRow& row : rows)
    if (row.device != "cpu") gpu += row.time_us;
  if (on_gpu) s.device_busy_share = s.run_us > 0 ? gpu / s.run_us : 0;
  std::stable_sort(rows.begin(), rows.end(), [](const NodeRow& a, const NodeRow& b) { return a.time_us > b.time_us; });
  s.nodes = rows;
  s.top.assign(rows.begin(), rows.begin() + std::min<size_t>(rows.size(), static_cast<size_t>(std::max(0, top_k))));
  s.kernels = summarize_kernels(r, top_k, &s.kernel_time_us);
  return s;
}

namespace {

nlohmann::json row_json(const NodeRow& n) {
  nlohmann::json j = {{"node", n.name},     {"op", n.op},         {"device", n.device}, {"dtype", n.dtype},
                      {"shapes", n.shapes}, {"time_us", n.time_us}, {"wall_us", n.wall_us}, {"share", n.share},
                      {"bytes", n.bytes},   {"flops", n.flops},   {"GBps", n.gbps},     {"TFLOPs", n.tflops},
                      {"intensity", n.intensity}};
  j["bound"] = n.bound.empty() ? nlohmann::json(nullptr) : nlohmann::json(n.bound);
  j["percent_of_roof"] = n.roof_pct >= 0 ? nlohmann::json(n.roof_pct) : nlohmann::json(nullptr);
  j["kernels"] = nlohmann::json::array();
  for (const auto& [name, us] : n.kernels) j["kernels"].push_back({{"kernel", name}, {"time_us", us}});
  return j;
}

}  // namespace

std::string render_summary(const ProfileResult& r, const Summary& s) {
  std::string o = fmt::format("profile  {}  (device {}, {}, batch {}; {} node-by-node run{}, a wait after each node)\n",
                              r.model, r.device, r.precision, r.batch, s.runs, s.runs == 1 ? "" : "s");
  const bool gpu = s.device_busy_share >= 0;
  std::vector<std::string> head{"#", "node", "op", "dtype", gpu ? "gpu time" : "time", "%", "GB/s", "TFLOP/s", "FLOP/B"};
  if (s.ceilings) head.insert(head.end(), {"bound", "% of roof"});
  Table t(head, fmt::format("top {} nodes", s.top.size()));
  int k = 0;
  for (const NodeRow& n : s.top) {
    std::vector<std::string> row{fmt::format("{}", ++k), n.name.size() > 40 ? "..." + n.name.substr(n.name.size() - 37) : n.name,
                                 n.op, n.dtype, format_duration_us(n.time_us), fmt::format("{:.1f}", 100 * n.share),
                                 n.bytes > 0 ? fmt::format("{:.1f}", n.gbps) : "-",
                                 n.flops > 0 ? fmt::format("{:.3g}", n.tflops) : "-",
                                 n.bytes > 0 ? fmt::format("{:.1f}", n.intensity) : "-"};
    if (s.ceilings)
      row.insert(row.end(), {n.bound.empty() ? "-" : n.bound, n.roof_pct >= 0 ? fmt::format("{:.0f}%", n.roof_pct) : "-"});
    t.add(row);
  }
  o += t.render();
  o += fmt::format("run {} (node by node); nodes {} of it; host gaps {:.1f}% (validation, staging, between nodes)\n",
                   format_duration_us(s.run_us), format_duration_us(s.node_wall_us), 100 * s.host_gap_share);
  if (gpu)
    o += fmt::format("GPU busy {:.1f}% of the node-by-node run ({} of device time in nodes)\n", 100 * s.device_busy_share,
                     format_duration_us(s.node_time_us));
  o += fmt::format("an ordinary run ({}): {}{}\n", s.normal_mode.empty() ? "cpu" : s.normal_mode,
                   format_duration_us(s.normal_run_us),
                   s.normal_device_us > 0 ? fmt::format(", {} on the device", format_duration_us(s.normal_device_us)) : "");
  if (!s.kernels.empty()) {
    o += render_kernel_rows(s.kernels);
    o += fmt::format("kernels: {} of GPU time per run (CUPTI)\n", format_duration_us(s.kernel_time_us));
  }
  if (r.kernels_recorded && !r.kernels_note.empty()) o += fmt::format("kernels: {}\n", r.kernels_note);
  if (s.ceilings) {
    std::string peaks;
    for (const auto& [k2, v] : s.ceilings->peak_TFLOPs) peaks += fmt::format(" {} {:.1f}", k2, v);
    o += fmt::format("ceilings from {}: {:.0f} GB/s; TFLOP/s{}\n", s.ceilings->source, s.ceilings->bandwidth_GBps, peaks);
  } else if (gpu) {
    o += "no --ceilings: run `gpuopt bench all --json > ceilings.json` and pass --ceilings ceilings.json for the roofline\n";
  }
  return o;
}

nlohmann::json summary_json(const ProfileResult& r, const Summary& s) {
  nlohmann::json j = {{"model", r.model},
                      {"device", r.device},
                      {"precision", r.precision},
                      {"batch", r.batch},
                      {"runs", s.runs},
                      {"run_us", s.run_us},
                      {"node_wall_us", s.node_wall_us},
                      {"node_time_us", s.node_time_us},
                      {"host_gap_share", s.host_gap_share},
                      {"normal_run_us", s.normal_run_us},
                      {"normal_device_us", s.normal_device_us},
                      {"normal_mode", s.normal_mode}};
  j["device_busy_share"] = s.device_busy_share >= 0 ? nlohmann::json(s.device_busy_share) : nlohmann::json(nullptr);
  for (const Span& sp : r.spans) j["load"].push_back({{"step", sp.name}, {"category", sp.category}, {"us", sp.dur_us}});
  j["top"] = nlohmann::json::array();
  for (const NodeRow& n : s.top) j["top"].push_back(row_json(n));
  j["nodes"] = nlohmann::json::array();
  for (const NodeRow& n : s.nodes) j["nodes"].push_back(row_json(n));
  j["kernels_recorded"] = r.kernels_recorded;
  j["kernels_note"] = r.kernels_note.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.kernels_note);
  j["kernel_time_us"] = s.kernel_time_us;
  j["kernels"] = kernel_rows_json(s.kernels);
  if (s.ceilings) {
    j["ceilings"] = {{"source", s.ceilings->source}, {"device", s.ceilings->device}, {"bandwidth_GBps", s.ceilings->bandwidth_GBps},
                     {"peak_TFLOPs", s.ceilings->peak_TFLOPs}};
  } else {
    j["ceilings"] = nullptr;
  }
  return j;
}

}  // namespace gpuopt::profile
