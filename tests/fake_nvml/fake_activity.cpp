// Fake NVML: running processes, per-process utilisation, events (XID) and GPM.
#include "fake_api.h"

#include <chrono>
#include <map>
#include <thread>

using namespace fake_nvml;  // NOLINT

namespace {

// The processes of one list ("compute" or "graphics"); `counter` keeps the lists' sequences apart.
std::vector<json> process_list(FakeDevice& d, const char* kind, bool advance) {
  std::vector<json> out;
  auto v = field(d, "processes", std::string("processes#") + kind, advance);
  if (!v || !v->is_array()) return out;
  for (const auto& p : *v) {
    std::string type = p.value("type", "compute");
    if (type == kind || type == "both") out.push_back(p);
  }
  return out;
}

template <typename Info>
Return fill_processes(Device device, unsigned int* count, Info* infos, const char* kind, const char* fn) {
  FAKE_DEVICE_PROLOGUE(fn);
  if (!count) return kErrorInvalidArgument;
  if (!d->j.contains("processes")) return kErrorNotSupported;
  auto procs = process_list(*d, kind, false);
  if (*count < procs.size() || (!infos && !procs.empty())) {
    *count = static_cast<unsigned>(procs.size());
    return kErrorInsufficientSize;
  }
  procs = process_list(*d, kind, true);
  *count = static_cast<unsigned>(procs.size());
  for (size_t i = 0; i < procs.size(); ++i) {
    const json& p = procs[i];
    Info info{};
    info.pid = p.value("pid", 0U);
    info.used_gpu_memory = p.contains("used_memory") && p["used_memory"].is_number()
                               ? p["used_memory"].get<unsigned long long>()
                               : kValueNotAvailable;
    if constexpr (sizeof(Info) == sizeof(ProcessInfo)) {
      info.gpu_instance_id = p.value("gpu_instance_id", 0xFFFFFFFFU);
      info.compute_instance_id = p.value("compute_instance_id", 0xFFFFFFFFU);
    }
    infos[i] = info;
  }
  return kSuccess;
}

}  // namespace

FAKE_EXPORT Return nvmlDeviceGetComputeRunningProcesses(Device d, unsigned int* n, ProcessInfoV1* p) {
  return fill_processes(d, n, p, "compute", "nvmlDeviceGetComputeRunningProcesses");
}
FAKE_EXPORT Return nvmlDeviceGetGraphicsRunningProcesses(Device d, unsigned int* n, ProcessInfoV1* p) {
  return fill_processes(d, n, p, "graphics", "nvmlDeviceGetGraphicsRunningProcesses");
}
#ifndef FAKE_NVML_OLD
FAKE_EXPORT Return nvmlDeviceGetComputeRunningProcesses_v2(Device d, unsigned int* n, ProcessInfo* p) {
  return fill_processes(d, n, p, "compute", "nvmlDeviceGetComputeRunningProcesses_v2");
}
FAKE_EXPORT Return nvmlDeviceGetComputeRunningProcesses_v3(Device d, unsigned int* n, ProcessInfo* p) {
  return fill_processes(d, n, p, "compute", "nvmlDeviceGetComputeRunningProcesses_v3");
}
FAKE_EXPORT Return nvmlDeviceGetGraphicsRunningProcesses_v2(Device d, unsigned int* n, ProcessInfo* p) {
  return fill_processes(d, n, p, "graphics", "nvmlDeviceGetGraphicsRunningProcesses_v2");
}
FAKE_EXPORT Return nvmlDeviceGetGraphicsRunningProcesses_v3(Device d, unsigned int* n, ProcessInfo* p) {
  return fill_processes(d, n, p, "graphics", "nvmlDeviceGetGraphicsRunningProcesses_v3");
}
#endif

