// What one run measured: RunProfile (and NodeTime per node), filled by Session::run with a profile
// and by every backend's Executable::run (backends/backend.h), so both include this header.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace gpuopt {

// One node of a profiled run (gpuopt run --profile).
struct NodeTime {
  std::string node;    // node name
  std::string op;      // op type
  std::string device;  // where it ran: "cpu" or "cuda"
  double wall_us = 0;  // host time from its launch until its work finished (includes copies)
  double gpu_us = 0;   // device time between events around it (0 on the CPU)
  // When it started, for traces (gpuopt profile): host time in microseconds on the steady
  // clock; device time in microseconds after the first node's launch event (-1 on the CPU).
  double start_us = 0;
  double gpu_start_us = -1;
};

// What one run measured (Session::run with a profile, RunOptions::profile).
struct RunProfile {
  bool per_node = false;                // ask for per-node times (the run goes node by node)
  int64_t peak_intermediate_bytes = 0;  // largest sum of live intermediates (CPU backend)
  // How the CUDA backend ran it: "eager" (node by node), "capture" (recorded as a CUDA graph
  // this time), "graph" (replayed); "" on the CPU.
  std::string mode;
  std::string graph_note;               // why this shape runs eager, when capture was refused
  // CUDA: device time of the compute alone (inputs already uploaded, outputs not yet copied
  // back), from events: what PyTorch's CUDA-event timings measure. 0 on the CPU.
  double device_us = 0;
  // CUDA: the most device memory the session's tensors (constants, inputs, intermediates,
  // outputs, large library workspaces) have held at once so far, from its pool. 0 on the CPU.
  int64_t peak_device_bytes = 0;
  std::vector<NodeTime> nodes;          // filled when per_node
};

}  // namespace gpuopt
