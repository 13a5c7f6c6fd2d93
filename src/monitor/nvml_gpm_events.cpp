// GPM samples/metrics and the NVML event set (XID errors), over the loader in nvml.cpp.
#include "monitor/nvml.h"

#include <memory>

namespace gpuopt::nvml {

Result<GpmSampleHandle> GpmSampleHandle::alloc(std::shared_ptr<const Nvml> nvml) {
  const Api& api = nvml->api();
  if (!api.gpm_sample_alloc || !api.gpm_sample_free || !api.gpm_sample_get)
    return Status::Unimplemented("{} lacks the GPM sample API (nvmlGpmSampleAlloc)", nvml->library());
  GpmSampleHandle h;
  GPUOPT_CHECK_CALL(api.gpm_sample_alloc(&h.sample_));
  h.nvml_ = std::move(nvml);
  return h;
}

GpmSampleHandle::GpmSampleHandle(GpmSampleHandle&& o) noexcept
    : nvml_(std::move(o.nvml_)), sample_(o.sample_) {
  o.sample_ = nullptr;
}

GpmSampleHandle& GpmSampleHandle::operator=(GpmSampleHandle&& o) noexcept {
  if (this != &o) {
    if (sample_) nvml_->api().gpm_sample_free(sample_);
    nvml_ = std::move(o.nvml_);
    sample_ = o.sample_;
    o.sample_ = nullptr;
  }
  return *this;
}

GpmSampleHandle::~GpmSampleHandle() {
  if (sample_ && nvml_) nvml_->api().gpm_sample_free(sample_);
}

Status GpmSampleHandle::take(Device d) {
  GPUOPT_CHECK_CALL(nvml_->api().gpm_sample_get(d, sample_));
  return Status::Ok();
}

Result<std::vector<std::optional<double>>> gpm_metrics(const Nvml& nvml, const GpmSampleHandle& first,
                                                       const GpmSampleHandle& second,
                                                       const std::vector<GpmMetricId>& ids) {
  const Api& api = nvml.api();
  if (!api.gpm_metrics_get) return Status::Unimplemented("{} lacks nvmlGpmMetricsGet", nvml.library());
  if (ids.empty() || ids.size() > kGpmMetricMax)
    return Status::InvalidArgument("gpm_metrics: {} metric ids (1..{} allowed)", ids.size(), kGpmMetricMax);
  // ~13 KB: heap, so a sampler thread's stack stays small.
  auto req = std::make_unique<GpmMetricsGet>();
  *req = GpmMetricsGet{};
  req->version = kGpmMetricsGetVersion;
  req->num_metrics = static_cast<unsigned>(ids.size());
  req->sample1 = first.get();
  req->sample2 = second.get();
  for (size_t i = 0; i < ids.size(); ++i) req->metrics[i].metric_id = ids[i];
  GPUOPT_CHECK_CALL(api.gpm_metrics_get(req.get()));
  std::vector<std::optional<double>> out(ids.size());
  for (size_t i = 0; i < ids.size(); ++i)
    if (req->metrics[i].nvml_return == kSuccess) out[i] = req->metrics[i].value;
  return out;
}

Result<std::unique_ptr<EventWatcher>> EventWatcher::create(std::shared_ptr<const Nvml> nvml,
                                                            const std::vector<Device>& devices,
                                                            unsigned long long types) {
  const Api& api = nvml->api();
  if (!api.event_set_create || !api.device_register_events || !api.event_set_wait || !api.event_set_free)
    return Status::Unimplemented("{} lacks the event API (nvmlEventSetCreate)", nvml->library());
  std::unique_ptr<EventWatcher> w(new EventWatcher());
  w->nvml_ = nvml;
  GPUOPT_CHECK_CALL(api.event_set_create(&w->set_));
  int registered = 0;
  for (Device d : devices) {
    unsigned long long supported = types;
    if (api.device_get_supported_event_types && api.device_get_supported_event_types(d, &supported) != kSuccess)
      continue;
    unsigned long long want = types & supported;
    if (!want) continue;
    if (api.device_register_events(d, want, w->set_) == kSuccess) ++registered;
  }
  if (registered == 0) return Status::Unimplemented("no device supports the requested NVML events");
  return w;
}

EventWatcher::~EventWatcher() {
  if (set_) nvml_->api().event_set_free(set_);
}

Result<std::optional<XidEvent>> EventWatcher::wait(unsigned timeout_ms) {
  EventData data{};
  Return r = nvml_->api().event_set_wait(set_, &data, timeout_ms);
  if (r == kErrorTimeout) return std::optional<XidEvent>{};
  GPUOPT_RETURN_IF_ERROR(GPUOPT_CALL_STATUS(r));
  return std::optional<XidEvent>(XidEvent{data.device, data.event_type, data.event_data});
}

std::string clocks_event_reasons_text(unsigned long long mask) {
  static const std::pair<unsigned long long, const char*> kNames[] = {
      {kClocksEventGpuIdle, "gpu_idle"},
      {kClocksEventApplicationsClocksSetting, "applications_clocks_setting"},
      {kClocksEventSwPowerCap, "sw_power_cap"},
      {kClocksEventHwSlowdown, "hw_slowdown"},
      {kClocksEventSyncBoost, "sync_boost"},
      {kClocksEventSwThermalSlowdown, "sw_thermal_slowdown"},
      {kClocksEventHwThermalSlowdown, "hw_thermal_slowdown"},
      {kClocksEventHwPowerBrakeSlowdown, "hw_power_brake_slowdown"},
      {kClocksEventDisplayClockSetting, "display_clock_setting"},
  };
  if (mask == 0) return "none";
  std::string out;
  unsigned long long known = 0;
  for (const auto& [bit, name] : kNames) {
    known |= bit;
    if (!(mask & bit)) continue;
    if (!out.empty()) out += ',';
    out += name;
  }
  if (mask & ~known) out += fmt::format("{}0x{:x}", out.empty() ? "" : ",", mask & ~known);
  return out;
}

}  // namespace gpuopt::nvml