FAKE_EXPORT Return nvmlDeviceGetProcessUtilization(Device device, ProcessUtilizationSample* samples,
                                                   unsigned int* count, unsigned long long last_seen) {
  FAKE_DEVICE_PROLOGUE("nvmlDeviceGetProcessUtilization");
  if (!count) return kErrorInvalidArgument;
  auto peek = field(*d, "processes", "processes#util", false);
  if (!peek || !peek->is_array()) return kErrorNotSupported;
  std::vector<json> with_util;
  for (const auto& p : *peek)
    if (p.contains("sm_util")) with_util.push_back(p);
  if (!samples || *count < with_util.size()) {
    *count = static_cast<unsigned>(with_util.size());
    return kErrorInsufficientSize;
  }
  field(*d, "processes", "processes#util", true);  // advance the sequence
  // Each read is one second after the previous one; samples older than last_seen are filtered.
  s.util_clock_us += 1'000'000;
  if (s.util_clock_us <= last_seen) {
    *count = 0;
    return kErrorNotFound;
  }
  *count = static_cast<unsigned>(with_util.size());
  for (size_t i = 0; i < with_util.size(); ++i) {
    const json& p = with_util[i];
    samples[i] = ProcessUtilizationSample{p.value("pid", 0U), s.util_clock_us, p.value("sm_util", 0U),
                                          p.value("mem_util", 0U), p.value("enc_util", 0U), p.value("dec_util", 0U)};
  }
  return kSuccess;
}

// ---- events -------------------------------------------------------------------------------------

FAKE_EXPORT Return nvmlDeviceGetSupportedEventTypes(Device device, unsigned long long* types) {
  FAKE_DEVICE_PROLOGUE("nvmlDeviceGetSupportedEventTypes");
  if (!types) return kErrorInvalidArgument;
  if (read_num(*d, "supported_event_types", types) != kSuccess)
    *types = kEventSingleBitEccError | kEventDoubleBitEccError | kEventPState | kEventXidCriticalError | kEventClock;
  return kSuccess;
}

FAKE_EXPORT Return nvmlEventSetCreate(EventSet* set) {
  FAKE_SYSTEM_PROLOGUE("nvmlEventSetCreate");
  if (!set) return kErrorInvalidArgument;
  *set = reinterpret_cast<EventSet>(new FakeEventSet());
  return kSuccess;
}

FAKE_EXPORT Return nvmlDeviceRegisterEvents(Device device, unsigned long long types, EventSet set) {
  FAKE_DEVICE_PROLOGUE("nvmlDeviceRegisterEvents");
  if (!set) return kErrorInvalidArgument;
  reinterpret_cast<FakeEventSet*>(set)->registered.emplace_back(d, types);
  return kSuccess;
}

namespace {

// XIDs come from each registered device's "xid_events": [79, {"xid": 48, "after_waits": 3}]; an
// entry is delivered once, on the first wait after `after_waits` earlier waits.
Return wait_event(EventSet set, EventData* data, unsigned int timeout_ms, const char* fn) {
  {
    FAKE_SYSTEM_PROLOGUE(fn);
    if (!set || !data) return kErrorInvalidArgument;
    size_t wait_no = s.event_waits++;
    for (auto& [dev, mask] : reinterpret_cast<FakeEventSet*>(set)->registered) {
      if (!(mask & kEventXidCriticalError) || !dev->j.contains("xid_events")) continue;
      const json& list = dev->j["xid_events"];
      for (size_t i = 0; i < list.size(); ++i) {
        const json& e = list[i];
        size_t after = e.is_object() ? e.value("after_waits", size_t{0}) : 0;
        unsigned long long xid = e.is_object() ? e.value("xid", 0ULL) : e.get<unsigned long long>();
        if (after > wait_no) continue;
        bool done = false;
        for (const auto& [dd, ii] : s.delivered_xids) done |= dd == dev && ii == i;
        if (done) continue;
        s.delivered_xids.emplace_back(dev, i);
        *data = EventData{as_handle(dev), kEventXidCriticalError, xid, 0xFFFFFFFFU, 0xFFFFFFFFU};
        return kSuccess;
      }
    }
  }
  // Nothing pending: behave like a timeout, without making tests wait long.
  std::this_thread::sleep_for(std::chrono::milliseconds(std::min(timeout_ms, 20U)));
  return kErrorTimeout;
}

}  // namespace

FAKE_EXPORT Return nvmlEventSetWait(EventSet set, EventData* data, unsigned int timeout_ms) {
  return wait_event(set, data, timeout_ms, "nvmlEventSetWait");
}
#ifndef FAKE_NVML_OLD
FAKE_EXPORT Return nvmlEventSetWait_v2(EventSet set, EventData* data, unsigned int timeout_ms) {
  return wait_event(set, data, timeout_ms, "nvmlEventSetWait_v2");
}
#endif

