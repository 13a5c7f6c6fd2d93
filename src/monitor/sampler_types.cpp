#include "monitor/sampler_types.h"

#include <fmt/format.h>

namespace gpuopt::gpu {

const QueryGroupInfo& query_group_info(QueryGroup q) {
  // Slow by default (read every --slow-interval): counters and settings that change rarely, and
  // the known costly ones (PCIe throughput samples 20 ms per call inside the driver; per-process
  // utilisation walks the driver's sample buffer). The rest is read every interval.
  static const QueryGroupInfo kInfo[kQueryGroupCount + 1] = {
      {"xid_events", "nvmlEventSetWait (timeout 0) until empty", false},
      {"utilization", "nvmlDeviceGetUtilizationRates", false},
      {"memory", "nvmlDeviceGetMemoryInfo_v2", false},
      {"temperature", "nvmlDeviceGetTemperature", false},
      {"memory_temperature", "nvmlDeviceGetFieldValues (memory temperature)", false},
      {"power", "nvmlDeviceGetPowerUsage", false},
      {"power_limit", "nvmlDeviceGetEnforcedPowerLimit", true},
      {"energy", "nvmlDeviceGetTotalEnergyConsumption", false},
      {"clocks", "nvmlDeviceGetClockInfo (SM, memory)", false},
      {"clock_event_reasons", "nvmlDeviceGetCurrentClocksEventReasons", false},
      {"pcie_replay", "nvmlDeviceGetPcieReplayCounter", true},
      {"ecc", "nvmlDeviceGetTotalEccErrors x4", true},
      {"mig", "nvmlDeviceGetMigMode (+ MIG handles)", true},
      {"gpm", "nvmlGpmSampleGet + nvmlGpmMetricsGet", false},
      {"pcie_throughput", "nvmlDeviceGetPcieThroughput (TX, RX) without GPM PCIe", true},
      {"process_list", "nvmlDeviceGet{Compute,Graphics}RunningProcesses", false},
      {"process_utilization", "nvmlDeviceGetProcessUtilization", true},
      {"proc_files", "/proc/PID/{status,cmdline,cgroup} (not NVML)", false},
      {"?", "", false},
  };
  size_t i = size_t(q);
  return kInfo[i < kQueryGroupCount ? i : kQueryGroupCount];
}

std::optional<double> memory_used_fraction(const GpuSample& g) {
  if (!g.mem_used_bytes) return std::nullopt;
  // NVML v2: total = used + free + reserved; prefer the sum, so reserved counts as unavailable
  // and the fraction matches what an allocation can still get.
  double total = 0;
  if (g.mem_total_bytes) total = double(*g.mem_total_bytes);
  else if (g.mem_free_bytes) total = double(*g.mem_used_bytes + *g.mem_free_bytes + g.mem_reserved_bytes.value_or(0));
  if (total <= 0) return std::nullopt;
  double used = double(*g.mem_used_bytes + g.mem_reserved_bytes.value_or(0));
  return used / total;
}

std::string na_or(const std::optional<unsigned>& v, const char* suffix) {
  return v ? fmt::format("{}{}", *v, suffix) : std::string("n/a");
}

std::string na_or(const std::optional<double>& v, int decimals, const char* suffix) {
  return v ? fmt::format("{:.{}f}{}", *v, decimals, suffix) : std::string("n/a");
}

}  // namespace gpuopt::gpu
