// Fake NVML: init/shutdown, system queries, device enumeration, identity.
#include "fake_api.h"

#include <cstdio>

using namespace fake_nvml;  // NOLINT

namespace {

Return do_init(const char* fn) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.init_count == 0) {
    if (auto err = load_script(s)) {
      std::fprintf(stderr, "%s\n", err->c_str());
      return kErrorUnknown;
    }
  }
  if (Return f = failure(s, nullptr, fn); f != kSuccess) return f;
  ++s.init_count;
  return kSuccess;
}

Return do_count(unsigned int* count) {
  FAKE_SYSTEM_PROLOGUE("nvmlDeviceGetCount");
  if (!count) return kErrorInvalidArgument;
  *count = static_cast<unsigned>(s.devices.size());
  return kSuccess;
}

Return do_handle(unsigned int index, Device* device) {
  FAKE_SYSTEM_PROLOGUE("nvmlDeviceGetHandleByIndex");
  if (!device || index >= s.devices.size()) return kErrorInvalidArgument;
  if (Return f = failure(s, s.devices[index].get(), "nvmlDeviceGetHandleByIndex"); f != kSuccess) return f;
  *device = as_handle(s.devices[index].get());
  return kSuccess;
}

Return do_cuda_version(int* v) {
  FAKE_SYSTEM_PROLOGUE("nvmlSystemGetCudaDriverVersion");
  if (!v) return kErrorInvalidArgument;
  auto j = global_field(s, "cuda_driver_version");
  if (!j || !j->is_number()) return kErrorNotSupported;
  *v = j->get<int>();
  return kSuccess;
}

Return do_pci(Device device, PciInfo* pci, bool old_layout, const char* fn) {
  FAKE_DEVICE_PROLOGUE(fn);
  if (!pci) return kErrorInvalidArgument;
  auto id = field(*d, "pci.bus_id");
  if (!id || !id->is_string()) return kErrorNotSupported;
  std::string full = id->get<std::string>();
  // Legacy form has a 16-bit domain: "00000000:19:00.0" -> "0000:19:00.0".
  std::string legacy = full.size() > 12 && full.find(':') == 8 ? full.substr(4) : full;
  unsigned long long x = 0;
  PciInfo p{};
  std::strncpy(p.bus_id_legacy, legacy.c_str(), sizeof(p.bus_id_legacy) - 1);
  if (auto v = field(*d, "pci.domain"); v && to_ull(*v, &x)) p.domain = static_cast<unsigned>(x);
  if (auto v = field(*d, "pci.bus"); v && to_ull(*v, &x)) p.bus = static_cast<unsigned>(x);
  if (auto v = field(*d, "pci.device"); v && to_ull(*v, &x)) p.device = static_cast<unsigned>(x);
  if (auto v = field(*d, "pci.pci_device_id"); v && to_ull(*v, &x)) p.pci_device_id = static_cast<unsigned>(x);
  if (auto v = field(*d, "pci.pci_subsystem_id"); v && to_ull(*v, &x)) p.pci_subsystem_id = static_cast<unsigned>(x);
  if (old_layout) {
    // nvmlPciInfo_t v1 is 16 + 5*4 + 4 reserved words = 52 bytes: write no further.
    std::memcpy(pci, &p, offsetof(PciInfo, bus_id));
    std::memset(reinterpret_cast<char*>(pci) + offsetof(PciInfo, bus_id), 0, 16);
    return kSuccess;
  }
  std::strncpy(p.bus_id, full.c_str(), sizeof(p.bus_id) - 1);
  *pci = p;
  return kSuccess;
}

}  // namespace

FAKE_EXPORT Return nvmlInit() { return do_init("nvmlInit"); }
#ifndef FAKE_NVML_OLD
FAKE_EXPORT Return nvmlInit_v2() { return do_init("nvmlInit_v2"); }
#endif

FAKE_EXPORT Return nvmlShutdown() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.init_count == 0) return kErrorUninitialized;
  --s.init_count;
  return kSuccess;
}

FAKE_EXPORT const char* nvmlErrorString(Return r) {
  switch (r) {
    case kSuccess: return "Success";
    case kErrorNotSupported: return "Not Supported";
    case kErrorGpuIsLost: return "GPU is lost";
    default: return "Fake NVML error";
  }
}

