// Everything `gpuopt info` reports, gathered from procfs, sysfs, the CUDA runtime and NVML, with
// theoretical peaks from the spec table. Each source may be missing; what it would have given is
// then absent (n/a) and the reason is kept in one line.
//
//   SystemInfo s = collect_system_info();
//   for (const NvidiaGpu& g : s.gpus) use(g.spec.peak(PeakPrecision::BF16));
//   fmt::print("{}\n", system_info_json(s).dump(2));
#pragma once

#include "monitor/host_info.h"
#include "monitor/nvml.h"
#include "monitor/spec_table.h"

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

namespace gpuopt {

struct NvidiaGpu {
  unsigned index = 0;  // NVML index (CUDA index when NVML is unavailable)
  std::optional<int> cuda_index;
  std::optional<std::string> name, uuid, pci_bus_id;
  std::optional<unsigned long long> mem_total_bytes, mem_free_bytes, mem_used_bytes, mem_reserved_bytes;
  std::optional<int> cc_major, cc_minor;
  std::optional<int> sm_count;
  bool sm_count_from_nvml_cores = false;  // derived as NVML core count / FP32 cores per SM
  std::optional<unsigned> max_sm_clock_mhz, max_mem_clock_mhz;
  std::optional<int> mem_bus_width_bits, l2_bytes;
  DeviceSpec spec;  // peaks; spec.arch null when the architecture is unknown
  std::optional<double> power_limit_w, enforced_power_limit_w, default_power_limit_w;
  nvml::PcieLink pcie;
  std::optional<bool> mig_enabled, mig_pending, persistence_mode, ecc_enabled;
  std::optional<std::string> compute_mode;
  std::optional<bool> gpm_supported;
  std::vector<std::string> unavailable;  // "power limit: Not Supported (NVML_ERROR_NOT_SUPPORTED)"
};

struct SystemInfo {
  HostInfo host;
  std::vector<PciGpu> pci_gpus;
  std::string pci_error;  // sysfs unreadable
  std::string nvml_library;
  std::optional<std::string> nvml_error;  // one line: why NVML gave nothing
  std::optional<std::string> driver_version, nvml_version, cuda_driver_version;
  std::vector<std::string> nvml_missing_symbols;  // optional symbols the library lacks
  bool built_with_cuda = false;
  std::optional<std::string> cuda_runtime_version;
  std::optional<std::string> cuda_error;  // one line: why the CUDA runtime gave nothing
  std::vector<NvidiaGpu> gpus;
};

SystemInfo collect_system_info();
nlohmann::json system_info_json(const SystemInfo& s);

// "0000:19:00.0" and "00000000:19:00.0" name the same function; lower-case, 4-digit domain.
std::string normalize_bus_id(const std::string& id);

}  // namespace gpuopt
