// SystemInfo -> JSON (`gpuopt info --json`). Absent values are null, never invented.
#include "monitor/system_info.h"

namespace gpuopt {
namespace {

using nlohmann::json;

template <typename T>
json opt(const std::optional<T>& v) {
  return v ? json(*v) : json(nullptr);
}

json gpu_json(const NvidiaGpu& g) {
  json peaks = json::object();
  for (PeakPrecision p : kAllPrecisions) peaks[peak_precision_name(p)] = opt(g.spec.peak(p));
  json cc = g.cc_major ? json(fmt::format("{}.{}", *g.cc_major, g.cc_minor.value_or(0))) : json(nullptr);
  return {
      {"index", g.index},
      {"cuda_index", opt(g.cuda_index)},
      {"name", opt(g.name)},
      {"uuid", opt(g.uuid)},
      {"pci_bus_id", opt(g.pci_bus_id)},
      {"memory", {{"total_bytes", opt(g.mem_total_bytes)},
                  {"free_bytes", opt(g.mem_free_bytes)},
                  {"used_bytes", opt(g.mem_used_bytes)},
                  {"reserved_bytes", opt(g.mem_reserved_bytes)}}},
      {"compute_capability", cc},
      {"architecture", g.spec.arch ? json(g.spec.arch->name) : json(nullptr)},
      {"sm_count", opt(g.sm_count)},
      {"sm_count_source", g.sm_count ? json(g.sm_count_from_nvml_cores ? "nvml_cores" : "cuda") : json(nullptr)},
      {"cuda_cores", g.spec.arch ? json(g.spec.cuda_cores) : json(nullptr)},
      {"tensor_core_generation", g.spec.arch ? json(g.spec.arch->tensor_core_gen) : json(nullptr)},
      {"max_sm_clock_mhz", opt(g.max_sm_clock_mhz)},
      {"max_mem_clock_mhz", opt(g.max_mem_clock_mhz)},
      {"mem_bus_width_bits", opt(g.mem_bus_width_bits)},
      {"l2_bytes", opt(g.l2_bytes)},
      {"theoretical", {{"mem_bandwidth_bytes_per_s", opt(g.spec.mem_bandwidth_bytes_per_s)},
                       {"sm_clock_mhz", g.spec.sm_clock_mhz},
                       {"peak_ops_per_s", peaks}}},
      {"power_limit_w", opt(g.power_limit_w)},
      {"enforced_power_limit_w", opt(g.enforced_power_limit_w)},
      {"default_power_limit_w", opt(g.default_power_limit_w)},
      {"pcie", {{"gen", opt(g.pcie.gen)},
                {"max_gen", opt(g.pcie.max_gen)},
                {"gpu_max_gen", opt(g.pcie.gpu_max_gen)},
                {"width", opt(g.pcie.width)},
                {"max_width", opt(g.pcie.max_width)}}},
      {"mig_enabled", opt(g.mig_enabled)},
      {"mig_pending", opt(g.mig_pending)},
      {"persistence_mode", opt(g.persistence_mode)},
      {"ecc_enabled", opt(g.ecc_enabled)},
      {"compute_mode", opt(g.compute_mode)},
      {"gpm_supported", opt(g.gpm_supported)},
      {"unavailable", g.unavailable},
  };
}

}  // namespace

nlohmann::json system_info_json(const SystemInfo& s) {
  json pci = json::array();
  for (const auto& p : s.pci_gpus) {
    pci.push_back({{"address", p.address},
                   {"vendor", p.vendor},
                   {"vendor_id", fmt::format("0x{:04x}", p.vendor_id)},
                   {"device_id", fmt::format("0x{:04x}", p.device_id)},
                   {"subsystem", fmt::format("0x{:04x}:0x{:04x}", p.subsystem_vendor_id, p.subsystem_device_id)},
                   {"class", fmt::format("0x{:06x}", p.class_code)},
                   {"driver", p.driver.empty() ? json(nullptr) : json(p.driver)},
                   {"numa_node", opt(p.numa_node)},
                   {"link_gen", opt(p.link_gen)},
                   {"link_width", opt(p.link_width)},
                   {"max_link_gen", opt(p.max_link_gen)},
                   {"max_link_width", opt(p.max_link_width)}});
  }
  json gpus = json::array();
  for (const auto& g : s.gpus) gpus.push_back(gpu_json(g));
  const HostInfo& h = s.host;
  return {
      {"host", {{"hostname", h.hostname},
                {"cpu_model", h.cpu_model},
                {"logical_cpus", h.logical_cpus},
                {"physical_cores", h.physical_cores ? json(h.physical_cores) : json(nullptr)},
                {"sockets", h.sockets ? json(h.sockets) : json(nullptr)},
                {"mem_total_bytes", opt(h.mem_total_bytes)},
                {"mem_available_bytes", opt(h.mem_available_bytes)},
                {"kernel", h.kernel},
                {"errors", h.errors}}},
      {"pci_gpus", pci},
      {"pci_error", s.pci_error.empty() ? json(nullptr) : json(s.pci_error)},
      {"nvml", {{"library", s.nvml_library},
                {"error", opt(s.nvml_error)},
                {"driver_version", opt(s.driver_version)},
                {"nvml_version", opt(s.nvml_version)},
                {"cuda_driver_version", opt(s.cuda_driver_version)},
                {"missing_optional_symbols", s.nvml_missing_symbols}}},
      {"cuda", {{"built_with_cuda", s.built_with_cuda},
                {"runtime_version", opt(s.cuda_runtime_version)},
                {"error", opt(s.cuda_error)}}},
      {"gpus", gpus},
  };
}

}  // namespace gpuopt
