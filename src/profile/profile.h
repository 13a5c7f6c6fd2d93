// `gpuopt profile`: where a run's time goes. One model is loaded (timed: import, compile), run a
// few times to warm up, then run node by node (RunProfile::per_node: a host wait after each node,
// CUDA events around each on the GPU). Each node is annotated with its shapes, dtype, bytes and
// FLOPs at the run's input shapes, placed on the roofline of the measured ceilings, and the whole
// is written as a Chrome trace-event file (trace.h) and summarised in a table.
//
//   ProfileOptions o; o.model = "bert.onnx"; o.session.device = Device{DeviceKind::kCuda, 0};
//   GPUOPT_ASSIGN_OR_RETURN(ProfileResult r, profile_model(o, feeds_fn));
//   Summary s = summarize(r, ceilings, /*top_k=*/10);
#pragma once

#include "core/status.h"
#include "core/tensor.h"
#include "gpuopt/session.h"

#include <nlohmann/json.hpp>

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace gpuopt::profile {

// One node at the run's input shapes.
struct NodeInfo {
  std::string name, op;
  std::string shapes;  // "f16[8,3,224,224] x f16[64,3,7,7] -> f16[8,64,112,112]"
  std::string dtype;   // the first output's dtype
  double bytes = 0;    // every input read once and every output written once
  double flops = 0;    // the op table's FLOP count (0 for data movement)
};

// The optimized graph's nodes with their shapes bound to `inputs` (index-aligned with
// graph.nodes(); a node folded away as shape arithmetic keeps its name with no shapes).
std::vector<NodeInfo> annotate_nodes(const Graph& graph, const NamedTensors& inputs);

// A host interval of the trace (load steps, warm-up runs, staging around the profiled run).
struct Span {
  std::string name, category;
  double start_us = 0, dur_us = 0;  // steady clock, microseconds
  nlohmann::json args = nlohmann::json::object();
};

// One kernel the GPU ran during a profiled run (a CUPTI activity record, kernels.h), its times
// on the host's steady clock (now_us).
struct KernelRecord {
  std::string name;  // demangled
  double start_us = 0, dur_us = 0;
  uint32_t device = 0, stream = 0, correlation = 0;
  std::array<int, 3> grid{}, block{};
  int node = -1;  // the graph node whose launch it belongs to (index into nodes); -1: between nodes
};

// What one profiled run measured.
struct ProfiledRun {
  double start_us = 0, end_us = 0;     // host, steady clock: Session::run called / returned
  RunProfile profile;                  // per-node times (same order as the graph's nodes)
  std::vector<KernelRecord> kernels;   // by start time; empty without CUPTI (kernels_note)
};

struct ProfileResult {
  std::string model, device, precision;
  int64_t batch = 1;
  std::vector<Span> spans;          // import, compile, warm-up runs
  std::vector<NodeInfo> nodes;      // annotate_nodes
  std::vector<ProfiledRun> runs;    // the node-by-node runs
  double normal_run_us = 0;         // median host time of the warm-up runs (no per-node waits)
  double normal_device_us = 0;      // their device time (CUDA), 0 on the CPU
  std::string normal_mode;          // how they ran: "graph", "eager", "" (CPU)
  // GPU kernels (CUPTI): whether they were recorded, and one line on why not (or on records
  // CUPTI dropped); both empty on the CPU.
  bool kernels_recorded = false;
  std::string kernels_note;
};

struct ProfileOptions {
  std::string model;
  SessionOptions session;
  int warmup = 3;  // ordinary runs first (plan caches, CUDA graph capture); timed as "normal"
  int runs = 1;    // node-by-node runs recorded
  bool kernels = true;  // CUDA: record each kernel of the node-by-node runs (CUPTI, kernels.h)
};

// Builds the inputs once the session is loaded (it knows the model's inputs).
using FeedsFn = std::function<Result<NamedTensors>(const Session&)>;
Result<ProfileResult> profile_model(const ProfileOptions& o, const FeedsFn& feeds);
// The node-by-node runs alone, on a session already loaded and warm (`gpuopt run --trace`):
// fills runs and nodes of `r` (and, on a CUDA session with `kernels`, each run's kernels).
Status profile_runs(const Session& s, const NamedTensors& feeds, int runs, ProfileResult* r, bool kernels = true);
// Microseconds on the steady clock, the time base of spans and NodeTime::start_us.
double now_us();

// Ceilings measured by `gpuopt bench` (its --json output or bench.json from --report).
struct Ceilings {
  std::string source;          // the file
  std::string device;          // the device the bench ran on
  double bandwidth_GBps = 0;   // best device-memory bandwidth (copy/read/write kernels)
  std::map<std::string, double> peak_TFLOPs;  // per dtype name ("f32", "f16", "bf16", "int8")
  // The peak for a node of this dtype (falls back to f32's), 0 when unknown.
  double peak_for(const std::string& dtype) const;
};
Result<Ceilings> read_ceilings(const std::string& path);

struct NodeRow {
  std::string name, op, device, dtype, shapes;
  int count = 0;          // runs it appears in
  double time_us = 0;     // mean per run: device time on the GPU, host wall time on the CPU
  double wall_us = 0;     // mean host wall time (launch to finished, with the wait)
  double bytes = 0, flops = 0;
  double share = 0;       // of the summed node time
  double gbps = 0, tflops = 0;
  double intensity = 0;   // FLOP/byte
  // With ceilings: "memory" or "compute" (intensity below/above the ridge), the roof at this
  // intensity (TFLOP/s for compute-heavy nodes, as GB/s equivalently) and the share of it reached.
  std::string bound;
  double roof_pct = -1;
  // GPU: the kernels it launched (CUPTI), by name with their summed time per run, slowest first.
  std::vector<std::pair<std::string, double>> kernels;
};

// One kernel name over the profiled runs (means per run).
struct KernelRow {
  std::string name;
  double calls = 0;     // launches per run
  double time_us = 0;   // summed duration per run
  double share = 0;     // of the summed kernel time
  int nodes = 0;        // distinct graph nodes that launched it
  std::string node, op; // the node it spent the most time in ("" between nodes)
};

struct Summary {
  int runs = 0;
  double run_us = 0;         // mean host time of a profiled run (Session::run)
  double node_wall_us = 0;   // mean sum of node wall times per run
  double node_time_us = 0;   // mean sum of node times (device time on the GPU)
  double host_gap_share = 0; // (run - node wall sum) / run: validation, staging, between nodes
  double device_busy_share = -1;  // GPU: node device time / run time; -1 on the CPU
  double normal_run_us = 0, normal_device_us = 0;
  std::string normal_mode;
  std::vector<NodeRow> nodes;  // every node, slowest first
  std::vector<NodeRow> top;    // the first top_k
  std::optional<Ceilings> ceilings;
  // GPU kernels by name (CUPTI), slowest first, the first top_k; their summed time per run.
  std::vector<KernelRow> kernels;
  double kernel_time_us = 0;
};
Summary summarize(const ProfileResult& r, const std::optional<Ceilings>& ceilings, int top_k);
std::string render_summary(const ProfileResult& r, const Summary& s);
nlohmann::json summary_json(const ProfileResult& r, const Summary& s);

}  // namespace gpuopt::profile
