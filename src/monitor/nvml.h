// NVML loaded at run time: dlopen("libnvidia-ml.so.1") (GPUOPT_NVML_LIBRARY overrides it), every
// function looked up newest-first (_v3 -> _v2 -> plain), versioned structs filled with the real
// NVML_STRUCT_VERSION constant. Required symbols missing = "NVML unusable: <lib> lacks <symbol>";
// an optional one missing = that query answers kUnimplemented and the caller prints n/a.
//
//   GPUOPT_ASSIGN_OR_RETURN(auto nv, nvml::Nvml::load());          // Unavailable when no driver
//   GPUOPT_ASSIGN_OR_RETURN(unsigned n, nv->device_count());
//   GPUOPT_ASSIGN_OR_RETURN(nvml::Device d, nv->device(0));
//   Result<unsigned> mw = nv->power_usage_mw(d);                     // !ok() -> print "n/a"
//
// Raw calls go through the table with the checking macro:
//   GPUOPT_CHECK_CALL(nv->api().device_get_power_usage(d, &mw));
#pragma once

#include "core/status.h"
#include "monitor/nvml_types.h"

#include <array>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace gpuopt::nvml {

template <typename Sig>
using FnPtr = Sig*;

// X(required, member, signature, symbol names newest first...)
#define GPUOPT_NVML_FUNCTIONS(X)                                                                              \
  X(true, init, Return(), "nvmlInit_v2", "nvmlInit")                                                          \
  X(true, shutdown, Return(), "nvmlShutdown")                                                                 \
  X(true, device_get_count, Return(unsigned int*), "nvmlDeviceGetCount_v2", "nvmlDeviceGetCount")             \
  X(true, device_get_handle_by_index, Return(unsigned int, Device*), "nvmlDeviceGetHandleByIndex_v2",         \
    "nvmlDeviceGetHandleByIndex")                                                                             \
  X(false, error_string, const char*(Return), "nvmlErrorString")                                              \
  X(false, system_get_driver_version, Return(char*, unsigned int), "nvmlSystemGetDriverVersion")              \
  X(false, system_get_nvml_version, Return(char*, unsigned int), "nvmlSystemGetNVMLVersion")                  \
  X(false, system_get_cuda_driver_version, Return(int*), "nvmlSystemGetCudaDriverVersion_v2",                 \
    "nvmlSystemGetCudaDriverVersion")                                                                         \
  X(false, device_get_name, Return(Device, char*, unsigned int), "nvmlDeviceGetName")                         \
  X(false, device_get_uuid, Return(Device, char*, unsigned int), "nvmlDeviceGetUUID")                         \
  X(false, device_get_index, Return(Device, unsigned int*), "nvmlDeviceGetIndex")                             \
  X(false, device_get_pci_info, Return(Device, PciInfo*), "nvmlDeviceGetPciInfo_v3", "nvmlDeviceGetPciInfo_v2", \
    "nvmlDeviceGetPciInfo")                                                                                   \
  X(false, device_get_memory_info_v2, Return(Device, MemoryV2*), "nvmlDeviceGetMemoryInfo_v2")                \
  X(false, device_get_memory_info, Return(Device, Memory*), "nvmlDeviceGetMemoryInfo")                        \
  X(false, device_get_utilization_rates, Return(Device, Utilization*), "nvmlDeviceGetUtilizationRates")       \
  X(false, device_get_temperature, Return(Device, TemperatureSensor, unsigned int*), "nvmlDeviceGetTemperature") \
  X(false, device_get_field_values, Return(Device, int, FieldValue*), "nvmlDeviceGetFieldValues")             \
  X(false, device_get_power_usage, Return(Device, unsigned int*), "nvmlDeviceGetPowerUsage")                  \
  X(false, device_get_power_management_limit, Return(Device, unsigned int*), "nvmlDeviceGetPowerManagementLimit") \
  X(false, device_get_power_management_default_limit, Return(Device, unsigned int*),                          \
    "nvmlDeviceGetPowerManagementDefaultLimit")                                                               \
  X(false, device_get_enforced_power_limit, Return(Device, unsigned int*), "nvmlDeviceGetEnforcedPowerLimit") \
  X(false, device_get_total_energy_consumption, Return(Device, unsigned long long*),                          \
    "nvmlDeviceGetTotalEnergyConsumption")                                                                    \
  X(false, device_get_clock_info, Return(Device, ClockType, unsigned int*), "nvmlDeviceGetClockInfo")         \
  X(false, device_get_max_clock_info, Return(Device, ClockType, unsigned int*), "nvmlDeviceGetMaxClockInfo")  \
  X(false, device_get_curr_pcie_link_generation, Return(Device, unsigned int*),                               \
    "nvmlDeviceGetCurrPcieLinkGeneration")                                                                    \
  X(false, device_get_max_pcie_link_generation, Return(Device, unsigned int*), "nvmlDeviceGetMaxPcieLinkGeneration") \
  X(false, device_get_gpu_max_pcie_link_generation, Return(Device, unsigned int*),                            \
    "nvmlDeviceGetGpuMaxPcieLinkGeneration")                                                                  \
  X(false, device_get_curr_pcie_link_width, Return(Device, unsigned int*), "nvmlDeviceGetCurrPcieLinkWidth")  \
  X(false, device_get_max_pcie_link_width, Return(Device, unsigned int*), "nvmlDeviceGetMaxPcieLinkWidth")    \
  X(false, device_get_pcie_throughput, Return(Device, PcieUtilCounter, unsigned int*), "nvmlDeviceGetPcieThroughput") \
  X(false, device_get_pcie_replay_counter, Return(Device, unsigned int*), "nvmlDeviceGetPcieReplayCounter")   \
  X(false, device_get_current_clocks_event_reasons, Return(Device, unsigned long long*),                      \
    "nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons")                    \
  X(false, device_get_ecc_mode, Return(Device, EnableState*, EnableState*), "nvmlDeviceGetEccMode")           \
  X(false, device_get_total_ecc_errors, Return(Device, MemoryErrorType, EccCounterType, unsigned long long*), \
    "nvmlDeviceGetTotalEccErrors")                                                                            \
  X(false, device_get_supported_event_types, Return(Device, unsigned long long*), "nvmlDeviceGetSupportedEventTypes") \
  X(false, event_set_create, Return(EventSet*), "nvmlEventSetCreate")                                         \
  X(false, device_register_events, Return(Device, unsigned long long, EventSet), "nvmlDeviceRegisterEvents")  \
  X(false, event_set_wait, Return(EventSet, EventData*, unsigned int), "nvmlEventSetWait_v2", "nvmlEventSetWait") \
  X(false, event_set_free, Return(EventSet), "nvmlEventSetFree")                                              \
  X(false, device_get_mig_mode, Return(Device, unsigned int*, unsigned int*), "nvmlDeviceGetMigMode")         \
  X(false, device_get_max_mig_device_count, Return(Device, unsigned int*), "nvmlDeviceGetMaxMigDeviceCount")  \
  X(false, device_get_mig_device_handle_by_index, Return(Device, unsigned int, Device*),                      \
    "nvmlDeviceGetMigDeviceHandleByIndex")                                                                    \
  X(false, device_is_mig_device_handle, Return(Device, unsigned int*), "nvmlDeviceIsMigDeviceHandle")         \
  X(false, device_get_gpu_instance_id, Return(Device, unsigned int*), "nvmlDeviceGetGpuInstanceId")           \
  X(false, device_get_compute_instance_id, Return(Device, unsigned int*), "nvmlDeviceGetComputeInstanceId")   \
  X(false, device_get_persistence_mode, Return(Device, EnableState*), "nvmlDeviceGetPersistenceMode")         \
  X(false, device_get_compute_mode, Return(Device, ComputeMode*), "nvmlDeviceGetComputeMode")                 \
  X(false, device_get_compute_running_processes, Return(Device, unsigned int*, ProcessInfo*),                 \
    "nvmlDeviceGetComputeRunningProcesses_v3", "nvmlDeviceGetComputeRunningProcesses_v2")                     \
  X(false, device_get_compute_running_processes_v1, Return(Device, unsigned int*, ProcessInfoV1*),            \
    "nvmlDeviceGetComputeRunningProcesses")                                                                   \
  X(false, device_get_graphics_running_processes, Return(Device, unsigned int*, ProcessInfo*),                \
    "nvmlDeviceGetGraphicsRunningProcesses_v3", "nvmlDeviceGetGraphicsRunningProcesses_v2")                   \
  X(false, device_get_graphics_running_processes_v1, Return(Device, unsigned int*, ProcessInfoV1*),           \
    "nvmlDeviceGetGraphicsRunningProcesses")                                                                  \
  X(false, device_get_process_utilization,                                                                    \
    Return(Device, ProcessUtilizationSample*, unsigned int*, unsigned long long), "nvmlDeviceGetProcessUtilization") \
  X(false, device_get_cuda_compute_capability, Return(Device, int*, int*), "nvmlDeviceGetCudaComputeCapability") \
  X(false, device_get_num_gpu_cores, Return(Device, unsigned int*), "nvmlDeviceGetNumGpuCores")               \
  X(false, device_get_memory_bus_width, Return(Device, unsigned int*), "nvmlDeviceGetMemoryBusWidth")          \
  X(false, gpm_query_device_support, Return(Device, GpmSupport*), "nvmlGpmQueryDeviceSupport")                \
  X(false, gpm_sample_alloc, Return(GpmSample*), "nvmlGpmSampleAlloc")                                        \
  X(false, gpm_sample_free, Return(GpmSample), "nvmlGpmSampleFree")                                           \
  X(false, gpm_sample_get, Return(Device, GpmSample), "nvmlGpmSampleGet")                                     \
  X(false, gpm_mig_sample_get, Return(Device, unsigned int, GpmSample), "nvmlGpmMigSampleGet")                \
  X(false, gpm_metrics_get, Return(GpmMetricsGet*), "nvmlGpmMetricsGet")

