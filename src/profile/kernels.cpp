// Kernels of a profile: matching CUPTI records to runs and nodes, the per-name summary
// (kernels.h). The CUPTI capture itself is cuda/cupti.cpp (CUDA builds only).
#include "profile/kernels.h"

#include "core/table.h"

#include <cxxabi.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <vector>

namespace gpuopt::profile {

#if !GPUOPT_HAVE_CUDA
Result<std::unique_ptr<KernelCapture>> KernelCapture::start(const std::string&) {
  return Status::Unavailable("kernel names need a CUDA build (this gpuopt was built without CUDA)");
}
#endif

std::string demangle(const char* name) {
  if (!name) return "";
  int status = 0;
  char* d = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  if (status != 0 || !d) return name;
  std::string out(d);
  std::free(d);
  return out;
}

// How far outside a node's host interval a kernel's midpoint may be and still count as the node's.
constexpr double kSlackUs = 2.0;

void attach_kernels(std::vector<KernelRecord> kernels, ProfileResult* r) {
  std::stable_sort(kernels.begin(), kernels.end(),
                   [](const KernelRecord& a, const KernelRecord& b) { return a.start_us < b.start_us; });
  std::vector<bool> in_order;  // per run: its nodes in start order (as the executors run them)
  for (ProfiledRun& run : r->runs) {
    run.kernels.clear();
    in_order.push_back(std::is_sorted(run.profile.nodes.begin(), run.profile.nodes.end(),
                                      [](const NodeTime& a, const NodeTime& b) { return a.start_us < b.start_us; }));
  }
  for (KernelRecord& k : kernels) {
    const double mid = k.start_us + k.dur_us / 2;
    auto run = std::find_if(r->runs.begin(), r->runs.end(),
                            [&](const ProfiledRun& x) { return mid >= x.start_us && mid <= x.end_us; });
    if (run == r->runs.end()) continue;  // not one of the profiled runs (another thread's work)
    k.node = -1;
    const auto& nodes = run->profile.nodes;
    const bool sorted = in_order[static_cast<size_t>(run - r->runs.begin())];
    // The node whose host interval holds the midpoint; nodes run one after another, so the
    // intervals are ordered and disjoint: the last node starting at or before it.
    auto holds = [&](const NodeTime& n) { return mid >= n.start_us && mid <= n.start_us + n.wall_us && n.device != "cpu"; };
    if (sorted) {
      auto after = std::upper_bound(nodes.begin(), nodes.end(), mid,
                                    [](double t, const NodeTime& n) { return t < n.start_us; });
      if (after != nodes.begin() && holds(*std::prev(after))) k.node = static_cast<int>(std::prev(after) - nodes.begin());
    } else {  // not in start order (not expected from the executors): look at each
      for (size_t i = 0; i < nodes.size() && k.node < 0; ++i)
        if (holds(nodes[i])) k.node = static_cast<int>(i);
    }
    if (k.node < 0) {  // just outside a node (the GPU-to-host time conversion is not exact): the nearest
      double best = kSlackUs;
      for (size_t i = 0; i < nodes.size(); ++i) {
        const NodeTime& n = nodes[i];
        const double d = mid < n.start_us ? n.start_us - mid : mid - (n.start_us + n.wall_us);
        if (n.device != "cpu" && d <= best) {
          best = d;
          k.node = static_cast<int>(i);
        }
      }
    }
    run->kernels.push_back(std::move(k));
  }
}

std::vector<KernelRow> summarize_kernels(const ProfileResult& r, int top_k, double* total_us) {
  struct Acc {
    KernelRow row;
    std::map<int, double> by_node;  // node index (-1 between nodes) -> time
  };
  std::map<std::string, Acc> by_name;
  double total = 0;
  for (const ProfiledRun& run : r.runs)
    for (const KernelRecord& k : run.kernels) {
      Acc& a = by_name[k.name];
      a.row.calls += 1;
      a.row.time_us += k.dur_us;
      a.by_node[k.node] += k.dur_us;
      total += k.dur_us;
    }
  const double runs = std::max<double>(1, static_cast<double>(r.runs.size()));
  std::vector<KernelRow> rows;
  for (auto& [name, a] : by_name) {
    KernelRow row = a.row;
    row.name = name;
    row.calls /= runs;
    row.time_us /= runs;
    row.share = total > 0 ? a.row.time_us / total : 0;
    row.nodes = static_cast<int>(std::count_if(a.by_node.begin(), a.by_node.end(), [](const auto& kv) { return kv.first >= 0; }));
    auto top = std::max_element(a.by_node.begin(), a.by_node.end(),
                                [](const auto& x, const auto& y) { return x.second < y.second; });
    if (top != a.by_node.end() && top->first >= 0 && static_cast<size_t>(top->first) < r.nodes.size()) {
      row.node = r.nodes[static_cast<size_t>(top->first)].name;
      row.op = r.nodes[static_cast<size_t>(top->first)].op;
    }
    rows.push_back(std::move(row));
  }
  std::stable_sort(rows.begin(), rows.end(), [](const KernelRow& a, const KernelRow& b) { return a.time_us > b.time_us; });
  if (rows.size() > static_cast<size_t>(std::max(0, top_k))) rows.resize(static_cast<size_t>(std::max(0, top_k)));
  if (total_us) *total_us = total / runs;
  return rows;
}

nlohmann::json kernel_rows_json(const std::vector<KernelRow>& rows) {
  nlohmann::json a = nlohmann::json::array();
  for (const KernelRow& k : rows)
    a.push_back({{"kernel", k.name},
                 {"calls_per_run", k.calls},
                 {"time_us", k.time_us},
                 {"share", k.share},
                 {"nodes", k.nodes},
                 {"node", k.node.empty() ? nlohmann::json(nullptr) : nlohmann::json(k.node)},
                 {"op", k.op.empty() ? nlohmann::json(nullptr) : nlohmann::json(k.op)}});
  return a;
}

std::string render_kernel_rows(const std::vector<KernelRow>& rows) {
  Table t({"#", "kernel", "calls", "gpu time", "%", "nodes", "most in node"}, fmt::format("top {} kernels (CUPTI)", rows.size()));
  int k = 0;
  auto cut = [](const std::string& s, size_t n) { return s.size() > n ? s.substr(0, n - 3) + "..." : s; };
  for (const KernelRow& r : rows)
    t.add({fmt::format("{}", ++k), cut(r.name, 60), fmt::format("{:g}", r.calls), format_duration_us(r.time_us),
           fmt::format("{:.1f}", 100 * r.share), fmt::format("{}", r.nodes),
           r.node.empty() ? "(between nodes)" : cut(r.node, 32) + " (" + r.op + ")"});
  return t.render();
}

}  // namespace gpuopt::profile
