#include "monitor/sampler_json.h"

#include <fmt/format.h>

namespace gpuopt::gpu {

namespace {

template <typename T>
nlohmann::json opt(const std::optional<T>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

}  // namespace

nlohmann::json snapshot_to_json(const Snapshot& s, const std::vector<Finding>& findings) {
  using nlohmann::json;
  json gpus = json::array();
  for (const GpuSample& g : s.gpus) {
    const DeviceInfo empty;
    const DeviceInfo& i = g.info ? *g.info : empty;
    json reasons = json::array();
    if (g.clock_event_reasons)
      for (const auto& r : kClockEventReasons)
        if (*g.clock_event_reasons & r.bit) reasons.push_back(r.name);
    json procs = json::array();
    for (const ProcessSample& p : g.processes) {
      procs.push_back({{"pid", p.pid},
                       {"type", std::string(1, p.type)},
                       {"user", p.user},
                       {"command", p.command},
                       {"container_id", p.container_id[0] ? json(p.container_id) : json(nullptr)},
                       {"gpu_memory_bytes", opt(p.gpu_memory_bytes)},
                       {"sm_util_pct", opt(p.sm_util_pct)},
                       {"mem_util_pct", opt(p.mem_util_pct)}});
    }
    // Slow-cadence groups not read in this sample: when their values were read.
    json cached = json::object();
    for (size_t k = 0; k < kQueryGroupCount; ++k)
      if (s.queries[k].slow && g.read_us[k] > 0 && g.read_us[k] != s.timestamp_us)
        cached[query_group_info(k).name] = double(g.read_us[k]) / 1e6;
    std::optional<double> frac = memory_used_fraction(g);
    gpus.push_back(json{
        {"index", i.index},
        {"name", i.name},
        {"uuid", i.uuid},
        {"pci_bus_id", i.pci_bus_id},
        {"compute_capability", i.cc_major ? json(fmt::format("{}.{}", *i.cc_major, i.cc_minor.value_or(0))) : json(nullptr)},
        {"lost", g.lost},
        {"gpu_util_pct", opt(g.gpu_util_pct)},
        {"mem_util_pct", opt(g.mem_util_pct)},
        {"memory_total_bytes", opt(g.mem_total_bytes)},
        {"memory_used_bytes", opt(g.mem_used_bytes)},
        {"memory_free_bytes", opt(g.mem_free_bytes)},
        {"memory_reserved_bytes", opt(g.mem_reserved_bytes)},
        {"memory_used_fraction", opt(frac)},
        {"temperature_gpu_c", opt(g.temp_gpu_c)},
        {"temperature_memory_c", opt(g.temp_mem_c)},
        {"power_w", opt(g.power_w)},
        {"power_limit_w", opt(g.power_limit_w)},
        {"energy_mj", opt(g.energy_mj)},
        {"sm_clock_mhz", opt(g.sm_clock_mhz)},
        {"sm_clock_max_mhz", opt(i.sm_clock_max_mhz)},
        {"mem_clock_mhz", opt(g.mem_clock_mhz)},
        {"mem_clock_max_mhz", opt(i.mem_clock_max_mhz)},
        {"pcie_tx_kbps", opt(g.pcie_tx_kbps)},
        {"pcie_rx_kbps", opt(g.pcie_rx_kbps)},
        {"pcie_replay_count", opt(g.pcie_replay_count)},
        {"clock_event_reasons_mask", opt(g.clock_event_reasons)},
        {"clock_event_reasons", g.clock_event_reasons ? reasons : json(nullptr)},
        {"ecc_corrected_volatile", opt(g.ecc_corrected_volatile)},
        {"ecc_uncorrected_volatile", opt(g.ecc_uncorrected_volatile)},
        {"ecc_corrected_aggregate", opt(g.ecc_corrected_aggregate)},
        {"ecc_uncorrected_aggregate", opt(g.ecc_uncorrected_aggregate)},
        {"xid_count", opt(g.xid_count)},
        {"last_xid", opt(g.last_xid)},
        {"mig_enabled", opt(g.mig_enabled)},
        {"mig_device_count", opt(g.mig_device_count)},
        {"gpm_supported", i.gpm_supported},
        {"gpm",
         {{"graphics_active", opt(g.gpm.graphics_active)},
          {"sm_active", opt(g.gpm.sm_active)},
          {"sm_occupancy", opt(g.gpm.sm_occupancy)},
          {"tensor_active", opt(g.gpm.tensor_active)},
          {"dram_active", opt(g.gpm.dram_active)},
          {"fp64_active", opt(g.gpm.fp64_active)},
          {"fp32_active", opt(g.gpm.fp32_active)},
          {"fp16_active", opt(g.gpm.fp16_active)},
          {"pcie_tx_bytes_per_s", opt(g.gpm.pcie_tx_bytes_per_s)},
          {"pcie_rx_bytes_per_s", opt(g.gpm.pcie_rx_bytes_per_s)},
          {"nvlink_tx_bytes_per_s", opt(g.gpm.nvlink_tx_bytes_per_s)},
          {"nvlink_rx_bytes_per_s", opt(g.gpm.nvlink_rx_bytes_per_s)}}},
        {"processes", g.processes_available ? procs : json(nullptr)},
        {"cached", cached},
    });
  }
  json diag = json::array();
  for (const Finding& f : findings)
    diag.push_back({{"gpu", f.gpu},
                    {"rule", rule_name(f.rule)},
                    {"severity", severity_name(f.severity)},
                    {"title", f.title},
                    {"detail", f.detail},
                    {"advice", f.advice}});
  return {{"timestamp", double(s.timestamp_us) / 1e6},
          {"sequence", s.sequence},
          {"interval_s", s.interval_s},
          {"gpus", gpus},
          {"diagnosis", diag}};
}

}  // namespace gpuopt::gpu
