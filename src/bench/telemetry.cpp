#include "bench/telemetry.h"

#include "monitor/nvml.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>

namespace gpuopt::bench {

bool same_pci_bus_id(const std::string& a, const std::string& b) {
  auto split = [](const std::string& s, unsigned long* domain, std::string* rest) {
    const auto colon = s.find(':');
    if (colon == std::string::npos || colon == 0) return false;
    // The substring lives until `end` has been read (a temporary would be gone by then).
    const std::string hex = s.substr(0, colon);
    char* end = nullptr;
    *domain = std::strtoul(hex.c_str(), &end, 16);
    if (!end || *end != '\0') return false;
    *rest = s.substr(colon + 1);
    std::transform(rest->begin(), rest->end(), rest->begin(), [](unsigned char c) { return std::tolower(c); });
    return !rest->empty();
  };
  unsigned long da = 0, db = 0;
  std::string ra, rb;
  return split(a, &da, &ra) && split(b, &db, &rb) && da == db && ra == rb;
}

TelemetryReader TelemetryReader::open(const std::string& pci_bus_id) {
  TelemetryReader r;
  if (pci_bus_id.empty()) return r;
  auto nv = nvml::Nvml::load();
  if (!nv.ok()) return r;
  auto count = (*nv)->device_count();
  if (!count.ok()) return r;
  for (unsigned i = 0; i < *count; ++i) {
    auto d = (*nv)->device(i);
    if (!d.ok()) continue;
    auto id = (*nv)->pci_bus_id(*d);
    if (id.ok() && same_pci_bus_id(*id, pci_bus_id)) {
      r.nvml_ = *nv;
      r.device_ = *d;
      break;
    }
  }
  return r;
}

Telemetry TelemetryReader::sample() const {
  Telemetry t;
  if (!nvml_) return t;
  auto d = static_cast<nvml::Device>(device_);
  if (auto v = nvml_->clock_mhz(d, nvml::kClockSm); v.ok()) t.sm_clock_mhz = *v;
  if (auto v = nvml_->clock_mhz(d, nvml::kClockMem); v.ok()) t.mem_clock_mhz = *v;
  if (auto v = nvml_->temperature_c(d); v.ok()) t.temperature_c = *v;
  if (auto v = nvml_->power_usage_mw(d); v.ok()) t.power_w = *v / 1000.0;
  return t;
}

}  // namespace gpuopt::bench
