// Chrome trace-event writer and the trace of a profile (trace.h).
#include "profile/trace.h"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <optional>
#include <vector>

namespace gpuopt::profile {

int TraceWriter::track(int pid, const std::string& process_name, const std::string& name) {
  if (std::find(named_pids_.begin(), named_pids_.end(), pid) == named_pids_.end()) {
    named_pids_.push_back(pid);
    events_.push_back({{"ph", "M"}, {"pid", pid}, {"tid", 0}, {"name", "process_name"}, {"args", {{"name", process_name}}}});
  }
  const int tid = next_tid_++;
  events_.push_back({{"ph", "M"}, {"pid", pid}, {"tid", tid}, {"name", "thread_name"}, {"args", {{"name", name}}}});
  events_.push_back({{"ph", "M"}, {"pid", pid}, {"tid", tid}, {"name", "thread_sort_index"}, {"args", {{"sort_index", tid}}}});
  return tid;
}

void TraceWriter::complete(int pid, int tid, const std::string& name, const std::string& cat, double ts, double dur,
                           nlohmann::json args) {
  events_.push_back({{"ph", "X"},
                     {"pid", pid},
                     {"tid", tid},
                     {"name", name},
                     {"cat", cat},
                     {"ts", ts},
                     {"dur", std::max(0.0, dur)},
                     {"args", std::move(args)}});
}

void TraceWriter::counter(int pid, const std::string& name, double ts, nlohmann::json values) {
  events_.push_back({{"ph", "C"}, {"pid", pid}, {"tid", 0}, {"name", name}, {"ts", ts}, {"args", std::move(values)}});
}

nlohmann::json TraceWriter::to_json() const {
  return {{"traceEvents", events_}, {"displayTimeUnit", "ms"}, {"otherData", {{"producer", "gpuopt"}}}};
}

Status TraceWriter::write(const std::string& path) const { return write_trace_file(path, to_json()); }

Status write_trace_file(const std::string& path, const nlohmann::json& trace) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return Status::InvalidArgument("trace file '{}': cannot open for writing", path);
  out << trace.dump() << '\n';
  out.flush();
  if (!out) return Status::Internal("trace file '{}': write failed", path);
  return Status::Ok();
}

namespace {

// The shift that puts a run's node events on the host clock, from CUPTI's kernels: the median
// over nodes of (first kernel's start - the node's event start). None without kernels.
std::optional<double> kernel_shift(const ProfiledRun& run, double first) {
  std::map<int, double> first_kernel;
  for (const KernelRecord& k : run.kernels)
    if (k.node >= 0 && !first_kernel.count(k.node)) first_kernel[k.node] = k.start_us;
  std::vector<double> d;
  for (const auto& [i, t] : first_kernel) {
    if (static_cast<size_t>(i) >= run.profile.nodes.size()) continue;
    const NodeTime& n = run.profile.nodes[static_cast<size_t>(i)];
    if (n.gpu_start_us >= 0) d.push_back(t - (first + n.gpu_start_us));
  }
  if (d.empty()) return std::nullopt;
  std::nth_element(d.begin(), d.begin() + static_cast<std::ptrdiff_t>(d.size() / 2), d.end());
  return d[d.size() / 2];
}

}  // namespace

nlohmann::json profile_trace(const ProfileResult& r) {
  TraceWriter w;
  const std::string proc = fmt::format("gpuopt {} ({}, {}, batch {})", r.model, r.device, r.precision, r.batch);
  const int host = w.track(1, proc, "host");
  bool any_gpu = false;
  for (const ProfiledRun& run : r.runs)
    for (const NodeTime& n : run.profile.nodes) any_gpu = any_gpu || n.gpu_start_us >= 0;
  const int gpu = any_gpu ? w.track(1, proc, "GPU stream (node by node)") : 0;
  std::map<std::pair<uint32_t, uint32_t>, int> kernel_tracks;  // (device, stream) -> track
  double origin = r.spans.empty() ? (r.runs.empty() ? 0 : r.runs[0].start_us) : r.spans[0].start_us;
  for (const Span& s : r.spans) w.complete(1, host, s.name, s.category, s.start_us - origin, s.dur_us, s.args);
  for (size_t k = 0; k < r.runs.size(); ++k) {
    const ProfiledRun& run = r.runs[k];
    const auto& nodes = run.profile.nodes;
    w.complete(1, host, fmt::format("profiled run {}", k + 1), "run", run.start_us - origin, run.end_us - run.start_us,
               {{"mode", run.profile.mode}, {"note", run.profile.graph_note}});
    if (!nodes.empty()) {
      // Before the first node: input validation and upload; after the last: output download.
      w.complete(1, host, "validate + stage inputs", "staging", run.start_us - origin, nodes.front().start_us - run.start_us);
    }
    // The device clock against the host's: the smallest shift that starts no node on the GPU
    // before its launch began (events are relative to the first node's launch event).
    double shift = -1e300;
    const double first = nodes.empty() ? 0 : nodes.front().start_us;
    for (const NodeTime& n : nodes)
      if (n.gpu_start_us >= 0) shift = std::max(shift, n.start_us - (first + n.gpu_start_us));
    if (shift < -1e299) shift = 0;
    // With CUPTI's kernels (on the host clock already), the node track lines up with them: the
    // median gap between a node's event start and its first kernel's start.
    if (const auto ks = kernel_shift(run, first); ks) shift = *ks;
    for (size_t i = 0; i < nodes.size(); ++i) {
      const NodeTime& n = nodes[i];
      nlohmann::json args = {{"op", n.op}, {"device", n.device}, {"run", k + 1}, {"index", i}};
      if (i < r.nodes.size() && r.nodes[i].name == n.node) {
        const NodeInfo& ni = r.nodes[i];
        args["shapes"] = ni.shapes;
        args["dtype"] = ni.dtype;
        args["bytes"] = ni.bytes;
        args["flops"] = ni.flops;
      }
      const std::string label = n.node.empty() ? n.op : n.node;
      w.complete(1, host, label, n.device == "cpu" ? "node cpu" : "launch", n.start_us - origin, n.wall_us, args);
      if (n.gpu_start_us >= 0) {
        args["wall_us"] = n.wall_us;
        w.complete(1, gpu, label, "kernel", first + n.gpu_start_us + shift - origin, n.gpu_us, args);
      }
    }
    if (!nodes.empty()) {
      const double last_end = nodes.back().start_us + nodes.back().wall_us;
      w.complete(1, host, "stage outputs", "staging", last_end - origin, run.end_us - last_end);
    }
    for (const KernelRecord& kr : run.kernels) {
      nlohmann::json args = {{"run", k + 1},
                             {"grid", kr.grid},
                             {"block", kr.block},
                             {"stream", kr.stream},
                             {"device", kr.device},
                             {"correlation", kr.correlation}};
      if (kr.node >= 0 && static_cast<size_t>(kr.node) < nodes.size()) {
        args["node"] = nodes[static_cast<size_t>(kr.node)].node;
        args["op"] = nodes[static_cast<size_t>(kr.node)].op;
      } else {
        args["node"] = nullptr;
      }
      auto [it, fresh] = kernel_tracks.emplace(std::make_pair(kr.device, kr.stream), 0);
      if (fresh) it->second = w.track(1, proc, fmt::format("GPU kernels (CUPTI), device {} stream {}", kr.device, kr.stream));
      w.complete(1, it->second, kr.name, "cuda kernel", kr.start_us - origin, kr.dur_us, std::move(args));
    }
  }
  return w.to_json();
}

}  // namespace gpuopt::profile
