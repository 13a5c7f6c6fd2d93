// The kubelet's pod-resources API (v1 PodResourcesLister, third_party/kubelet) over its unix
// socket, as dcgm-exporter reads it: which container holds which GPU. `gpuopt exporter
// --pod-resources-socket` turns the answer into pod/namespace/container labels (gpu/pod_index.h).
//
//   GPUOPT_ASSIGN_OR_RETURN(auto c, PodResourcesClient::connect("/var/lib/kubelet/pod-resources/kubelet.sock"));
//   GPUOPT_ASSIGN_OR_RETURN(gpu::PodIndex idx, c->list());   // idx.find("GPU-5b7c...")
#pragma once

#include "core/status.h"
#include "monitor/pod_index.h"

#include <memory>
#include <string>

namespace v1 {
class ListPodResourcesResponse;
}

namespace gpuopt::kube {

inline constexpr const char* kDefaultPodResourcesSocket = "/var/lib/kubelet/pod-resources/kubelet.sock";

// The GPU devices of a List answer: each container's devices of an `nvidia.com/` resource
// (nvidia.com/gpu, nvidia.com/mig-1g.18gb, nvidia.com/gpu.shared), indexed by device id.
gpu::PodIndex index_pod_resources(const v1::ListPodResourcesResponse& response);

class PodResourcesClient {
 public:
  // NotFound when `socket_path` is not a unix socket (the host's /var/lib/kubelet/pod-resources
  // not mounted); no call is made yet. Each List waits at most `timeout_s`.
  static Result<std::unique_ptr<PodResourcesClient>> connect(const std::string& socket_path, double timeout_s = 1.0);
  ~PodResourcesClient();

  // One List call. Unavailable / DeadlineExceeded name the socket and gRPC's reason.
  Result<gpu::PodIndex> list();
  const std::string& socket_path() const { return path_; }

 private:
  struct Impl;
  PodResourcesClient() = default;
  std::string path_;
  double timeout_s_ = 1.0;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpuopt::kube
