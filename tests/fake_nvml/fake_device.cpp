// Fake NVML: memory, utilisation, thermals, power, clocks, PCIe, ECC, modes, MIG.
#include "fake_api.h"

#include <map>

using namespace fake_nvml;  // NOLINT

namespace {

Return memory_parts(FakeDevice& d, unsigned long long* total, unsigned long long* free, unsigned long long* used,
                    unsigned long long* reserved) {
  auto t = field(d, "memory.total");
  auto u = field(d, "memory.used");
  if (!t || !u || !to_ull(*t, total) || !to_ull(*u, used)) return kErrorNotSupported;
  *reserved = 0;
  if (auto r = field(d, "memory.reserved")) to_ull(*r, reserved);
  // Free defaults to what is left, so a script can sequence "used" alone.
  if (auto f = field(d, "memory.free"); f && to_ull(*f, free)) return kSuccess;
  *free = *total - *used - *reserved;
  return kSuccess;
}

const std::map<std::string, unsigned long long>& reason_bits() {
  static const std::map<std::string, unsigned long long> kBits = {
      {"gpu_idle", 0x1},         {"applications_clocks_setting", 0x2}, {"sw_power_cap", 0x4},
      {"hw_slowdown", 0x8},      {"sync_boost", 0x10},                 {"sw_thermal_slowdown", 0x20},
      {"hw_thermal_slowdown", 0x40}, {"hw_power_brake_slowdown", 0x80}, {"display_clock_setting", 0x100}};
  return kBits;
}

Return clocks_reasons(Device device, unsigned long long* out, const char* fn) {
  FAKE_DEVICE_PROLOGUE(fn);
  if (!out) return kErrorInvalidArgument;
  auto v = field(*d, "clocks_event_reasons");
  if (!v) return kErrorNotSupported;
  if (to_ull(*v, out)) return kSuccess;
  if (!v->is_string()) return kErrorUnknown;
  // "sw_power_cap,hw_slowdown"
  *out = 0;
  std::string text = v->get<std::string>();
  size_t start = 0;
  while (start < text.size()) {
    size_t comma = text.find(',', start);
    std::string name = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    auto it = reason_bits().find(name);
    if (it != reason_bits().end()) *out |= it->second;
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return kSuccess;
}

const char* clock_name(ClockType t) {
  switch (t) {
    case kClockGraphics: return "graphics";
    case kClockSm: return "sm";
    case kClockMem: return "mem";
    case kClockVideo: return "video";
  }
  return nullptr;
}

}  // namespace

FAKE_EXPORT Return nvmlDeviceGetMemoryInfo(Device device, Memory* m) {
  FAKE_DEVICE_PROLOGUE("nvmlDeviceGetMemoryInfo");
  if (!m) return kErrorInvalidArgument;
  unsigned long long total, free, used, reserved;
  if (Return r = memory_parts(*d, &total, &free, &used, &reserved); r != kSuccess) return r;
  m->total = total;
  m->free = free;
  m->used = used + reserved;  // v1 counts the driver's reservation as used
  return kSuccess;
}

#ifndef FAKE_NVML_OLD
FAKE_EXPORT Return nvmlDeviceGetMemoryInfo_v2(Device device, MemoryV2* m) {
  FAKE_DEVICE_PROLOGUE("nvmlDeviceGetMemoryInfo_v2");
  if (!m) return kErrorInvalidArgument;
  // As the real driver: the version word must be NVML_STRUCT_VERSION(Memory, 2).
  if (m->version != (static_cast<unsigned>(sizeof(MemoryV2)) | (2U << 24))) return kErrorArgumentVersionMismatch;
  unsigned long long total, free, used, reserved;
  if (Return r = memory_parts(*d, &total, &free, &used, &reserved); r != kSuccess) return r;
  m->total = total;
  m->free = free;
  m->used = used;
  m->reserved = reserved;
  return kSuccess;
}
#endif

FAKE_EXPORT Return nvmlDeviceGetUtilizationRates(Device device, Utilization* u) {
  FAKE_DEVICE_PROLOGUE("nvmlDeviceGetUtilizationRates");
  if (!u) return kErrorInvalidArgument;
  if (Return r = read_num(*d, "utilization.gpu", &u->gpu); r != kSuccess) return r;
  return read_num(*d, "utilization.memory", &u->memory);
}

FAKE_EXPORT Return nvmlDeviceGetTemperature(Device device, TemperatureSensor sensor, unsigned int* t) {
  FAKE_DEVICE_PROLOGUE("nvmlDeviceGetTemperature");
  if (sensor != kTemperatureGpu) return kErrorInvalidArgument;
  return read_num(*d, "temperature", t);
}

FAKE_EXPORT Return nvmlDeviceGetFieldValues(Device device, int count, FieldValue* values) {
  FAKE_DEVICE_PROLOGUE("nvmlDeviceGetFieldValues");
  if (count < 0 || (count > 0 && !values)) return kErrorInvalidArgument;
  for (int i = 0; i < count; ++i) {
    FieldValue& fv = values[i];
    fv.timestamp = static_cast<long long>(s.util_clock_us);
    fv.latency_usec = 0;
    if (fv.field_id == kFieldMemoryTemp) {
      unsigned v = 0;
      fv.nvml_return = read_num(*d, "memory_temperature", &v);
      fv.value_type = kValueUnsignedInt;
      fv.value.ui_val = v;
    } else if (fv.field_id == kFieldTotalEnergyConsumption) {
      unsigned long long v = 0;
      fv.nvml_return = read_num(*d, "total_energy_mj", &v, "total_energy_mj#field");
      fv.value_type = kValueUnsignedLongLong;
      fv.value.ull_val = v;
    } else {
      fv.nvml_return = kErrorNotSupported;
    }
  }
  return kSuccess;
}

#define FAKE_UINT_GETTER(symbol, path)                      \
  FAKE_EXPORT Return symbol(Device device, unsigned int* v) { \
    FAKE_DEVICE_PROLOGUE(#symbol);                            \
    return read_num(*d, path, v);                             \
  }
FAKE_UINT_GETTER(nvmlDeviceGetPowerUsage, "power_usage_mw")
FAKE_UINT_GETTER(nvmlDeviceGetPowerManagementLimit, "power_limit_mw")
FAKE_UINT_GETTER(nvmlDeviceGetPowerManagementDefaultLimit, "default_power_limit_mw")
FAKE_UINT_GETTER(nvmlDeviceGetEnforcedPowerLimit, "enforced_power_limit_mw")
FAKE_UINT_GETTER(nvmlDeviceGetCurrPcieLinkGeneration, "pcie.gen")
FAKE_UINT_GETTER(nvmlDeviceGetMaxPcieLinkGeneration, "pcie.max_gen")
FAKE_UINT_GETTER(nvmlDeviceGetCurrPcieLinkWidth, "pcie.width")
FAKE_UINT_GETTER(nvmlDeviceGetMaxPcieLinkWidth, "pcie.max_width")
FAKE_UINT_GETTER(nvmlDeviceGetPcieReplayCounter, "pcie.replay_counter")
#ifndef FAKE_NVML_OLD
FAKE_UINT_GETTER(nvmlDeviceGetGpuMaxPcieLinkGeneration, "pcie.gpu_max_gen")
#endif
#undef FAKE_UINT_GETTER

FAKE_EXPORT Return nvmlDeviceGetTotalEnergyConsumption(Device device, unsigned long long* v) {
  FAKE_DEVICE_PROLOGUE("nvmlDeviceGetTotalEnergyConsumption");
  return read_num(*d, "total_energy_mj", v);
}

FAKE_EXPORT Return nvmlDeviceGetClockInfo(Device device, ClockType type, unsigned int* v) {
  FAKE_DEVICE_PROLOGUE("nvmlDeviceGetClockInfo");
  const char* n = clock_name(type);
  if (!n) return kErrorInvalidArgument;
  return read_num(*d, std::string("clocks.") + n, v);
}

FAKE_EXPORT Return nvmlDeviceGetMaxClockInfo(Device device, ClockType type, unsigned int* v) {
  FAKE_DEVICE_PROLOGUE("nvmlDeviceGetMaxClockInfo");
  const char* n = clock_name(type);
  if (!n) return kErrorInvalidArgument;
  return read_num(*d, std::string("max_clocks.") + n, v);
}

FAKE_EXPORT Return nvmlDeviceGetPcieThroughput(Device device, PcieUtilCounter counter, unsigned int* v) {
  FAKE_DEVICE_PROLOGUE("nvmlDeviceGetPcieThroughput");
  if (counter == kPcieUtilTxBytes) return read_num(*d, "pcie.tx_kbps", v);
  if (counter == kPcieUtilRxBytes) return read_num(*d, "pcie.rx_kbps", v);
  return kErrorInvalidArgument;
}

FAKE_EXPORT Return nvmlDeviceGetCurrentClocksThrottleReasons(Device device, unsigned long long* v) {
  return clocks_reasons(device, v, "nvmlDeviceGetCurrentClocksThrottleReasons");
}
#ifndef FAKE_NVML_OLD
FAKE_EXPORT Return nvmlDeviceGetCurrentClocksEventReasons(Device device, unsigned long long* v) {
  return clocks_reasons(device, v, "nvmlDeviceGetCurrentClocksEventReasons");
}
#endif

FAKE_EXPORT Return nvmlDeviceGetEccMode(Device device, EnableState* current, EnableState* pending) {
  FAKE_DEVICE_PROLOGUE("nvmlDeviceGetEccMode");
  if (!current || !pending) return kErrorInvalidArgument;
  unsigned cur = 0, pend = 0;
  if (Return r = read_num(*d, "ecc.enabled", &cur); r != kSuccess) return r;
  if (read_num(*d, "ecc.pending", &pend) != kSuccess) pend = cur;
  *current = cur ? kFeatureEnabled : kFeatureDisabled;
  *pending = pend ? kFeatureEnabled : kFeatureDisabled;
  return kSuccess;
}

FAKE_EXPORT Return nvmlDeviceGetTotalEccErrors(Device device, MemoryErrorType type, EccCounterType counter,
                                               unsigned long long* v) {
  FAKE_DEVICE_PROLOGUE("nvmlDeviceGetTotalEccErrors");
  std::string key = std::string("ecc.") + (type == kMemoryErrorCorrected ? "corrected_" : "uncorrected_") +
                    (counter == kVolatileEcc ? "volatile" : "aggregate");
  return read_num(*d, key, v);
}

FAKE_EXPORT Return nvmlDeviceGetPersistenceMode(Device device, EnableState* mode) {
  FAKE_DEVICE_PROLOGUE("nvmlDeviceGetPersistenceMode");
  unsigned v = 0;
  if (Return r = read_num(*d, "persistence_mode", &v); r != kSuccess) return r;
  *mode = v ? kFeatureEnabled : kFeatureDisabled;
  return kSuccess;
}

FAKE_EXPORT Return nvmlDeviceGetComputeMode(Device device, ComputeMode* mode) {
  FAKE_DEVICE_PROLOGUE("nvmlDeviceGetComputeMode");
  if (!mode) return kErrorInvalidArgument;
  auto v = field(*d, "compute_mode");
  if (!v) return kErrorNotSupported;
  if (v->is_number()) {
    *mode = static_cast<ComputeMode>(v->get<int>());
    return kSuccess;
  }
  static const std::map<std::string, ComputeMode> kModes = {{"DEFAULT", kComputeModeDefault},
                                                            {"EXCLUSIVE_THREAD", kComputeModeExclusiveThread},
                                                            {"PROHIBITED", kComputeModeProhibited},
                                                            {"EXCLUSIVE_PROCESS", kComputeModeExclusiveProcess}};
  auto it = v->is_string() ? kModes.find(v->get<std::string>()) : kModes.end();
  if (it == kModes.end()) return kErrorUnknown;
  *mode = it->second;
  return kSuccess;
}

// ---- MIG ----------------------------------------------------------------------------------------

FAKE_EXPORT Return nvmlDeviceGetMigMode(Device device, unsigned int* current, unsigned int* pending) {
  FAKE_DEVICE_PROLOGUE("nvmlDeviceGetMigMode");
  if (!current || !pending) return kErrorInvalidArgument;
  if (Return r = read_num(*d, "mig.current", current); r != kSuccess) return r;
  if (read_num(*d, "mig.pending", pending) != kSuccess) *pending = *current;
  return kSuccess;
}

FAKE_EXPORT Return nvmlDeviceGetMaxMigDeviceCount(Device device, unsigned int* count) {
  FAKE_DEVICE_PROLOGUE("nvmlDeviceGetMaxMigDeviceCount");
  if (!count) return kErrorInvalidArgument;
  if (!d->j.contains("mig")) return kErrorNotSupported;
  if (read_num(*d, "mig.max_devices", count) != kSuccess) *count = static_cast<unsigned>(d->mig.size());
  return kSuccess;
}

FAKE_EXPORT Return nvmlDeviceGetMigDeviceHandleByIndex(Device device, unsigned int index, Device* mig) {
  FAKE_DEVICE_PROLOGUE("nvmlDeviceGetMigDeviceHandleByIndex");
  if (!mig) return kErrorInvalidArgument;
  if (!d->j.contains("mig")) return kErrorNotSupported;
  if (index >= d->mig.size()) return kErrorNotFound;
  *mig = as_handle(d->mig[index].get());
  return kSuccess;
}

FAKE_EXPORT Return nvmlDeviceIsMigDeviceHandle(Device device, unsigned int* is_mig) {
  FAKE_DEVICE_PROLOGUE("nvmlDeviceIsMigDeviceHandle");
  if (!is_mig) return kErrorInvalidArgument;
  *is_mig = d->parent ? 1 : 0;
  return kSuccess;
}

FAKE_EXPORT Return nvmlDeviceGetGpuInstanceId(Device device, unsigned int* id) {
  FAKE_DEVICE_PROLOGUE("nvmlDeviceGetGpuInstanceId");
  if (!d->parent) return kErrorNotSupported;
  return read_num(*d, "gpu_instance_id", id);
}

FAKE_EXPORT Return nvmlDeviceGetComputeInstanceId(Device device, unsigned int* id) {
  FAKE_DEVICE_PROLOGUE("nvmlDeviceGetComputeInstanceId");
  if (!d->parent) return kErrorNotSupported;
  return read_num(*d, "compute_instance_id", id);
}
