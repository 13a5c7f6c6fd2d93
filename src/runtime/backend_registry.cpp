// The backend registry: one factory per device kind. "cpu" (fast) and "cpu-ref" (the reference)
// are always there; the CUDA backend
// registers itself (cuda_backend.cpp) in CUDA builds. Each create_backend call makes a backend
// of its own for one device: a session, or a server instance, never shares one.
#include "backends/backend.h"
#include "backends/cpu_fast/cpu_fast.h"
#include "core/device.h"

#include <fmt/ranges.h>

#include <map>
#include <mutex>

namespace gpuopt {
namespace {

struct Entry {
  std::string name;
  BackendFactory factory;
};

std::mutex& registry_mutex() {
  static std::mutex m;
  return m;
}
std::map<DeviceKind, Entry>& registry() {
  static std::map<DeviceKind, Entry> r;
  return r;
}

std::map<DeviceKind, PlacementFn>& placements() {
  static std::map<DeviceKind, PlacementFn> r;
  return r;
}

std::vector<std::string> names_locked() {
  std::vector<std::string> names{"cpu"};  // cpu-ref runs every op cpu does
  for (const auto& [k, e] : registry()) names.push_back(e.name);
  return names;
}

}  // namespace

void register_backend(DeviceKind kind, std::string name, BackendFactory factory) {
  std::lock_guard<std::mutex> lock(registry_mutex());
  registry()[kind] = Entry{std::move(name), std::move(factory)};
}

Result<std::unique_ptr<Backend>> create_backend(const Device& device) {
  if (device.kind == DeviceKind::kCpu) return device == kCpuReference ? make_cpu_backend() : make_fast_cpu_backend();
  BackendFactory f;
  {
    std::lock_guard<std::mutex> lock(registry_mutex());
    auto it = registry().find(device.kind);
    if (it == registry().end())
      return Status::Unavailable("device '{}' is not available in this build (backends: {})", device.to_string(),
                                 fmt::join(names_locked(), ", "));
    f = it->second.factory;
  }
  return f(device.index);
}

void register_placement(DeviceKind kind, PlacementFn fn) {
  std::lock_guard<std::mutex> lock(registry_mutex());
  placements()[kind] = std::move(fn);
}

std::optional<StaticPlacement> static_placement(const Device& device, const Graph& graph) {
  PlacementFn f;
  {
    std::lock_guard<std::mutex> lock(registry_mutex());
    auto it = placements().find(device.kind);
    if (it == placements().end()) return std::nullopt;
    f = it->second;
  }
  return f(graph);
}

std::vector<std::string> backend_names() {
  std::lock_guard<std::mutex> lock(registry_mutex());
  return names_locked();
}

}  // namespace gpuopt
