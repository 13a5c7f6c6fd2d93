// The sample data model shared by the sampler, the diagnosis rules, the exporter and the TUI.
// Plain structs; every measured field is optional because drivers and GPUs differ in what they
// report: an empty optional prints as "n/a" (text), null (JSON) and is left out (Prometheus).
//
//   Snapshot s = sampler.latest();
//   for (const GpuSample& g : s.gpus)
//     if (g.gpu_util_pct) fmt::print("GPU {}: {}%\n", g.info->index, *g.gpu_util_pct);
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace gpuopt::gpu {

// Clock-event ("throttle") reason bits, as NVML defines them (nvmlClocksEventReason*).
enum ClockEventBit : uint64_t {
  kClockEventGpuIdle = 0x1,
  kClockEventAppClocksSetting = 0x2,
  kClockEventSwPowerCap = 0x4,
  kClockEventHwSlowdown = 0x8,
  kClockEventSyncBoost = 0x10,
  kClockEventSwThermal = 0x20,
  kClockEventHwThermal = 0x40,
  kClockEventHwPowerBrake = 0x80,
  kClockEventDisplayClock = 0x100,
};

struct ClockEventReason {
  uint64_t bit;
  const char* name;  // label value in metrics, e.g. "sw_power_cap"
  const char* text;  // for people
};
// Every reason we name, in a fixed order (index = slot in GpuSample::clock_event_seconds).
inline constexpr std::array<ClockEventReason, 9> kClockEventReasons = {{
    {kClockEventGpuIdle, "gpu_idle", "GPU idle"},
    {kClockEventAppClocksSetting, "app_clocks_setting", "application clocks setting"},
    {kClockEventSwPowerCap, "sw_power_cap", "software power cap"},
    {kClockEventHwSlowdown, "hw_slowdown", "hardware slowdown"},
    {kClockEventSyncBoost, "sync_boost", "sync boost"},
    {kClockEventSwThermal, "sw_thermal", "software thermal slowdown"},
    {kClockEventHwThermal, "hw_thermal", "hardware thermal slowdown"},
    {kClockEventHwPowerBrake, "hw_power_brake", "hardware power brake"},
    {kClockEventDisplayClock, "display_clock", "display clock setting"},
}};

// What does not change while the sampler runs: read once when it starts.
struct DeviceInfo {
  unsigned index = 0;
  std::string name;        // "NVIDIA H200"
  std::string uuid;        // "GPU-5b7c..."
  std::string pci_bus_id;  // "00000000:19:00.0"
  std::string device;      // "nvidia0" (DCGM's `device` label: /dev node name)
  std::optional<int> cc_major, cc_minor;
  std::optional<unsigned> sm_clock_max_mhz, mem_clock_max_mhz;
  bool gpm_supported = false;  // GPU performance metrics (Hopper and newer)
};

// One process using a GPU. Fixed-size text buffers so a sample allocates nothing.
struct ProcessSample {
  unsigned pid = 0;
  char type = 'C';                           // 'C' compute, 'G' graphics, 'M' both
  std::optional<uint64_t> gpu_memory_bytes;  // n/a under some MIG / Windows-style drivers
  std::optional<unsigned> sm_util_pct;       // nvmlDeviceGetProcessUtilization, when given
  std::optional<unsigned> mem_util_pct;
  char user[32] = {};           // "" when /proc does not tell (other namespaces)
  char command[96] = {};        // command line, NULs replaced by spaces, truncated
  char container_id[72] = {};   // from /proc/PID/cgroup, "" outside a container
  bool proc_read = false;       // user/command/container were read from /proc for this pid
};

// GPM-derived activity, as fractions 0..1 (DCGM's DCGM_FI_PROF_* convention).
struct GpmSample {
  std::optional<double> graphics_active;  // DCGM_FI_PROF_GR_ENGINE_ACTIVE
  std::optional<double> sm_active;        // DCGM_FI_PROF_SM_ACTIVE
  std::optional<double> sm_occupancy;     // DCGM_FI_PROF_SM_OCCUPANCY
  std::optional<double> tensor_active;    // DCGM_FI_PROF_PIPE_TENSOR_ACTIVE
  std::optional<double> dram_active;      // DCGM_FI_PROF_DRAM_ACTIVE
  std::optional<double> fp64_active, fp32_active, fp16_active;
  std::optional<double> pcie_tx_bytes_per_s, pcie_rx_bytes_per_s;  // DCGM_FI_PROF_PCIE_[TR]X_BYTES
  std::optional<double> nvlink_tx_bytes_per_s, nvlink_rx_bytes_per_s;
};

inline constexpr size_t kMaxProcessesPerGpu = 64;

// The sampler's NVML queries in groups, each timed on its own (self-bench, /metrics self-metrics)
// and read on its own cadence: every sample ("fast") or every Nth sample ("slow"), DCGM-style.
enum class QueryGroup : uint8_t {
  kXidEvents, kUtilization, kMemory, kTemperature, kMemoryTemperature, kPower, kPowerLimit, kEnergy,
  kClocks, kClockEventReasons, kPcieReplay, kEcc, kMig, kGpm, kPcieThroughput, kProcessList,
  kProcessUtilization, kProcFiles, kCount  // the order the sampler reads them in
};
inline constexpr size_t kQueryGroupCount = size_t(QueryGroup::kCount);

struct QueryGroupInfo {
  const char* name;   // label value: query="ecc"
  const char* calls;  // what one read of the group calls, for people
  bool slow_by_default;  // changes slowly or costs a lot: read on the slow cadence from the start
};
const QueryGroupInfo& query_group_info(QueryGroup q);
inline const QueryGroupInfo& query_group_info(size_t q) { return query_group_info(QueryGroup(q)); }

// Cumulative cost of one query group since the sampler started (all GPUs together). One call is
// one read of the group for one GPU (several NVML functions for some groups, e.g. ECC's four).
struct QueryStat {
  uint64_t calls = 0;
  double wall_s = 0;  // steady clock around the calls
  double cpu_s = 0;   // CPU time of the sampling thread over the calls (user + kernel)
  bool slow = false;  // read every `slow_every` samples
  bool moved = false; // moved to the slow cadence at run time: its cost passed the budget
  double moved_median_s = 0;  // the median of its last 5 reads when it moved
};

struct GpuSample {
  const DeviceInfo* info = nullptr;
  bool lost = false;  // the device stopped answering (GPU fell off the bus, driver reset)
  std::optional<unsigned> gpu_util_pct, mem_util_pct;  // nvmlDeviceGetUtilizationRates
  std::optional<uint64_t> mem_total_bytes, mem_used_bytes, mem_free_bytes, mem_reserved_bytes;
  std::optional<unsigned> temp_gpu_c, temp_mem_c;
  std::optional<double> power_w, power_limit_w;
  std::optional<uint64_t> energy_mj;  // since the driver loaded
  std::optional<unsigned> sm_clock_mhz, mem_clock_mhz;
  std::optional<uint64_t> pcie_tx_kbps, pcie_rx_kbps;  // KB/s, nvmlDeviceGetPcieThroughput
  std::optional<uint64_t> pcie_replay_count;
  std::optional<uint64_t> clock_event_reasons;  // bitmask of ClockEventBit
  // Seconds each reason was active since the sampler started (sum of whole intervals).
  std::array<double, kClockEventReasons.size()> clock_event_seconds{};
  std::optional<uint64_t> ecc_corrected_volatile, ecc_uncorrected_volatile;
  std::optional<uint64_t> ecc_corrected_aggregate, ecc_uncorrected_aggregate;
  std::optional<uint64_t> xid_count;  // XID events seen since the sampler started
  std::optional<uint64_t> last_xid;   // the last XID code (DCGM_FI_DEV_XID_ERRORS)
  std::optional<bool> mig_enabled;
  std::optional<unsigned> mig_device_count;
  GpmSample gpm;
  std::vector<ProcessSample> processes;  // capacity kMaxProcessesPerGpu, reserved once
  bool processes_available = false;       // false: the driver would not list them
  // Wall clock (us since the epoch) when each query group's fields were last read on this GPU;
  // 0 = never. A slow-cadence group's values are the ones read then, re-exported in between.
  std::array<int64_t, kQueryGroupCount> read_us{};
};

struct Snapshot {
  int64_t timestamp_us = 0;   // wall clock (microseconds since the epoch)
  double interval_s = 0;      // time since the previous sample (0 for the first)
  uint64_t sequence = 0;      // 1 for the first sample
  double sample_duration_s = 0;  // how long the NVML queries of this sample took
  double sample_seconds_total = 0;  // sum of sample_duration_s since the sampler started
  uint64_t slow_every = 1;          // slow-cadence groups are read every this many samples
  std::array<QueryStat, kQueryGroupCount> queries{};  // per query group, cumulative
  std::vector<GpuSample> gpus;
};

// Memory used as a fraction of total (prefers used+free+reserved as the denominator).
std::optional<double> memory_used_fraction(const GpuSample& g);

// "n/a" when empty; otherwise fmt-formatted.
std::string na_or(const std::optional<unsigned>& v, const char* suffix = "");
std::string na_or(const std::optional<double>& v, int decimals, const char* suffix = "");

}  // namespace gpuopt::gpu
