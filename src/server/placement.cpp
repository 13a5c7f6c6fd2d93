#include "server/placement.h"

#include "core/device.h"

#include <fmt/format.h>

namespace gpuopt::server {

Result<std::vector<PlacedInstance>> place_instances(const std::string& model, const std::vector<InstanceGroup>& groups,
                                                    int cuda_devices) {
  std::vector<PlacedInstance> out;
  for (const InstanceGroup& g : groups) {
    InstanceKind kind = g.kind;
    if (kind == InstanceKind::kAuto) kind = cuda_devices > 0 || !g.gpus.empty() ? InstanceKind::kGpu : InstanceKind::kCpu;
    std::vector<Device> devices;
    if (kind == InstanceKind::kCpu) {
      if (!g.gpus.empty())
        return Status::InvalidArgument("model '{}': instance_group '{}' is KIND_CPU but lists gpus", model, g.name);
      devices.push_back(Device::cpu());
    } else {
      if (cuda_devices <= 0 && g.gpus.empty())
        return Status::Unavailable("model '{}': instance_group '{}' is KIND_GPU but {}", model, g.name,
                                   cuda_device_count_phrase(cuda_devices));
      for (int d : g.gpus) {
        if (d < 0) return Status::InvalidArgument("model '{}': instance_group '{}' lists GPU {}", model, g.name, d);
        if (d >= cuda_devices)
          return Status::Unavailable("model '{}': instance_group '{}': cuda:{} does not exist: {}", model, g.name, d,
                                     cuda_device_count_phrase(cuda_devices));
        devices.push_back(Device::cuda(d));
      }
      if (g.gpus.empty())
        for (int d = 0; d < cuda_devices; ++d) devices.push_back(Device::cuda(d));
    }
    for (const Device& dev : devices)
      for (int i = 0; i < g.count; ++i)
        out.push_back(PlacedInstance{fmt::format("{}_{}", g.name, out.size()), g.name, dev});
  }
  return out;
}

}  // namespace gpuopt::server
