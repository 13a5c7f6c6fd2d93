// The kubelet pod-resources client against a fake kubelet: a real gRPC server (grpc++'s, from
// the vendored proto) on a unix socket, and the exporter labelling per-process series from it.
#include "kube/pod_resources.h"

#include "../monitor/fake_script.h"
#include "monitor/exporter.h"
#include "net/http.h"
#include "podresources/v1/api.grpc.pb.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

namespace gpuopt::kube {
namespace {

void add_container(v1::ListPodResourcesResponse* r, const std::string& pod, const std::string& ns,
                   const std::string& container, const std::string& resource, std::vector<std::string> ids) {
  v1::PodResources* p = nullptr;
  for (auto& existing : *r->mutable_pod_resources())
    if (existing.name() == pod && existing.namespace_() == ns) p = &existing;
  if (!p) {
    p = r->add_pod_resources();
    p->set_name(pod);
    p->set_namespace_(ns);
  }
  v1::ContainerResources* c = p->add_containers();
  c->set_name(container);
  v1::ContainerDevices* d = c->add_devices();
  d->set_resource_name(resource);
  for (const auto& id : ids) d->add_device_ids(id);
  c->add_cpu_ids(3);
}

// The kubelet's side: answers List with whatever the test sets; `hang` holds each call until the
// client gives up.
class FakeKubelet final : public v1::PodResourcesLister::Service {
 public:
  grpc::Status List(grpc::ServerContext* ctx, const v1::ListPodResourcesRequest*,
                    v1::ListPodResourcesResponse* out) override {
    calls++;
    while (hang && !ctx->IsCancelled()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    std::lock_guard<std::mutex> lock(mu);
    *out = answer;
    return grpc::Status::OK;
  }
  void set(v1::ListPodResourcesResponse r) {
    std::lock_guard<std::mutex> lock(mu);
    answer = std::move(r);
  }
  std::mutex mu;
  v1::ListPodResourcesResponse answer;
  std::atomic<int> calls{0};
  std::atomic<bool> hang{false};
};

struct FakeServer {
  explicit FakeServer(FakeKubelet* svc) {
    static int n = 0;
    path = (std::filesystem::temp_directory_path() /
            ("gpuopt_kubelet_" + std::to_string(::getpid()) + "_" + std::to_string(n++) + ".sock"))
               .string();
    std::filesystem::remove(path);
    grpc::ServerBuilder b;
    b.AddListeningPort("unix:" + path, grpc::InsecureServerCredentials());
    b.RegisterService(svc);
    server = b.BuildAndStart();
  }
  ~FakeServer() {
    stop();
    std::filesystem::remove(path);
  }
  void stop() {
    if (server) server->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(200));
    server.reset();
  }
  std::string path;
  std::unique_ptr<grpc::Server> server;
};

v1::ListPodResourcesResponse node_answer() {
  v1::ListPodResourcesResponse r;
  add_container(&r, "resnet-0", "ml", "server", "nvidia.com/gpu", {"GPU-9"});
  add_container(&r, "resnet-0", "ml", "sidecar", "example.com/nic", {"GPU-9"});  // not a GPU resource
  add_container(&r, "llm-a", "prod", "engine", "nvidia.com/gpu", {"GPU-2::0"});   // time-sliced replicas
  add_container(&r, "llm-b", "prod", "engine", "nvidia.com/gpu", {"GPU-2::1"});
  add_container(&r, "small", "dev", "main", "nvidia.com/mig-1g.18gb", {"MIG-aa"});
  return r;
}

TEST(PodResources, IndexKeepsGpuResourcesAndFoldsReplicas) {
  gpu::PodIndex idx = index_pod_resources(node_answer());
  ASSERT_EQ(idx.devices.size(), 3u);
  const auto* g9 = idx.find("GPU-9");
  ASSERT_NE(g9, nullptr);
  ASSERT_EQ(g9->size(), 1u);  // the sidecar's non-NVIDIA resource is not a GPU holder
  EXPECT_EQ((*g9)[0], (gpu::PodRef{"resnet-0", "ml", "server", "nvidia.com/gpu"}));
  const auto* g2 = idx.find("GPU-2");
  ASSERT_NE(g2, nullptr);
  ASSERT_EQ(g2->size(), 2u);
  EXPECT_EQ((*g2)[0].pod, "llm-a");
  EXPECT_EQ((*g2)[1].pod, "llm-b");
  const auto* mig = idx.find("MIG-aa");
  ASSERT_NE(mig, nullptr);
  EXPECT_EQ((*mig)[0].resource, "nvidia.com/mig-1g.18gb");
  EXPECT_EQ(idx.find("GPU-2::0"), nullptr);
}

TEST(PodResources, ListOverTheUnixSocket) {
  FakeKubelet kubelet;
  kubelet.set(node_answer());
  FakeServer server(&kubelet);
  ASSERT_NE(server.server, nullptr);
  auto c = PodResourcesClient::connect(server.path);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  auto idx = (*c)->list();
  ASSERT_TRUE(idx.ok()) << idx.status().to_string();
  EXPECT_EQ(idx->devices.size(), 3u);
  ASSERT_NE(idx->find("GPU-9"), nullptr);
  EXPECT_EQ(idx->find("GPU-9")->front().container, "server");
  EXPECT_EQ(kubelet.calls.load(), 1);
  // A second call sees the kubelet's new answer (nothing cached).
  v1::ListPodResourcesResponse empty;
  kubelet.set(empty);
  auto idx2 = (*c)->list();
  ASSERT_TRUE(idx2.ok());
  EXPECT_TRUE(idx2->devices.empty());
}

TEST(PodResources, MissingSocketIsOneClearLine) {
  auto c = PodResourcesClient::connect("/nonexistent/pod-resources/kubelet.sock");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kNotFound);
  EXPECT_NE(c.status().message().find("'/nonexistent/pod-resources/kubelet.sock'"), std::string::npos);
  std::string file = (std::filesystem::temp_directory_path() / ("gpuopt_notasock_" + std::to_string(::getpid()))).string();
  std::ofstream(file) << "x";
  auto f = PodResourcesClient::connect(file);
  std::filesystem::remove(file);
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find("not a unix socket"), std::string::npos);
}