// The function table. Each member is null when the library has none of its names; `<member>_symbol`
// names the one found (for `gpuopt info --json` and the fallback tests).
#define GPUOPT_NVML_FIRST(first, ...) first
struct Api {
#define GPUOPT_NVML_MEMBER(req, member, sig, ...)                                  \
  FnPtr<sig> member = nullptr;                                                     \
  const char* member##_symbol = nullptr;                                           \
  static constexpr const char* member##_wanted = GPUOPT_NVML_FIRST(__VA_ARGS__, );
  GPUOPT_NVML_FUNCTIONS(GPUOPT_NVML_MEMBER)
#undef GPUOPT_NVML_MEMBER
};

// One row per table entry: what we asked for and what was found (nullptr when absent).
struct SymbolInfo {
  const char* wanted;    // newest name
  const char* resolved;  // name found, or nullptr
  bool required;
};

struct MemoryInfo {
  unsigned long long total = 0, free = 0, used = 0;
  std::optional<unsigned long long> reserved;  // only through the v2 struct
};

struct PcieLink {
  std::optional<unsigned> gen, max_gen, gpu_max_gen, width, max_width;
};

struct ProcessEntry {
  unsigned pid = 0;
  std::optional<unsigned long long> used_memory;  // bytes; nullopt when the driver cannot tell
  std::optional<unsigned> gpu_instance_id, compute_instance_id;
  bool graphics = false;  // from the graphics list rather than the compute list
};