FAKE_EXPORT Return nvmlEventSetFree(EventSet set) {
  FAKE_SYSTEM_PROLOGUE("nvmlEventSetFree");
  delete reinterpret_cast<FakeEventSet*>(set);
  return kSuccess;
}

// ---- GPM ----------------------------------------------------------------------------------------
#ifndef FAKE_NVML_OLD

namespace {

// Name -> id, so scripts say "sm_util" rather than 2.
const std::map<std::string, unsigned>& gpm_ids() {
  static const std::map<std::string, unsigned> kIds = {
      {"graphics_util", 1}, {"sm_util", 2},          {"sm_occupancy", 3},     {"integer_util", 4},
      {"any_tensor_util", 5}, {"dfma_tensor_util", 6}, {"hmma_tensor_util", 7}, {"imma_tensor_util", 9},
      {"dram_bw_util", 10}, {"fp64_util", 11},       {"fp32_util", 12},       {"fp16_util", 13},
      {"pcie_tx_per_sec", 20}, {"pcie_rx_per_sec", 21}};
  return kIds;
}

}  // namespace

FAKE_EXPORT Return nvmlGpmQueryDeviceSupport(Device device, GpmSupport* support) {
  FAKE_DEVICE_PROLOGUE("nvmlGpmQueryDeviceSupport");
  if (!support) return kErrorInvalidArgument;
  if (support->version != kGpmSupportVersion) return kErrorArgumentVersionMismatch;
  unsigned v = 0;
  read_num(*d, "gpm.supported", &v);
  support->is_supported_device = v;
  return kSuccess;
}

FAKE_EXPORT Return nvmlGpmSampleAlloc(GpmSample* sample) {
  FAKE_SYSTEM_PROLOGUE("nvmlGpmSampleAlloc");
  if (!sample) return kErrorInvalidArgument;
  *sample = reinterpret_cast<GpmSample>(new FakeGpmSample());
  return kSuccess;
}

FAKE_EXPORT Return nvmlGpmSampleFree(GpmSample sample) {
  FAKE_SYSTEM_PROLOGUE("nvmlGpmSampleFree");
  delete reinterpret_cast<FakeGpmSample*>(sample);
  return kSuccess;
}

FAKE_EXPORT Return nvmlGpmSampleGet(Device device, GpmSample sample) {
  FAKE_DEVICE_PROLOGUE("nvmlGpmSampleGet");
  if (!sample) return kErrorInvalidArgument;
  unsigned supported = 0;
  read_num(*d, "gpm.supported", &supported);
  if (!supported) return kErrorNotSupported;
  auto* smp = reinterpret_cast<FakeGpmSample*>(sample);
  smp->device = d;
  smp->taken = true;
  return kSuccess;
}

FAKE_EXPORT Return nvmlGpmMigSampleGet(Device device, unsigned int gpu_instance_id, GpmSample sample) {
  return nvmlGpmSampleGet(device, sample);
}

FAKE_EXPORT Return nvmlGpmMetricsGet(GpmMetricsGet* m) {
  FAKE_SYSTEM_PROLOGUE("nvmlGpmMetricsGet");
  if (!m || !m->sample1 || !m->sample2) return kErrorInvalidArgument;
  if (m->version != kGpmMetricsGetVersion) return kErrorArgumentVersionMismatch;
  auto* a = reinterpret_cast<FakeGpmSample*>(m->sample1);
  auto* b = reinterpret_cast<FakeGpmSample*>(m->sample2);
  if (!a->taken || !b->taken || a->device != b->device || m->num_metrics > kGpmMetricMax) return kErrorInvalidArgument;
  FakeDevice* d = b->device;
  if (Return f = failure(s, d, "nvmlGpmMetricsGet"); f != kSuccess) return f;
  for (unsigned i = 0; i < m->num_metrics; ++i) {
    GpmMetric& g = m->metrics[i];
    g.nvml_return = kErrorNotSupported;
    g.value = 0;
    std::string key = std::to_string(g.metric_id);
    for (const auto& [name, id] : gpm_ids())
      if (id == g.metric_id) key = name;
    auto v = field(*d, "gpm.metrics." + key);
    if (v && v->is_number()) {
      g.value = v->get<double>();
      g.nvml_return = kSuccess;
    }
  }
  return kSuccess;
}

#endif  // FAKE_NVML_OLD
