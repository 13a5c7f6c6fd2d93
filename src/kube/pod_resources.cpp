#include "kube/pod_resources.h"

#include "podresources/v1/api.grpc.pb.h"

#include <grpcpp/grpcpp.h>
#include <sys/stat.h>

#include <cerrno>
#include <chrono>
#include <cstring>

namespace gpuopt::kube {

gpu::PodIndex index_pod_resources(const v1::ListPodResourcesResponse& response) {
  gpu::PodIndex index;
  for (const v1::PodResources& pod : response.pod_resources())
    for (const v1::ContainerResources& c : pod.containers())
      for (const v1::ContainerDevices& d : c.devices()) {
        if (d.resource_name().rfind("nvidia.com/", 0) != 0) continue;
        for (const std::string& id : d.device_ids())
          index.add(id, gpu::PodRef{pod.name(), pod.namespace_(), c.name(), d.resource_name()});
      }
  return index;
}

struct PodResourcesClient::Impl {
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<v1::PodResourcesLister::Stub> stub;
};

PodResourcesClient::~PodResourcesClient() = default;

Result<std::unique_ptr<PodResourcesClient>> PodResourcesClient::connect(const std::string& socket_path,
                                                                         double timeout_s) {
  struct stat st {};
  if (::stat(socket_path.c_str(), &st) != 0)
    return Status::NotFound("pod-resources socket '{}': {} (mount the host's /var/lib/kubelet/pod-resources)",
                            socket_path, std::strerror(errno));
  if (!S_ISSOCK(st.st_mode)) return Status::NotFound("pod-resources socket '{}': not a unix socket", socket_path);
  if (!(timeout_s > 0)) return Status::InvalidArgument("pod-resources timeout must be > 0");
  std::unique_ptr<PodResourcesClient> c(new PodResourcesClient());
  c->path_ = socket_path;
  c->timeout_s_ = timeout_s;
  c->impl_ = std::make_unique<Impl>();
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(16 << 20);  // the kubelet's own limit for this API
  c->impl_->channel = grpc::CreateCustomChannel("unix://" + socket_path, grpc::InsecureChannelCredentials(), args);
  c->impl_->stub = v1::PodResourcesLister::NewStub(c->impl_->channel);
  return c;
}

Result<gpu::PodIndex> PodResourcesClient::list() {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() +
                   std::chrono::microseconds(static_cast<int64_t>(timeout_s_ * 1e6)));
  v1::ListPodResourcesRequest req;
  v1::ListPodResourcesResponse resp;
  grpc::Status st = impl_->stub->List(&ctx, req, &resp);
  if (st.ok()) return index_pod_resources(resp);
  std::string what = fmt::format("pod-resources List on '{}': {}", path_, st.error_message());
  if (st.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED)
    return Status::DeadlineExceeded("{} (no answer within {} s)", what, timeout_s_);
  if (st.error_code() == grpc::StatusCode::UNIMPLEMENTED)
    return Status::Unimplemented("{} (the kubelet does not serve the v1 API; Kubernetes >= 1.20 does)", what);
  return Status::Unavailable("{}", what);
}

}  // namespace gpuopt::kube
