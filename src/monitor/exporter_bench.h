// What `gpuopt exporter --self-bench` reports beyond CPU share and scrape latency: the cost of
// each NVML query group (so one run on a real driver names the costly calls) and the CPU time of
// each thread of the process (so CPU spent outside the sampling thread, e.g. by threads the
// driver library starts, shows up too).
//
//   auto before = thread_cpu_times();
//   ... sample for a while ...
//   fmt::print("{}", format_query_table(exporter.query_report()));
//   fmt::print("{}", format_thread_table(thread_cpu_delta(before, thread_cpu_times()), wall_s));
#pragma once

#include "monitor/exporter.h"

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace gpuopt::gpu {

struct QueryRow {
  std::string query;       // group name, the `query` label
  std::string calls_what;  // the NVML functions behind it
  bool slow = false, moved = false;
  uint64_t calls = 0;
  double mean_us = 0;        // wall time per read
  double cpu_mean_us = 0;    // sampling thread's CPU per read
  double per_sample_us = 0;  // wall time per sample, amortised over the cadence
  double share = 0;          // of all sampling time (0..1)
};
// Groups with at least one read, costliest (total wall time) first.
std::vector<QueryRow> query_rows(const Exporter::QueryReport& r);
std::string format_query_table(const Exporter::QueryReport& r);
nlohmann::json query_rows_json(const Exporter::QueryReport& r);

struct ThreadCpu {
  int tid = 0;
  std::string name;  // /proc/self/task/TID/comm
  double cpu_s = 0;  // user + system
};
// Every thread of this process now (empty where /proc is not readable).
std::vector<ThreadCpu> thread_cpu_times();
// after - before per thread (threads that started in between count from 0), busiest first.
std::vector<ThreadCpu> thread_cpu_delta(const std::vector<ThreadCpu>& before, const std::vector<ThreadCpu>& after);
std::string format_thread_table(const std::vector<ThreadCpu>& delta, double wall_s);

}  // namespace gpuopt::gpu
