// NVML loader and typed queries (see nvml.h).
#include "monitor/nvml.h"

#include "core/env.h"
#include "core/log.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstring>

namespace gpuopt::nvml {
namespace {

// Calls an optional table entry: Unimplemented naming the symbol when the library lacks it,
// the checked NVML error otherwise.
template <typename Fn, typename... Args>
Status call(const Nvml& nv, Fn* fn, const char* what, Args... args) {
  if (!fn) return Status::Unimplemented("{} lacks {}", nv.library(), what);
  Return r = fn(args...);  // NOLINT
  if (auto e = call_error(r)) return Status(e->code, fmt::format("{} failed: {}", what, e->text));
  return Status::Ok();
}

// Errors name the symbol called (or, when absent, the newest one we looked for).
#define NVML_CALL(member, ...) \
  call(*this, api_.member, api_.member##_symbol ? api_.member##_symbol : Api::member##_wanted, __VA_ARGS__)

// Strings come back NUL-terminated in a fixed buffer.
std::string from_buffer(const char* buf, size_t n) { return std::string(buf, strnlen(buf, n)); }

}  // namespace

Result<std::shared_ptr<Nvml>> Nvml::load() {
  std::string lib = env_get("GPUOPT_NVML_LIBRARY").value_or("libnvidia-ml.so.1");
  return load(lib);
}

Result<std::shared_ptr<Nvml>> Nvml::load(const std::string& library) {
  std::shared_ptr<Nvml> nv(new Nvml());
  nv->library_ = library;
  nv->handle_ = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!nv->handle_) {
    const char* err = dlerror();
    return Status::Unavailable("NVML not found: cannot load {} ({})", library, err ? err : "unknown error");
  }
  GPUOPT_RETURN_IF_ERROR(nv->resolve_and_init());
  return nv;
}

Status Nvml::resolve_and_init() {
  // Newest name first: a driver exporting _v3 also keeps _v2 and plain for old binaries, and the
  // newest one is the one whose struct layout we declare.
  auto resolve = [&](std::initializer_list<const char*> names, const char** found) -> void* {
    for (const char* n : names) {
      if (void* p = dlsym(handle_, n)) {
        *found = n;
        return p;
      }
    }
    return nullptr;
  };
#define GPUOPT_NVML_RESOLVE(req, member, sig, ...)                                                       \
  api_.member = reinterpret_cast<FnPtr<sig>>(resolve({__VA_ARGS__}, &api_.member##_symbol));            \
  if (req && !api_.member) {                                                                             \
    const char* names[] = {__VA_ARGS__};                                                                 \
    return Status::Unavailable("NVML unusable: {} lacks {}", library_, names[0]);                        \
  }                                                                                                      \
  if (!api_.member) GPUOPT_LOG(debug, "NVML: {} lacks {} (optional)", library_, #member);
  GPUOPT_NVML_FUNCTIONS(GPUOPT_NVML_RESOLVE)
#undef GPUOPT_NVML_RESOLVE
  Return r = api_.init();
  if (auto e = call_error(r)) {
    return Status(e->code == StatusCode::kInternal ? StatusCode::kUnavailable : e->code,
                  fmt::format("NVML init failed: {} ({})", e->text, library_));
  }
  initialised_ = true;
  GPUOPT_LOG(debug, "NVML loaded from {} ({})", library_, api_.init_symbol);
  return Status::Ok();
}

Nvml::~Nvml() {
  if (initialised_ && api_.shutdown) api_.shutdown();
  if (handle_) dlclose(handle_);
}

std::vector<SymbolInfo> Nvml::symbols() const {
  std::vector<SymbolInfo> out;
#define GPUOPT_NVML_ROW(req, member, sig, ...)                         \
  {                                                                    \
    const char* names[] = {__VA_ARGS__};                               \
    out.push_back({names[0], api_.member##_symbol, req});              \
  }
  GPUOPT_NVML_FUNCTIONS(GPUOPT_NVML_ROW)
#undef GPUOPT_NVML_ROW
  return out;
}

Result<std::string> Nvml::driver_version() const {
  char buf[kSystemDriverVersionBufferSize] = {};
  GPUOPT_RETURN_IF_ERROR(NVML_CALL(system_get_driver_version, buf, sizeof(buf)));
  return from_buffer(buf, sizeof(buf));
}

Result<std::string> Nvml::nvml_version() const {
  char buf[kSystemNvmlVersionBufferSize] = {};
  GPUOPT_RETURN_IF_ERROR(NVML_CALL(system_get_nvml_version, buf, sizeof(buf)));
  return from_buffer(buf, sizeof(buf));
}

Result<int> Nvml::cuda_driver_version() const {
  int v = 0;
  GPUOPT_RETURN_IF_ERROR(NVML_CALL(system_get_cuda_driver_version, &v));
  return v;
}

Result<unsigned> Nvml::device_count() const {
  unsigned n = 0;
  GPUOPT_RETURN_IF_ERROR(NVML_CALL(device_get_count, &n));
  return n;
}

Result<Device> Nvml::device(unsigned index) const {
  Device d = nullptr;
  GPUOPT_RETURN_IF_ERROR(NVML_CALL(device_get_handle_by_index, index, &d));
  return d;
}

Result<std::string> Nvml::name(Device d) const {
  char buf[kDeviceNameBufferSize] = {};
  GPUOPT_RETURN_IF_ERROR(NVML_CALL(device_get_name, d, buf, sizeof(buf)));
  return from_buffer(buf, sizeof(buf));
}

Result<std::string> Nvml::uuid(Device d) const {
  char buf[kDeviceUuidBufferSize] = {};
  GPUOPT_RETURN_IF_ERROR(NVML_CALL(device_get_uuid, d, buf, sizeof(buf)));
  return from_buffer(buf, sizeof(buf));
}

Result<PciInfo> Nvml::pci_info(Device d) const {
  // Room after the struct in case a future driver writes a longer one under the same name.
  struct {
    PciInfo info;
    unsigned char spare[64];
  } buf{};
  GPUOPT_RETURN_IF_ERROR(NVML_CALL(device_get_pci_info, d, &buf.info));
  return buf.info;
}

Result<std::string> Nvml::pci_bus_id(Device d) const {
  GPUOPT_ASSIGN_OR_RETURN(PciInfo p, pci_info(d));
  std::string id = from_buffer(p.bus_id, sizeof(p.bus_id));
  if (id.empty()) id = from_buffer(p.bus_id_legacy, sizeof(p.bus_id_legacy));  // plain (v1) symbol
  return id;
}

Result<std::pair<int, int>> Nvml::compute_capability(Device d) const {
  int major = 0, minor = 0;
  GPUOPT_RETURN_IF_ERROR(NVML_CALL(device_get_cuda_compute_capability, d, &major, &minor));
  return std::make_pair(major, minor);
}

#define GPUOPT_NVML_UINT_QUERY(method, member)             \
  Result<unsigned> Nvml::method(Device d) const {          \
    unsigned v = 0;                                        \
    GPUOPT_RETURN_IF_ERROR(NVML_CALL(member, d, &v));      \
    return v;                                              \
  }
GPUOPT_NVML_UINT_QUERY(num_gpu_cores, device_get_num_gpu_cores)
GPUOPT_NVML_UINT_QUERY(memory_bus_width, device_get_memory_bus_width)
GPUOPT_NVML_UINT_QUERY(power_limit_mw, device_get_power_management_limit)
GPUOPT_NVML_UINT_QUERY(enforced_power_limit_mw, device_get_enforced_power_limit)
GPUOPT_NVML_UINT_QUERY(default_power_limit_mw, device_get_power_management_default_limit)
GPUOPT_NVML_UINT_QUERY(power_usage_mw, device_get_power_usage)
GPUOPT_NVML_UINT_QUERY(pcie_replay_counter, device_get_pcie_replay_counter)
#undef GPUOPT_NVML_UINT_QUERY

Result<unsigned> Nvml::max_clock_mhz(Device d, ClockType type) const {
  unsigned v = 0;
  GPUOPT_RETURN_IF_ERROR(NVML_CALL(device_get_max_clock_info, d, type, &v));
  return v;
}

Result<unsigned> Nvml::clock_mhz(Device d, ClockType type) const {
  unsigned v = 0;
  GPUOPT_RETURN_IF_ERROR(NVML_CALL(device_get_clock_info, d, type, &v));
  return v;
}

Result<EnableState> Nvml::persistence_mode(Device d) const {
  EnableState s = kFeatureDisabled;
  GPUOPT_RETURN_IF_ERROR(NVML_CALL(device_get_persistence_mode, d, &s));
  return s;
}

Result<ComputeMode> Nvml::compute_mode(Device d) const {
  ComputeMode m = kComputeModeDefault;
  GPUOPT_RETURN_IF_ERROR(NVML_CALL(device_get_compute_mode, d, &m));
  return m;
}

Result<MigMode> Nvml::mig_mode(Device d) const {
  MigMode m;
  GPUOPT_RETURN_IF_ERROR(NVML_CALL(device_get_mig_mode, d, &m.current, &m.pending));
  return m;
}

Result<std::vector<Device>> Nvml::mig_devices(Device d) const {
  unsigned max = 0;
  GPUOPT_RETURN_IF_ERROR(NVML_CALL(device_get_max_mig_device_count, d, &max));
  std::vector<Device> out;
  for (unsigned i = 0; i < max; ++i) {
    Device m = nullptr;
    // NOT_FOUND marks an empty slot: MIG devices need not be contiguous.
    Return r = api_.device_get_mig_device_handle_by_index ? api_.device_get_mig_device_handle_by_index(d, i, &m)
                                                          : kErrorFunctionNotFound;
    if (r == kErrorNotFound) continue;
    if (r != kSuccess) {
      GPUOPT_RETURN_IF_ERROR(NVML_CALL(device_get_mig_device_handle_by_index, d, i, &m));
    }
    out.push_back(m);
  }
  return out;
}

Result<EnableState> Nvml::ecc_mode(Device d) const {
  EnableState cur = kFeatureDisabled, pending = kFeatureDisabled;
  GPUOPT_RETURN_IF_ERROR(NVML_CALL(device_get_ecc_mode, d, &cur, &pending));
  return cur;
}

Result<MemoryInfo> Nvml::memory_info(Device d) const {
  MemoryInfo out;
  if (api_.device_get_memory_info_v2) {
    MemoryV2 m{};
    m.version = kMemoryV2Version;  // the real constant: sizeof | 2 << 24, not a bare 2
    Return r = api_.device_get_memory_info_v2(d, &m);
    if (r == kSuccess) {
      out.total = m.total;
      out.free = m.free;
      out.used = m.used;
      out.reserved = m.reserved;
      return out;
    }
    GPUOPT_LOG(debug, "nvmlDeviceGetMemoryInfo_v2: {}; trying v1", return_name(r));
  }
  Memory m{};
  GPUOPT_RETURN_IF_ERROR(NVML_CALL(device_get_memory_info, d, &m));
  out.total = m.total;
  out.free = m.free;
  out.used = m.used;
  return out;
}

Result<Utilization> Nvml::utilization(Device d) const {
  Utilization u{};
  GPUOPT_RETURN_IF_ERROR(NVML_CALL(device_get_utilization_rates, d, &u));
  return u;
}

Result<unsigned> Nvml::temperature_c(Device d) const {
  unsigned t = 0;
  GPUOPT_RETURN_IF_ERROR(NVML_CALL(device_get_temperature, d, kTemperatureGpu, &t));
  return t;
}

Result<int> Nvml::memory_temperature_c(Device d) const {
  FieldValue fv{};
  fv.field_id = kFieldMemoryTemp;
  GPUOPT_RETURN_IF_ERROR(NVML_CALL(device_get_field_values, d, 1, &fv));
  if (auto e = call_error(fv.nvml_return))
    return Status(e->code, fmt::format("memory temperature field: {}", e->text));
  switch (fv.value_type) {
    case kValueSignedInt: return fv.value.si_val;
    case kValueUnsignedInt: return static_cast<int>(fv.value.ui_val);
    case kValueSignedLongLong: return static_cast<int>(fv.value.sll_val);
    case kValueUnsignedLongLong: return static_cast<int>(fv.value.ull_val);
    case kValueUnsignedLong: return static_cast<int>(fv.value.ul_val);
    case kValueUnsignedShort: return static_cast<int>(fv.value.us_val);
    case kValueDouble: return static_cast<int>(fv.value.d_val);
  }
  return Status::Internal("memory temperature field: unknown value type {}", static_cast<int>(fv.value_type));
}

Result<unsigned long long> Nvml::total_energy_mj(Device d) const {
  unsigned long long v = 0;
  GPUOPT_RETURN_IF_ERROR(NVML_CALL(device_get_total_energy_consumption, d, &v));
  return v;
}

PcieLink Nvml::pcie_link(Device d) const {
  PcieLink l;
  auto get = [&](auto* fn, std::optional<unsigned>* out) {
    unsigned v = 0;
    if (fn && fn(d, &v) == kSuccess) *out = v;
  };
  get(api_.device_get_curr_pcie_link_generation, &l.gen);
  get(api_.device_get_max_pcie_link_generation, &l.max_gen);
  get(api_.device_get_gpu_max_pcie_link_generation, &l.gpu_max_gen);
  get(api_.device_get_curr_pcie_link_width, &l.width);
  get(api_.device_get_max_pcie_link_width, &l.max_width);
  return l;
}

Result<unsigned> Nvml::pcie_throughput_kbps(Device d, PcieUtilCounter counter) const {
  unsigned v = 0;
  GPUOPT_RETURN_IF_ERROR(NVML_CALL(device_get_pcie_throughput, d, counter, &v));
  return v;
}

Result<unsigned long long> Nvml::clocks_event_reasons(Device d) const {
  unsigned long long v = 0;
  GPUOPT_RETURN_IF_ERROR(NVML_CALL(device_get_current_clocks_event_reasons, d, &v));
  return v;
}

Result<unsigned long long> Nvml::total_ecc_errors(Device d, MemoryErrorType type, EccCounterType counter) const {
  unsigned long long v = 0;
  GPUOPT_RETURN_IF_ERROR(NVML_CALL(device_get_total_ecc_errors, d, type, counter, &v));
  return v;
}

EccCounts Nvml::ecc_counts(Device d) const {
  EccCounts c;
  auto get = [&](MemoryErrorType t, EccCounterType k, std::optional<unsigned long long>* out) {
    auto r = total_ecc_errors(d, t, k);
    if (r.ok()) *out = *r;
  };
  get(kMemoryErrorCorrected, kVolatileEcc, &c.corrected_volatile);
  get(kMemoryErrorUncorrected, kVolatileEcc, &c.uncorrected_volatile);
  get(kMemoryErrorCorrected, kAggregateEcc, &c.corrected_aggregate);
  get(kMemoryErrorUncorrected, kAggregateEcc, &c.uncorrected_aggregate);
  return c;
}

namespace {

// The count-then-fill protocol: call with a guess, grow on INSUFFICIENT_SIZE (processes may
// start between the calls, so retry a few times).
template <typename Info, typename Fn>
Result<std::vector<Info>> list_processes(const Nvml& nv, Fn* fn, const char* what, Device d) {
  if (!fn) return Status::Unimplemented("{} lacks {}", nv.library(), what);
  std::vector<Info> buf(32);
  for (int attempt = 0; attempt < 4; ++attempt) {
    unsigned n = static_cast<unsigned>(buf.size());
    Return r = fn(d, &n, buf.data());
    if (r == kSuccess) {
      buf.resize(n);
      return buf;
    }
    if (r != kErrorInsufficientSize) {
      auto e = call_error(r);
      return Status(e->code, fmt::format("{} failed: {}", what, e->text));
    }
    buf.resize(std::max<size_t>(n + 8, buf.size() * 2));
  }
  return Status::Internal("{}: process count kept growing", what);
}

void append_processes(const std::vector<ProcessInfo>& in, bool graphics, std::vector<ProcessEntry>* out) {
  for (const auto& p : in) {
    ProcessEntry e;
    e.pid = p.pid;
    if (p.used_gpu_memory != kValueNotAvailable) e.used_memory = p.used_gpu_memory;
    if (p.gpu_instance_id != 0xFFFFFFFFU) e.gpu_instance_id = p.gpu_instance_id;
    if (p.compute_instance_id != 0xFFFFFFFFU) e.compute_instance_id = p.compute_instance_id;
    e.graphics = graphics;
    out->push_back(e);
  }
}

void append_processes(const std::vector<ProcessInfoV1>& in, bool graphics, std::vector<ProcessEntry>* out) {
  for (const auto& p : in) {
    ProcessEntry e;
    e.pid = p.pid;
    if (p.used_gpu_memory != kValueNotAvailable) e.used_memory = p.used_gpu_memory;
    e.graphics = graphics;
    out->push_back(e);
  }
}

}  // namespace

Result<std::vector<ProcessEntry>> Nvml::processes(Device d) const {
  std::vector<ProcessEntry> out;
  bool any = false;
  Status last = Status::Unimplemented("{} lacks nvmlDeviceGetComputeRunningProcesses", library_);
  auto take = [&](auto r, bool graphics) {
    if (r.ok()) {
      any = true;
      append_processes(*r, graphics, &out);
    } else {
      last = r.status();
    }
  };
  if (api_.device_get_compute_running_processes)
    take(list_processes<ProcessInfo>(*this, api_.device_get_compute_running_processes,
                                     api_.device_get_compute_running_processes_symbol, d), false);
  else if (api_.device_get_compute_running_processes_v1)
    take(list_processes<ProcessInfoV1>(*this, api_.device_get_compute_running_processes_v1,
                                       api_.device_get_compute_running_processes_v1_symbol, d), false);
  if (api_.device_get_graphics_running_processes)
    take(list_processes<ProcessInfo>(*this, api_.device_get_graphics_running_processes,
                                     api_.device_get_graphics_running_processes_symbol, d), true);
  else if (api_.device_get_graphics_running_processes_v1)
    take(list_processes<ProcessInfoV1>(*this, api_.device_get_graphics_running_processes_v1,
                                       api_.device_get_graphics_running_processes_v1_symbol, d), true);
  if (!any) return last;
  // A process using both compute and graphics appears in both lists: keep one entry.
  std::vector<ProcessEntry> merged;
  for (const auto& e : out) {
    bool dup = false;
    for (auto& m : merged) {
      if (m.pid == e.pid && m.gpu_instance_id == e.gpu_instance_id) {
        dup = true;
        if (!m.used_memory && e.used_memory) m.used_memory = e.used_memory;
      }
    }
    if (!dup) merged.push_back(e);
  }
  return merged;
}

Result<std::vector<ProcessUtilizationSample>> Nvml::process_utilization(Device d,
                                                                        unsigned long long last_seen_us) const {
  if (!api_.device_get_process_utilization)
    return Status::Unimplemented("{} lacks nvmlDeviceGetProcessUtilization", library_);
  // First call with no buffer asks for the count.
  unsigned n = 0;
  Return r = api_.device_get_process_utilization(d, nullptr, &n, last_seen_us);
  if (r == kErrorNotFound) return std::vector<ProcessUtilizationSample>{};  // no samples since last_seen
  if (r != kSuccess && r != kErrorInsufficientSize) {
    auto e = call_error(r);
    return Status(e->code, fmt::format("nvmlDeviceGetProcessUtilization failed: {}", e->text));
  }
  std::vector<ProcessUtilizationSample> buf(n + 4);
  n = static_cast<unsigned>(buf.size());
  r = api_.device_get_process_utilization(d, buf.data(), &n, last_seen_us);
  if (r == kErrorNotFound) return std::vector<ProcessUtilizationSample>{};
  if (auto e = call_error(r))
    return Status(e->code, fmt::format("nvmlDeviceGetProcessUtilization failed: {}", e->text));
  buf.resize(std::min<size_t>(n, buf.size()));
  return buf;
}

Result<bool> Nvml::gpm_supported(Device d) const {
  GpmSupport s{};
  s.version = kGpmSupportVersion;
  GPUOPT_RETURN_IF_ERROR(NVML_CALL(gpm_query_device_support, d, &s));
  return s.is_supported_device != 0;
}

}  // namespace gpuopt::nvml
