// Chrome trace-event JSON (the format chrome://tracing, Perfetto and speedscope open): a JSON
// object {"traceEvents": [...], "displayTimeUnit": "ms"}; complete events ("ph": "X") with
// ts/dur in microseconds, metadata events ("ph": "M") naming each process and thread (track).
//
//   TraceWriter w;
//   int host = w.track(1, "host");
//   w.complete(1, host, "conv1", "node", 12.0, 40.5, {{"op", "Conv"}});
//   GPUOPT_RETURN_IF_ERROR(w.write("run.trace.json"));
#pragma once

#include "core/status.h"
#include "profile/profile.h"

#include <nlohmann/json.hpp>

#include <string>

namespace gpuopt::profile {

class TraceWriter {
 public:
  // Names process `pid` (once) and returns a new track (thread id) in it named `name`; tracks
  // are listed in creation order.
  int track(int pid, const std::string& process_name, const std::string& name);
  // A complete event: [ts, ts+dur) in microseconds from the trace's origin.
  void complete(int pid, int tid, const std::string& name, const std::string& cat, double ts, double dur,
                nlohmann::json args = nlohmann::json::object());
  // A counter sample (ph "C"), e.g. queue depth.
  void counter(int pid, const std::string& name, double ts, nlohmann::json values);
  nlohmann::json to_json() const;
  Status write(const std::string& path) const;
  size_t events() const { return events_.size(); }

 private:
  nlohmann::json events_ = nlohmann::json::array();
  std::vector<int> named_pids_;
  int next_tid_ = 1;
};

// The trace of a profile: process 1 "gpuopt <model>" with a host track (load steps, warm-up
// runs, each profiled run with staging and every node's launch) and, when nodes ran on the GPU,
// a track for the stream with every device node (name, op, shapes, dtype, bytes, FLOPs), and
// with CUPTI's kernels (ProfiledRun::kernels) one track per (device, stream) with every kernel
// by name (args: node and op that launched it, grid, block, stream). Times are relative to the
// first span. Kernels are on the host clock already; the node track is placed against it by the
// median gap between each node's event start and its first kernel, or without kernels so that
// no node starts on the GPU before its launch began (the smallest such shift).
nlohmann::json profile_trace(const ProfileResult& r);

// Writes a trace (or any JSON) to `path`; the error names the file.
Status write_trace_file(const std::string& path, const nlohmann::json& trace);

}  // namespace gpuopt::profile
