// Internals of the sampler shared by sampler.cpp (create, the per-sample schedule, timing) and
// sampler_queries.cpp (one read function per query group). Not a public header.
#pragma once

#include "monitor/nvml.h"
#include "monitor/sampler.h"

#include <array>
#include <chrono>
#include <memory>
#include <optional>
#include <vector>

namespace gpuopt::gpu {

// Fields that may answer NOT_SUPPORTED; once they do, the sampler stops asking.
enum Field : size_t {
  kFUtil,
  kFMem,
  kFTemp,
  kFMemTemp,
  kFPower,
  kFPowerLimit,
  kFEnergy,
  kFSmClock,
  kFMemClock,
  kFPcie,
  kFReplay,
  kFReasons,
  kFEcc,
  kFMig,
  kFProcs,
  kFProcUtil,
  kFGpm,
  kFieldCount
};

struct Sampler::Impl {
  struct Dev {
    nvml::Device handle = nullptr;
    std::array<bool, kFieldCount> off{};
    bool lost = false;
    // GPM: two samples used alternately; metrics need the previous and the current one.
    std::optional<nvml::GpmSampleHandle> gpm[2];
    int gpm_cur = 0;
    bool gpm_have_prev = false;
    bool gpm_pcie = false;  // GPM gave PCIe bytes: skip the slower nvmlDeviceGetPcieThroughput
    unsigned long long last_proc_util_ts = 0;
    unsigned mig_max = 0;
    uint64_t xid_count = 0;
    std::optional<uint64_t> last_xid;
    // Sample number of each group's last read (0 = never) and the sampling time elapsed since:
    // a group read every Nth sample accumulates clock-event seconds over the N intervals.
    std::array<uint64_t, kQueryGroupCount> last_read_seq{};
    std::array<double, kQueryGroupCount> elapsed_s{};
    std::vector<ProcessSample> prev_procs;  // the last list, to carry per-pid values (capacity 64)
  };
  std::vector<Dev> devs;
  std::unique_ptr<nvml::GpmMetricsGet> gpm_req;  // ~13 KB, reused every tick
  std::vector<nvml::ProcessInfo> proc_buf;       // capacity kMaxProcessesPerGpu
  std::vector<nvml::ProcessInfoV1> proc_buf_v1;
  std::vector<nvml::ProcessUtilizationSample> util_buf;
  std::unique_ptr<nvml::EventWatcher> events;
  std::chrono::steady_clock::time_point last_tick{};
  bool have_last_tick = false;
  uint64_t slow_every = 1;
  std::array<QueryStat, kQueryGroupCount> stats{};
  static constexpr size_t kRecentReads = 5;  // per group: wall time of the last reads (ring)
  std::array<std::array<double, kRecentReads>, kQueryGroupCount> recent{};
  double sample_seconds_total = 0;
};

// What one group's read function works on: one GPU in one sample.
struct QueryCtx {
  const nvml::Api& api;
  Sampler::Impl& im;
  Sampler::Impl::Dev& dev;
  GpuSample& g;
  double elapsed_s;  // sampling time since this group was last read on this GPU (0 the first time)
  int64_t now_us;    // the sample's wall-clock time
  bool processes;    // SamplerOptions::processes

  // Success; NOT_SUPPORTED turns the field off for good; GPU_IS_LOST marks the device.
  bool ok(Field f, nvml::Return r) {
    if (r == nvml::kSuccess) return true;
    if (r == nvml::kErrorNotSupported || r == nvml::kErrorFunctionNotFound) dev.off[f] = true;
    if (r == nvml::kErrorGpuIsLost) dev.lost = true;
    return false;
  }
  bool want(Field f, const void* fn) const { return fn && !dev.off[f] && !dev.lost; }
};

// Reads one query group into ctx.g (clearing that group's fields first, so a failed read is n/a,
// never a stale value). Returns whether it called the driver (or /proc) at all: a group turned
// off or absent from the driver costs nothing and is not counted.
bool read_query_group(QueryGroup q, QueryCtx& ctx);

}  // namespace gpuopt::gpu
