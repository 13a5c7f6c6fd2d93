// `gpuopt tune`: find the best serving configuration of a model under constraints, as Triton's
// model_analyzer does (docs/tune.md).
//
//   offline: the engine alone. Per precision, batch sizes in powers of two until a run fails for
//            memory (or p99 passes the latency budget), then a binary search between the last
//            batch that fit and the first that did not: the memory edge. Each point: throughput,
//            p50/p99 of whole runs, peak memory, GPU utilisation (NVML, where there is a GPU).
//   online:  a real `gpuopt serve` process per configuration (max_batch_size from the offline
//            search, instance count, max_queue_delay), driven by `gpuopt perf` at rising
//            concurrency until p99 passes the budget or throughput stops rising.
//
// Out of memory anywhere is recorded as that point's outcome; the session is dropped (its pool
// goes back to the device) and the search goes on with a fresh one.
//
//   TuneOptions o; o.model = "resnet.onnx"; o.latency_budget_ms = 20;
//   GPUOPT_ASSIGN_OR_RETURN(TuneResult r, run_tune(o, progress));
#pragma once

#include "core/status.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace gpuopt::tune {

struct TuneOptions {
  std::string model;       // the ONNX file (from MODEL or --model-repository DIR -m NAME)
  std::string model_name;  // the name in the written config.pbtxt and in the served repository
  std::string mode = "offline";        // offline | online
  std::string device = "cpu";
  std::vector<std::string> precisions;  // fp32/fp16/bf16/int8/fp8 (int8, fp8: a model quantized for it)
  int64_t max_batch = 256;              // largest batch tried
  std::vector<int> instances{1, 2};     // online: instances per GPU (per server on the CPU)
  std::vector<int64_t> delays_us{0, 1000};  // online: max_queue_delay_microseconds
  double latency_budget_ms = 0;         // p99 at most; 0 = none
  size_t memory_limit = 0;              // bytes a session may hold; 0 = the device's
  double min_throughput = 0;            // inferences/s at least; 0 = none
  double time_budget_s = 0;             // stop starting new points after this; 0 = none
  int iterations = 10;                  // offline: timed runs per point
  int measurement_ms = 1000;            // online: perf measurement window
  int max_concurrency = 64;             // online: highest concurrency tried
  std::map<std::string, int64_t> dims;  // other symbolic input dims
  // --kernel NAME=VALUE: KernelSettings over the environment's in every session tried, and
  // gpuopt.kernel.NAME parameters of the written config.pbtxt (so serve runs the same).
  std::vector<std::pair<std::string, std::string>> kernels;
  std::string gpuopt_exe;               // online: the gpuopt binary to run serve/perf with
  std::string work_dir;                 // online: model repositories and server logs go here
};

struct Point {
  std::string mode;          // "offline" or "online"
  std::string precision;
  int64_t batch = 0;         // offline: the run's batch; online: max_batch_size
  int instances = 1;         // online
  int64_t delay_us = 0;      // online
  int concurrency = 0;       // online
  bool ok = false;
  bool oom = false;          // failed for memory (the edge)
  std::string error;         // when !ok
  double throughput = 0;     // inferences (samples) per second
  double p50_ms = 0, p99_ms = 0;
  int64_t memory_bytes = 0;  // peak held by the session (device pool on CUDA, intermediates on the CPU)
  double gpu_util = -1;      // mean NVML utilisation (%) while measured; -1 without a GPU
  double seconds = 0;        // how long the point took to measure
  std::string violates;      // constraints it breaks ("" = feasible)
  bool pareto = false;       // on the throughput / p99 front (feasible points only)
};

struct TuneResult {
  TuneOptions options;
  std::vector<Point> points;
  std::map<std::string, int64_t> memory_edge;  // precision -> the first batch that did not fit (0: none found)
  std::map<std::string, int64_t> best_batch;   // precision -> largest batch that fit
  int chosen = -1;                             // index into points
  std::string why;                             // the choice, in one or two sentences
  double elapsed_s = 0;
  bool time_budget_hit = false;
  std::vector<std::string> notes;              // precisions skipped and why, ...
};

// One line of progress: points done, the expected total so far, elapsed and an ETA.
struct Progress {
  int done = 0, expected = 0;
  double elapsed_s = 0, eta_s = 0;
  std::string what;
};
using ProgressFn = std::function<void(const Progress&)>;

Result<TuneResult> run_tune(const TuneOptions& o, const ProgressFn& progress);

// Marks each point's constraint violations, the Pareto front and the chosen point (with why).
void choose(TuneResult* r);

// A config.pbtxt for the chosen point (Triton's text format, which `gpuopt serve` reads).
std::string config_pbtxt(const TuneResult& r);

std::string render_table(const TuneResult& r);
nlohmann::json result_json(const TuneResult& r);
// report.html with two inline SVG plots (throughput vs p99 latency; memory vs batch), and the
// plots as throughput_latency.svg and memory_batch.svg beside it.
Status write_report(const TuneResult& r, const std::string& dir);

}  // namespace gpuopt::tune
