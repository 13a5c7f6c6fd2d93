// Which Kubernetes containers each GPU is assigned to, as the kubelet's pod-resources API says
// (src/kube/pod_resources.h reads it; the exporter labels per-process series with it). Kept free
// of gRPC so the gpu module does not depend on it: the exporter only sees a lookup function.
//
//   PodIndex idx;
//   idx.add("GPU-5b7c...::1", {"resnet-0", "ml", "server", "nvidia.com/gpu"});  // "::1": a time-slice replica
//   const std::vector<PodRef>* refs = idx.find("GPU-5b7c...");                 // one ref
#pragma once

#include "core/status.h"

#include <algorithm>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace gpuopt::gpu {

struct PodRef {
  std::string pod, namespace_name, container;
  std::string resource;  // the extended resource it was allocated as: nvidia.com/gpu, nvidia.com/mig-1g.18gb
  bool operator==(const PodRef&) const = default;
};

struct PodIndex {
  // Device id as the device plugin reports it (a GPU UUID "GPU-...", a MIG UUID "MIG-..."), with
  // the time-slicing replica suffix ("::N") removed, -> the containers holding it (no duplicates).
  std::map<std::string, std::vector<PodRef>, std::less<>> devices;

  void add(std::string_view device_id, PodRef ref) {
    if (size_t sep = device_id.find("::"); sep != std::string_view::npos) device_id = device_id.substr(0, sep);
    if (device_id.empty()) return;
    auto it = devices.find(device_id);
    if (it == devices.end()) it = devices.emplace(std::string(device_id), std::vector<PodRef>{}).first;
    if (std::find(it->second.begin(), it->second.end(), ref) == it->second.end()) it->second.push_back(std::move(ref));
  }
  const std::vector<PodRef>* find(std::string_view device_id) const {
    auto it = devices.find(device_id);
    return it == devices.end() ? nullptr : &it->second;
  }
};

// Called once per sample by the exporter; an error drops the labels until the next good call.
using PodLookup = std::function<Result<PodIndex>()>;

}  // namespace gpuopt::gpu