struct EccCounts {
  std::optional<unsigned long long> corrected_volatile, uncorrected_volatile;
  std::optional<unsigned long long> corrected_aggregate, uncorrected_aggregate;
};

struct MigMode {
  unsigned current = 0, pending = 0;
};

struct XidEvent {
  Device device = nullptr;
  unsigned long long type = 0;
  unsigned long long data = 0;  // the XID for kEventXidCriticalError
};

class Nvml : public std::enable_shared_from_this<Nvml> {
 public:
  // dlopen (GPUOPT_NVML_LIBRARY or libnvidia-ml.so.1), resolve the table, nvmlInit.
  // Unavailable("NVML not found: ...") without a driver; Unavailable("NVML unusable: <lib> lacks
  // <symbol>") when a required symbol is missing; the nvmlInit error when init fails.
  static Result<std::shared_ptr<Nvml>> load();
  static Result<std::shared_ptr<Nvml>> load(const std::string& library);
  ~Nvml();  // nvmlShutdown + dlclose
  Nvml(const Nvml&) = delete;
  Nvml& operator=(const Nvml&) = delete;

  const Api& api() const { return api_; }
  const std::string& library() const { return library_; }
  std::vector<SymbolInfo> symbols() const;

  // System.
  Result<std::string> driver_version() const;
  Result<std::string> nvml_version() const;
  Result<int> cuda_driver_version() const;  // e.g. 13000 for 13.0
  Result<unsigned> device_count() const;
  Result<Device> device(unsigned index) const;