TEST(PodResources, KubeletGoneOrSlowIsAnErrorNotAHang) {
  FakeKubelet kubelet;
  kubelet.set(node_answer());
  FakeServer server(&kubelet);
  auto c = PodResourcesClient::connect(server.path, 0.2);
  ASSERT_TRUE(c.ok());
  kubelet.hang = true;
  auto slow = (*c)->list();
  ASSERT_FALSE(slow.ok());
  EXPECT_EQ(slow.status().code(), StatusCode::kDeadlineExceeded) << slow.status().to_string();
  EXPECT_NE(slow.status().message().find(server.path), std::string::npos);
  kubelet.hang = false;
  server.stop();
  auto gone = (*c)->list();
  ASSERT_FALSE(gone.ok());
  EXPECT_NE(gone.status().message().find(server.path), std::string::npos) << gone.status().to_string();
}

// The exporter end to end: fake NVML (one GPU, one process), the fake kubelet, a real scrape.
TEST(PodResources, ExporterLabelsProcessSeries) {
  gpu::testing::FakeNvmlScript script(nlohmann::json::parse(R"({"devices": [{"name": "NVIDIA H200", "uuid": "GPU-9",
      "memory": {"total": 1073741824, "used": 536870912},
      "processes": [{"pid": 4242, "used_memory": 1048576}]}]})"));
  GPUOPT_REQUIRE_FAKE_NVML(script);
  ::setenv("GPUOPT_PROC_ROOT", "/nonexistent/proc", 1);
  FakeKubelet kubelet;
  kubelet.set(node_answer());
  FakeServer server(&kubelet);
  auto client = PodResourcesClient::connect(server.path, 0.5);
  ASSERT_TRUE(client.ok());
  std::shared_ptr<PodResourcesClient> c = std::move(*client);
  gpu::ExporterOptions o;
  o.listen = "127.0.0.1:0";
  o.interval_s = 0.05;
  o.pods = [c] { return c->list(); };
  auto e = gpu::Exporter::start(o);
  ASSERT_TRUE(e.ok()) << e.status().to_string();
  net::HttpClient http("127.0.0.1", (*e)->port());
  auto r = http.get("/metrics");
  ASSERT_TRUE(r.ok());
  const std::string gpu_labels =
      R"(gpu="0",UUID="GPU-9",pci_bus_id="",device="nvidia0",modelName="NVIDIA H200",Hostname=")";
  EXPECT_NE(r->body.find("gpuopt_exporter_pod_resources_up{Hostname="), std::string::npos);
  EXPECT_NE(r->body.find(R"(pid="4242",process_name="",user="",container_id="",pod="resnet-0",namespace="ml",container="server"} 1048576)"),
            std::string::npos)
      << r->body;
  EXPECT_NE(r->body.find("gpuopt_gpu_pod_info{" + gpu_labels), std::string::npos);
  EXPECT_NE(r->body.find(R"(pod="resnet-0",namespace="ml",container="server",resource="nvidia.com/gpu"} 1)"),
            std::string::npos);
  EXPECT_GE(kubelet.calls.load(), 1);

  // The pod moves: the next samples carry the new owner.
  v1::ListPodResourcesResponse moved;
  add_container(&moved, "resnet-1", "ml", "server", "nvidia.com/gpu", {"GPU-9"});
  kubelet.set(moved);
  bool saw_move = false;
  for (int i = 0; i < 200 && !saw_move; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    auto m = http.get("/metrics");
    ASSERT_TRUE(m.ok());
    saw_move = m->body.find(R"(pod="resnet-1",namespace="ml",container="server"} 1048576)") != std::string::npos;
  }
  EXPECT_TRUE(saw_move);

  // The kubelet goes away: labels empty, up 0, errors counted; the exporter keeps serving.
  server.stop();
  bool saw_down = false;
  std::string body;
  for (int i = 0; i < 200 && !saw_down; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    auto m = http.get("/metrics");
    ASSERT_TRUE(m.ok());
    body = m->body;
    saw_down = body.find("gpuopt_exporter_pod_resources_up{Hostname=") != std::string::npos &&
               body.find(R"(container_id="",pod="",namespace="",container=""} 1048576)") != std::string::npos;
  }
  EXPECT_TRUE(saw_down) << body;
  EXPECT_NE(body.find("} 0\n# HELP gpuopt_exporter_pod_resources_errors_total"), std::string::npos) << body;
  EXPECT_EQ(body.find("gpuopt_gpu_pod_info{"), std::string::npos);
  (*e)->stop();
  ::unsetenv("GPUOPT_PROC_ROOT");
}

