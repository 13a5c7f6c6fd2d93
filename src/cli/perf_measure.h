// `gpuopt perf`'s measurement of one load level (cmd_perf.cpp parses the options and prints):
// closed loop (N requests in flight) or open loop (requests/s), windows until three in a row agree,
// latency percentiles, the server's own breakdown from its statistics endpoint, and the CPU the
// client itself used.
//
//   PerfOptions o;  o.model = "simple";  o.protocol = "grpc";  o.async = true;
//   GPUOPT_ASSIGN_OR_RETURN(Level lv, measure(o, transport, workload, /*rate=*/false, /*value=*/64));
#pragma once

#include "cli/perf_client.h"
#include "core/status.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace gpuopt::cli {

struct PerfOptions {
  std::string model;
  std::string url;  // default 127.0.0.1:8000 (HTTP) or :8001 (gRPC)
  std::string protocol = "http";
  std::string shared_memory = "none";
  int64_t output_shm_size = 100 << 10;
  std::string concurrency_range = "1";
  std::string request_rate_range;
  int64_t batch = 1;
  std::vector<std::string> shapes;  // NAME:d1,d2 for dynamic non-batch dims
  bool binary = true;
  bool json_data = false;
  int interval_ms = 2000;
  double stability = 10.0;
  int max_trials = 10;
  bool json_out = false;
  std::string csv;
  std::string input_data;                // perf_analyzer's --input-data: zero, random or a JSON file (perf_data.h)
  int percentile = 0;                     // 0: stability on throughput alone; N: and on the pN latency
  bool async = false, sync = false;       // -a: gRPC calls through a completion queue (perf_measure.cpp); --sync: the default
  std::string measurement_mode = "time_windows";
  int64_t measurement_request_count = 50;
  bool verbose_csv = false;
  std::string distribution = "constant";  // open loop: constant or poisson intervals
};

struct Level {
  std::string mode;
  double value = 0;  // concurrency or requests/s
  double throughput = 0;
  double p50 = 0, p90 = 0, p95 = 0, p99 = 0, avg_us = 0;
  double pct_us = 0;  // the --percentile latency (0 without it)
  uint64_t requests = 0, errors = 0;
  std::string first_error;  // the first failed request's error, when errors > 0
  uint64_t sent = 0;  // successful requests over every window (the server's success count moves by this)
  double queue_us = 0, compute_input_us = 0, compute_infer_us = 0, compute_output_us = 0, overhead_us = 0;
  // Server side only: request duration from the server's stats (arrival to answer handed to the
  // connection), and that minus queue and compute: what parsing, batching hand-offs and encoding cost.
  double server_request_us = 0, server_overhead_us = 0;
  int windows = 0;
  bool stable = false;
  double client_cores = 0;  // CPU cores perf itself kept busy over the windows (process_cpu.h)
};

// The p-th percentile of v (nanoseconds) in microseconds; reorders v.
double percentile(std::vector<uint64_t>& v, double p);

Result<Level> measure(const PerfOptions& o, const PerfTransport& tgt, std::shared_ptr<const PerfWorkload> work,
                      bool rate, double value);

}  // namespace gpuopt::cli