  // Identity and static properties.
  Result<std::string> name(Device d) const;
  Result<std::string> uuid(Device d) const;
  Result<PciInfo> pci_info(Device d) const;
  Result<std::string> pci_bus_id(Device d) const;  // "00000000:19:00.0"
  Result<std::pair<int, int>> compute_capability(Device d) const;
  Result<unsigned> num_gpu_cores(Device d) const;
  Result<unsigned> memory_bus_width(Device d) const;  // bits
  Result<unsigned> max_clock_mhz(Device d, ClockType type) const;
  Result<EnableState> persistence_mode(Device d) const;
  Result<ComputeMode> compute_mode(Device d) const;
  Result<MigMode> mig_mode(Device d) const;
  Result<std::vector<Device>> mig_devices(Device d) const;  // the MIG devices present (empty if none)
  Result<unsigned> power_limit_mw(Device d) const;           // power management limit
  Result<unsigned> enforced_power_limit_mw(Device d) const;
  Result<unsigned> default_power_limit_mw(Device d) const;
  Result<EnableState> ecc_mode(Device d) const;               // current mode

  // Dynamic values (what the sampler reads each tick).
  Result<MemoryInfo> memory_info(Device d) const;  // v2 struct first (reserved), then v1
  Result<Utilization> utilization(Device d) const;
  Result<unsigned> temperature_c(Device d) const;
  Result<int> memory_temperature_c(Device d) const;  // field value NVML_FI_DEV_MEMORY_TEMP
  Result<unsigned> power_usage_mw(Device d) const;
  Result<unsigned long long> total_energy_mj(Device d) const;
  Result<unsigned> clock_mhz(Device d, ClockType type) const;
  PcieLink pcie_link(Device d) const;  // each field nullopt when unavailable
  Result<unsigned> pcie_throughput_kbps(Device d, PcieUtilCounter counter) const;  // KB/s
  Result<unsigned> pcie_replay_counter(Device d) const;
  Result<unsigned long long> clocks_event_reasons(Device d) const;
  Result<unsigned long long> total_ecc_errors(Device d, MemoryErrorType type, EccCounterType counter) const;
  EccCounts ecc_counts(Device d) const;
  // Compute and graphics processes (newest symbol first, v1 struct for the oldest).
  Result<std::vector<ProcessEntry>> processes(Device d) const;
  // Per-process SM/memory utilisation samples newer than `last_seen_us` (0: all the driver holds).
  Result<std::vector<ProcessUtilizationSample>> process_utilization(Device d, unsigned long long last_seen_us) const;

  // GPM (Hopper and newer).
  Result<bool> gpm_supported(Device d) const;

 private:
  Nvml() = default;
  Status resolve_and_init();

  void* handle_ = nullptr;
  bool initialised_ = false;
  std::string library_;
  Api api_;
};

// RAII GPM sample; take two at an interval and ask for metrics between them.
class GpmSampleHandle {
 public:
  static Result<GpmSampleHandle> alloc(std::shared_ptr<const Nvml> nvml);
  GpmSampleHandle(GpmSampleHandle&& o) noexcept;
  GpmSampleHandle& operator=(GpmSampleHandle&& o) noexcept;
  ~GpmSampleHandle();
  Status take(Device d);  // nvmlGpmSampleGet
  GpmSample get() const { return sample_; }

 private:
  GpmSampleHandle() = default;
  std::shared_ptr<const Nvml> nvml_;
  GpmSample sample_ = nullptr;
};

// Values of `ids` between two samples, one entry per id (nullopt where the driver says so).
Result<std::vector<std::optional<double>>> gpm_metrics(const Nvml& nvml, const GpmSampleHandle& first,
                                                       const GpmSampleHandle& second,
                                                       const std::vector<GpmMetricId>& ids);

// XID and other critical events through an event set; wait() returns nullopt on timeout.
class EventWatcher {
 public:
  // Registers `types` (default: XID) on every device that supports them; Unimplemented when the
  // driver has no event API or no device supports it.
  static Result<std::unique_ptr<EventWatcher>> create(std::shared_ptr<const Nvml> nvml,
                                                      const std::vector<Device>& devices,
                                                      unsigned long long types = kEventXidCriticalError);
  ~EventWatcher();
  Result<std::optional<XidEvent>> wait(unsigned timeout_ms);

 private:
  EventWatcher() = default;
  std::shared_ptr<const Nvml> nvml_;
  EventSet set_ = nullptr;
};

// Text for clock-event reason bits: "sw_power_cap,hw_thermal_slowdown" ("none" for 0).
std::string clocks_event_reasons_text(unsigned long long mask);

}  // namespace gpuopt::nvml
