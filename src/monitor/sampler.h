// The GPU sampler: reads every field of sampler_types.h from NVML at an interval on one thread,
// into buffers allocated once (no allocation per sample). Fields the driver lacks stay n/a; a
// field that answers NOT_SUPPORTED once is not asked again.
//
//   GPUOPT_ASSIGN_OR_RETURN(auto s, Sampler::create({.interval_s = 1}));
//   s->start([](const Snapshot& snap) { ... });   // on the sampler thread, after each sample
//   ...
//   s->stop();
// Every query group is timed (Snapshot::queries); slow or costly groups are read every Nth sample
// (SamplerOptions::slow_interval_s, slow_budget_s; docs/monitoring.md "Cadence").
// or, without a thread: `const Snapshot& snap = s->sample();` (twice for GPM and intervals).
#pragma once

#include "core/status.h"
#include "monitor/sampler_types.h"

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace gpuopt::nvml {
class Nvml;
}

namespace gpuopt::gpu {

struct SamplerOptions {
  double interval_s = 1.0;
  bool processes = true;  // per-process list, /proc details and process utilisation
  bool gpm = true;        // GPU performance metrics where the GPU supports them (Hopper+)
  bool events = true;     // XID events through an NVML event set
  // Query groups on the slow cadence (slow by default, or moved there at run time) are read
  // every round(slow_interval_s / interval_s) samples; their last values are kept in between.
  // slow_interval_s <= interval_s reads everything every sample.
  double slow_interval_s = 10;
  // A fast group whose cost per read (wall time, median of its last 5 reads) passes this budget
  // moves to the slow cadence. 0: never.
  double slow_budget_s = 0.002;
};

struct DriverInfo {
  std::string driver_version, nvml_version, cuda_driver_version;  // "" when unknown
};

// "1s", "250ms", "2.5", "1m" -> seconds (> 0). InvalidArgument naming the text otherwise.
Result<double> parse_interval(const std::string& text);

class Sampler {
 public:
  // Loads NVML (Unavailable without a driver) and reads each device's static info.
  static Result<std::unique_ptr<Sampler>> create(const SamplerOptions& options);
  ~Sampler();
  Sampler(const Sampler&) = delete;
  Sampler& operator=(const Sampler&) = delete;

  const std::vector<DeviceInfo>& devices() const { return devices_; }
  const DriverInfo& driver() const { return driver_; }
  const SamplerOptions& options() const { return options_; }
  // Slow-cadence groups are read every this many samples (>= 1).
  uint64_t slow_every() const;

  // Takes one sample on the calling thread; the reference stays valid until the next sample.
  const Snapshot& sample();

  // Samples every interval on a background thread and calls on_sample after each one (on that
  // thread; copy what you keep). stop() wakes it and joins; the destructor stops too.
  // first_after_interval: wait one interval before the first sample (the caller just took one).
  void start(std::function<void(const Snapshot&)> on_sample, bool first_after_interval = false);
  void stop();

  struct Impl;  // per-device NVML state (handles, GPM samples, unsupported-field flags)

 private:
  Sampler() = default;
  void loop();

  SamplerOptions options_;
  std::shared_ptr<nvml::Nvml> nvml_;
  std::vector<DeviceInfo> devices_;
  DriverInfo driver_;
  std::unique_ptr<Impl> impl_;
  Snapshot snap_;

  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  bool first_after_interval_ = false;
  std::function<void(const Snapshot&)> on_sample_;
};

}  // namespace gpuopt::gpu
