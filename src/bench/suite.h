// `gpuopt bench`: each benchmark as a Section (table, JSON, plot), composed from the GPU
// primitives of gpu.h and the counts of counts.h. GPU sections say "skipped: no CUDA device"
// on machines without one; the CPU half of cpu-vs-gpu runs anyway.
//
//   SuiteOptions o;                       // defaults = what `gpuopt bench all` runs
//   GpuContext g = open_gpu(o.device);
//   Section s = bench_memory(o, g);
#pragma once

#include "bench/device.h"
#include "bench/gpu.h"
#include "bench/result.h"
#include "bench/telemetry.h"

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace gpuopt::bench {

struct SuiteOptions {
  int device = 0;
  int repeat = 0;                        // samples per measurement; 0 = each benchmark's default
  std::vector<uint64_t> memory_sizes;    // bytes; default 1 MiB .. 4 GiB, powers of two
  std::vector<uint64_t> transfer_sizes;  // bytes; default 1 MiB, 16 MiB, 256 MiB, 1 GiB
  std::vector<int> gemm_sizes;           // default 1024 .. 16384, powers of two
  std::vector<GemmType> gemm_types;      // default all six
  int f32_max_n = 0;                     // skip strict-f32 GEMM above this n (0: no limit)
  int max_algos = 4;                     // cuBLASLt heuristic candidates timed per size
  bool fma = true, gemm = true;
  std::vector<RooflineType> roofline_types;          // default f32, f16
  uint64_t roofline_words = uint64_t{1} << 26;       // 256 MiB per buffer
  std::vector<int> cpu_sizes;                        // default 256 .. 8192
  bool check = false;                                // run the GPU correctness checks first
  std::function<void(const std::string&)> progress;  // one line per step (stderr)
};

// Fills the defaults left empty.
void apply_defaults(SuiteOptions* o);
// Parses "1M,64M,4G" (K/M/G = KiB/MiB/GiB, plain numbers are bytes).
Result<std::vector<uint64_t>> parse_byte_sizes(const std::string& text);
Result<std::vector<int>> parse_ints(const std::string& text);

struct GpuContext {
  std::optional<DeviceInfo> device;  // nullopt: no usable GPU
  std::string why_not;               // "no CUDA device", or the error
  TelemetryReader telemetry;
};
GpuContext open_gpu(int device);
nlohmann::json context_json(const GpuContext& g);

Section bench_memory(const SuiteOptions& o, const GpuContext& g);
Section bench_compute(const SuiteOptions& o, const GpuContext& g);
Section bench_roofline(const SuiteOptions& o, const GpuContext& g);
Section bench_latency(const SuiteOptions& o, const GpuContext& g);
Section bench_cpu_vs_gpu(const SuiteOptions& o, const GpuContext& g);

// Roofline intensities 1/8 .. 1024 FLOP/byte.
std::vector<double> roofline_intensities();
// "1/8", "1/2", "4"
std::string intensity_label(double i);

}  // namespace gpuopt::bench
