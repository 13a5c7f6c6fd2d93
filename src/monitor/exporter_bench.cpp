#include "monitor/exporter_bench.h"

#include "core/table.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace gpuopt::gpu {

std::vector<QueryRow> query_rows(const Exporter::QueryReport& r) {
  std::vector<QueryRow> rows;
  for (size_t k = 0; k < kQueryGroupCount; ++k) {
    const QueryStat& q = r.queries[k];
    if (q.calls == 0) continue;
    QueryRow row;
    row.query = query_group_info(k).name;
    row.calls_what = query_group_info(k).calls;
    row.slow = q.slow;
    row.moved = q.moved;
    row.calls = q.calls;
    row.mean_us = 1e6 * q.wall_s / double(q.calls);
    row.cpu_mean_us = 1e6 * q.cpu_s / double(q.calls);
    row.per_sample_us = r.samples ? 1e6 * q.wall_s / double(r.samples) : 0;
    row.share = r.sample_seconds_total > 0 ? q.wall_s / r.sample_seconds_total : 0;
    rows.push_back(std::move(row));
  }
  std::stable_sort(rows.begin(), rows.end(), [](const QueryRow& a, const QueryRow& b) {
    return a.mean_us * double(a.calls) > b.mean_us * double(b.calls);
  });
  return rows;
}

std::string format_query_table(const Exporter::QueryReport& r) {
  Table t({"query", "cadence", "calls", "mean us/call", "cpu us/call", "us/sample", "share"},
          fmt::format("NVML queries, costliest first ({} samples, {:.2f} ms of sampling per sample; slow = every {} "
                      "samples, {:g} s)",
                      r.samples, r.samples ? 1e3 * r.sample_seconds_total / double(r.samples) : 0.0, r.slow_every,
                      double(r.slow_every) * r.interval_s));
  for (const QueryRow& q : query_rows(r))
    t.add({q.query,
           q.moved  ? "slow (moved)"
           : q.slow ? "slow"
                    : "fast",
           std::to_string(q.calls), fmt::format("{:.1f}", q.mean_us), fmt::format("{:.1f}", q.cpu_mean_us),
           fmt::format("{:.1f}", q.per_sample_us), fmt::format("{:.1f}%", 100 * q.share)});
  return t.render();
}

nlohmann::json query_rows_json(const Exporter::QueryReport& r) {
  nlohmann::json rows = nlohmann::json::array();
  for (const QueryRow& q : query_rows(r))
    rows.push_back({{"query", q.query},
                    {"calls_what", q.calls_what},
                    {"cadence", q.slow ? "slow" : "fast"},
                    {"moved", q.moved},
                    {"calls", q.calls},
                    {"mean_us", q.mean_us},
                    {"cpu_mean_us", q.cpu_mean_us},
                    {"us_per_sample", q.per_sample_us},
                    {"share", q.share}});
  return rows;
}

std::vector<ThreadCpu> thread_cpu_times() {
  std::vector<ThreadCpu> out;
  static const double kTick = double(sysconf(_SC_CLK_TCK) > 0 ? sysconf(_SC_CLK_TCK) : 100);
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/task", ec)) {
    ThreadCpu t;
    t.tid = std::atoi(e.path().filename().c_str());
    std::ifstream comm(e.path() / "comm");
    std::getline(comm, t.name);
    std::ifstream stat_file(e.path() / "stat");
    std::string stat((std::istreambuf_iterator<char>(stat_file)), std::istreambuf_iterator<char>());
    // Fields after the parenthesised name (which may hold spaces): state is field 3, utime 14, stime 15.
    size_t close = stat.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream in(stat.substr(close + 2));
    std::string field;
    unsigned long long utime = 0, stime = 0;
    for (int i = 3; i <= 15 && (in >> field); ++i) {
      if (i == 14) utime = std::strtoull(field.c_str(), nullptr, 10);
      if (i == 15) stime = std::strtoull(field.c_str(), nullptr, 10);
    }
    t.cpu_s = double(utime + stime) / kTick;
    out.push_back(std::move(t));
  }
  return out;
}

std::vector<ThreadCpu> thread_cpu_delta(const std::vector<ThreadCpu>& before, const std::vector<ThreadCpu>& after) {
  std::vector<ThreadCpu> out;
  for (const ThreadCpu& a : after) {
    ThreadCpu d = a;
    for (const ThreadCpu& b : before)
      if (b.tid == a.tid) d.cpu_s = a.cpu_s - b.cpu_s;
    out.push_back(std::move(d));
  }
  std::stable_sort(out.begin(), out.end(), [](const ThreadCpu& a, const ThreadCpu& b) { return a.cpu_s > b.cpu_s; });
  return out;
}

std::string format_thread_table(const std::vector<ThreadCpu>& delta, double wall_s) {
  Table t({"thread", "tid", "cpu ms", "% of one core"},
          fmt::format("CPU by thread over {:.1f} s (clock-tick resolution, {} threads)", wall_s, delta.size()));
  for (const ThreadCpu& d : delta)
    t.add({d.name, std::to_string(d.tid), fmt::format("{:.0f}", 1e3 * d.cpu_s),
           fmt::format("{:.2f}%", wall_s > 0 ? 100 * d.cpu_s / wall_s : 0.0)});
  return t.render();
}

}  // namespace gpuopt::gpu