// On the GPU machine (scripts/gpu/deploy.sh, GPUOPT_POD_LABELS_REAL_GPU=1): the real NVML, a GPU
// process the script started, and the fake kubelet allocating GPU 0 to a pod: that process's
// series carry the pod.
TEST(PodResources, RealGpuProcessGetsPodLabels) {
  if (!std::getenv("GPUOPT_POD_LABELS_REAL_GPU"))
    GTEST_SKIP() << "skipped: no CUDA device (scripts/gpu/deploy.sh runs it on the GPU machine)";
  ::unsetenv("GPUOPT_NVML_LIBRARY");
  ::unsetenv("GPUOPT_FAKE_NVML_SCRIPT");
  FakeKubelet kubelet;
  FakeServer server(&kubelet);
  auto client = PodResourcesClient::connect(server.path, 0.5);
  ASSERT_TRUE(client.ok());
  std::shared_ptr<PodResourcesClient> c = std::move(*client);
  gpu::ExporterOptions o;
  o.listen = "127.0.0.1:0";
  o.interval_s = 0.5;
  o.pods = [c] { return c->list(); };
  auto e = gpu::Exporter::start(o);
  ASSERT_TRUE(e.ok()) << e.status().to_string();
  ASSERT_GT((*e)->gpu_count(), 0u) << (*e)->no_gpu_reason();
  net::HttpClient http("127.0.0.1", (*e)->port());
  auto r = http.get("/metrics");
  ASSERT_TRUE(r.ok());
  const std::string key = "gpuopt_gpu_lost{gpu=\"0\",UUID=\"";  // present for every GPU
  size_t at = r->body.find(key);
  ASSERT_NE(at, std::string::npos) << r->body;
  std::string uuid = r->body.substr(at + key.size(), r->body.find('"', at + key.size()) - at - key.size());
  v1::ListPodResourcesResponse answer;
  add_container(&answer, "gpu-check", "deploy", "bench", "nvidia.com/gpu", {uuid});
  kubelet.set(answer);
  std::string body;
  bool labelled = false;
  for (int i = 0; i < 120 && !labelled; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    auto m = http.get("/metrics");
    ASSERT_TRUE(m.ok());
    body = m->body;
    for (size_t p = body.find("gpuopt_process_gpu_memory_bytes{gpu=\"0\""); p != std::string::npos && !labelled;
         p = body.find("gpuopt_process_gpu_memory_bytes{gpu=\"0\"", p + 1))
      labelled = body.substr(p, body.find('\n', p) - p).find(R"(pod="gpu-check",namespace="deploy",container="bench")") !=
                 std::string::npos;
  }
  EXPECT_TRUE(labelled) << "no process series on GPU 0 (" << uuid << ") with the pod's labels:\n" << body;
  EXPECT_NE(body.find("gpuopt_gpu_pod_info{gpu=\"0\",UUID=\"" + uuid + "\""), std::string::npos);
  (*e)->stop();
}

}  // namespace
}  // namespace gpuopt::kube