FAKE_EXPORT Return nvmlSystemGetDriverVersion(char* version, unsigned int length) {
  FAKE_SYSTEM_PROLOGUE("nvmlSystemGetDriverVersion");
  auto v = global_field(s, "driver_version");
  if (!v || !v->is_string()) return kErrorNotSupported;
  return copy_string(v->get<std::string>(), version, length);
}

FAKE_EXPORT Return nvmlSystemGetNVMLVersion(char* version, unsigned int length) {
  FAKE_SYSTEM_PROLOGUE("nvmlSystemGetNVMLVersion");
  auto v = global_field(s, "nvml_version");
  if (!v || !v->is_string()) return kErrorNotSupported;
  return copy_string(v->get<std::string>(), version, length);
}

FAKE_EXPORT Return nvmlSystemGetCudaDriverVersion(int* v) { return do_cuda_version(v); }
FAKE_EXPORT Return nvmlDeviceGetCount(unsigned int* count) { return do_count(count); }
FAKE_EXPORT Return nvmlDeviceGetHandleByIndex(unsigned int i, Device* d) { return do_handle(i, d); }
FAKE_EXPORT Return nvmlDeviceGetPciInfo(Device d, PciInfo* p) { return do_pci(d, p, true, "nvmlDeviceGetPciInfo"); }
#ifndef FAKE_NVML_OLD
FAKE_EXPORT Return nvmlSystemGetCudaDriverVersion_v2(int* v) { return do_cuda_version(v); }
FAKE_EXPORT Return nvmlDeviceGetCount_v2(unsigned int* count) { return do_count(count); }
FAKE_EXPORT Return nvmlDeviceGetHandleByIndex_v2(unsigned int i, Device* d) { return do_handle(i, d); }
FAKE_EXPORT Return nvmlDeviceGetPciInfo_v2(Device d, PciInfo* p) { return do_pci(d, p, false, "nvmlDeviceGetPciInfo_v2"); }
FAKE_EXPORT Return nvmlDeviceGetPciInfo_v3(Device d, PciInfo* p) { return do_pci(d, p, false, "nvmlDeviceGetPciInfo_v3"); }
#endif

FAKE_EXPORT Return nvmlDeviceGetName(Device device, char* name, unsigned int length) {
  FAKE_DEVICE_PROLOGUE("nvmlDeviceGetName");
  auto v = field(*d, "name");
  if (!v || !v->is_string()) return kErrorNotSupported;
  return copy_string(v->get<std::string>(), name, length);
}

FAKE_EXPORT Return nvmlDeviceGetUUID(Device device, char* uuid, unsigned int length) {
  FAKE_DEVICE_PROLOGUE("nvmlDeviceGetUUID");
  auto v = field(*d, "uuid");
  if (!v || !v->is_string()) return kErrorNotSupported;
  return copy_string(v->get<std::string>(), uuid, length);
}

FAKE_EXPORT Return nvmlDeviceGetIndex(Device device, unsigned int* index) {
  FAKE_DEVICE_PROLOGUE("nvmlDeviceGetIndex");
  if (!index) return kErrorInvalidArgument;
  *index = d->index;
  return kSuccess;
}

FAKE_EXPORT Return nvmlDeviceGetCudaComputeCapability(Device device, int* major, int* minor) {
  FAKE_DEVICE_PROLOGUE("nvmlDeviceGetCudaComputeCapability");
  auto v = field(*d, "compute_capability");
  if (!v || !v->is_string() || !major || !minor) return kErrorNotSupported;
  if (std::sscanf(v->get<std::string>().c_str(), "%d.%d", major, minor) != 2) return kErrorUnknown;
  return kSuccess;
}

FAKE_EXPORT Return nvmlDeviceGetNumGpuCores(Device device, unsigned int* n) {
  FAKE_DEVICE_PROLOGUE("nvmlDeviceGetNumGpuCores");
  return read_num(*d, "num_gpu_cores", n);
}

FAKE_EXPORT Return nvmlDeviceGetMemoryBusWidth(Device device, unsigned int* n) {
  FAKE_DEVICE_PROLOGUE("nvmlDeviceGetMemoryBusWidth");
  return read_num(*d, "memory_bus_width", n);
}
