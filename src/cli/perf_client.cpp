// PerfClient over HTTP (net::HttpClient) and gRPC (the generated GRPCInferenceService stub),
// with shared-memory regions made, filled and registered per worker.
#include "cli/perf_client.h"

#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "grpc_service.grpc.pb.h"
#include "net/http.h"
#include "server/kserve.h"
#include "server/shared_memory.h"

namespace gpuopt::cli {
namespace {

using nlohmann::json;
namespace pb = inference;

// One region on the client side: POSIX shm (key) or a CUDA allocation (IPC handle).
struct Region {
  std::string name, key, raw_handle;
  bool cuda = false;
  size_t bytes = 0;
  void* ptr = nullptr;
  ~Region() {
    if (!ptr) return;
    if (cuda) {
      server::cuda_ipc::free_exportable(ptr, 0);
    } else {
      munmap(ptr, bytes);
      shm_unlink(key.c_str());
    }
  }
};

Result<std::unique_ptr<Region>> make_region(const std::string& name, size_t bytes, bool cuda) {
  auto r = std::make_unique<Region>();
  r->name = name;
  r->bytes = std::max<size_t>(bytes, 1);
  r->cuda = cuda;
  if (cuda) {
    GPUOPT_ASSIGN_OR_RETURN(r->ptr, server::cuda_ipc::alloc_exportable(r->bytes, 0, &r->raw_handle));
    return r;
  }
  r->key = "/" + name;
  int fd = shm_open(r->key.c_str(), O_CREAT | O_RDWR | O_TRUNC, 0600);
  if (fd < 0) return Status::Unavailable("shm_open '{}': {}", r->key, std::strerror(errno));
  if (ftruncate(fd, static_cast<off_t>(r->bytes)) != 0) {
    int e = errno;
    ::close(fd);
    shm_unlink(r->key.c_str());
    return Status::Unavailable("ftruncate '{}' to {} bytes: {}", r->key, r->bytes, std::strerror(e));
  }
  void* p = mmap(nullptr, r->bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  if (p == MAP_FAILED) {
    shm_unlink(r->key.c_str());
    return Status::Unavailable("mmap '{}': {}", r->key, std::strerror(errno));
  }
  r->ptr = p;
  return r;
}

Status write_region(Region& r, size_t offset, const std::string& bytes) {
  if (r.cuda) return server::cuda_ipc::copy_to_device(static_cast<char*>(r.ptr) + offset, bytes.data(), bytes.size(), 0);
  std::memcpy(static_cast<char*>(r.ptr) + offset, bytes.data(), bytes.size());
  return Status::Ok();
}

// Where each input and output lives when shared memory is used.
struct ShmLayout {
  std::unique_ptr<Region> in, out;
  std::vector<std::pair<size_t, size_t>> in_at;  // offset, bytes per input
  size_t out_each = 0;
};

// The transport-specific calls a client makes; the shared-memory set-up is common.
class Base : public PerfClient {
 public:
  Status setup(const PerfTransport& t, std::shared_ptr<const PerfRequest> req, int worker) {
    req_ = std::move(req);
    if (!req_) return Status::Ok();
    GPUOPT_ASSIGN_OR_RETURN(inputs_, server::decode_infer_request(
                                         req_->body, req_->binary ? std::optional<size_t>(req_->json_length) : std::nullopt));
    if (t.shared_memory == "none") return build_request(nullptr);
    const bool cuda = t.shared_memory == "cuda";
    std::string base = fmt::format("gpuopt_perf_{}_{}", getpid(), worker);
    std::vector<std::string> wire;
    size_t total = 0;
    for (const auto& in : inputs_.inputs) {
      wire.emplace_back();
      server::append_tensor_wire(&wire.back(), in.tensor);
      shm_.in_at.emplace_back(total, wire.back().size());
      total += (wire.back().size() + 63) / 64 * 64;
    }
    GPUOPT_ASSIGN_OR_RETURN(shm_.in, make_region(base + "_in", total, cuda));
    for (size_t i = 0; i < wire.size(); ++i) GPUOPT_RETURN_IF_ERROR(write_region(*shm_.in, shm_.in_at[i].first, wire[i]));
    shm_.out_each = t.output_shm_bytes;
    GPUOPT_ASSIGN_OR_RETURN(shm_.out, make_region(base + "_out", t.output_shm_bytes * req_->outputs.size(), cuda));
    for (Region* r : {shm_.in.get(), shm_.out.get()}) {
      Status s = cuda ? register_cuda(*r) : register_system(*r);
      if (!s.ok()) return s.with_context(fmt::format("registering shared memory region '{}'", r->name));
      registered_.push_back(r->name);
    }
    cuda_ = cuda;
    return build_request(&shm_);
  }

 protected:
  virtual Status build_request(const ShmLayout* shm) = 0;
  virtual Status register_system(const Region& r) = 0;
  virtual Status register_cuda(const Region& r) = 0;
  virtual void unregister(const std::string& name, bool cuda) = 0;
  void unregister_all() {
    for (const auto& n : registered_) unregister(n, cuda_);
    registered_.clear();
  }

  std::shared_ptr<const PerfRequest> req_;
  server::InferRequest inputs_;
  ShmLayout shm_;
  std::vector<std::string> registered_;
  bool cuda_ = false;
};

class HttpPerfClient final : public Base {
 public:
  HttpPerfClient(const PerfTransport& t) : c_(t.host, t.port) {}
  ~HttpPerfClient() override { unregister_all(); }

  Result<json> metadata(const std::string& model) override { return get("/v2/models/" + model); }
  Result<json> stats(const std::string& model) override { return get("/v2/models/" + model + "/stats"); }
  Status infer() override {
    auto r = c_.post(path_, body_, headers_, binary_ ? "application/octet-stream" : "application/json");
    if (!r.ok()) return r.status();
    if (r->status != 200) return Status::Unavailable("HTTP {}: {}", r->status, r->body);
    return Status::Ok();
  }

 protected:
  Status build_request(const ShmLayout* shm) override {
    path_ = "/v2/models/" + req_->model + "/infer";
    if (!shm) {
      body_ = req_->body;
      binary_ = req_->binary;
      if (binary_) headers_.emplace_back("Inference-Header-Content-Length", std::to_string(req_->json_length));
      return Status::Ok();
    }
    json ins = json::array(), outs = json::array();
    for (size_t i = 0; i < inputs_.inputs.size(); ++i) {
      const auto& t = inputs_.inputs[i].tensor;
      ins.push_back({{"name", inputs_.inputs[i].name},
                     {"datatype", std::string(dtype_kserve_name(t.dtype()))},
                     {"shape", t.shape()},
                     {"parameters",
                      {{"shared_memory_region", shm->in->name},
                       {"shared_memory_offset", shm->in_at[i].first},
                       {"shared_memory_byte_size", shm->in_at[i].second}}}});
    }
    for (size_t i = 0; i < req_->outputs.size(); ++i)
      outs.push_back({{"name", req_->outputs[i]},
                      {"parameters",
                       {{"shared_memory_region", shm->out->name},
                        {"shared_memory_offset", i * shm->out_each},
                        {"shared_memory_byte_size", shm->out_each}}}});
    body_ = json{{"inputs", ins}, {"outputs", outs}}.dump();
    binary_ = false;
    return Status::Ok();
  }
  Status register_system(const Region& r) override {
    return post("/v2/systemsharedmemory/region/" + r.name + "/register",
                json{{"key", r.key}, {"offset", 0}, {"byte_size", r.bytes}});
  }
  Status register_cuda(const Region& r) override {
    static const char* k = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string b64;
    const auto& s = r.raw_handle;
    for (size_t i = 0; i < s.size(); i += 3) {
      uint32_t v = static_cast<uint8_t>(s[i]) << 16;
      if (i + 1 < s.size()) v |= static_cast<uint8_t>(s[i + 1]) << 8;
      if (i + 2 < s.size()) v |= static_cast<uint8_t>(s[i + 2]);
      b64 += k[(v >> 18) & 63];
      b64 += k[(v >> 12) & 63];
      b64 += i + 1 < s.size() ? k[(v >> 6) & 63] : '=';
      b64 += i + 2 < s.size() ? k[v & 63] : '=';
    }
    return post("/v2/cudasharedmemory/region/" + r.name + "/register",
                json{{"raw_handle", {{"b64", b64}}}, {"device_id", 0}, {"byte_size", r.bytes}});
  }
  void unregister(const std::string& name, bool cuda) override {
    (void)post(std::string(cuda ? "/v2/cudasharedmemory" : "/v2/systemsharedmemory") + "/region/" + name + "/unregister",
               json::object());
  }

 private:
  Result<json> get(const std::string& path) {
    GPUOPT_ASSIGN_OR_RETURN(auto r, c_.get(path));
    if (r.status != 200) return Status::Unavailable("GET {}: HTTP {} {}", path, r.status, r.body);
    json j = json::parse(r.body, nullptr, false);
    if (j.is_discarded()) return Status::Internal("GET {}: not JSON", path);
    return j;
  }
  Status post(const std::string& path, const json& body) {
    auto r = c_.post(path, body.dump());
    if (!r.ok()) return r.status();
    if (r->status != 200) return Status::Unavailable("POST {}: HTTP {} {}", path, r->status, r->body);
    return Status::Ok();
  }

  net::HttpClient c_;
  std::string path_, body_;
  net::Headers headers_;
  bool binary_ = true;
};

class GrpcPerfClient final : public Base {
 public:
  explicit GrpcPerfClient(const PerfTransport& t) {
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(-1);
    args.SetMaxSendMessageSize(-1);
    // A channel of its own per worker: separate connections, as perf_analyzer's workers have.
    args.SetInt("gpuopt.worker", next_channel_id());
    stub_ = pb::GRPCInferenceService::NewStub(
        grpc::CreateCustomChannel(t.host + ":" + std::to_string(t.port), grpc::InsecureChannelCredentials(), args));
  }
  ~GrpcPerfClient() override { unregister_all(); }

  Result<json> metadata(const std::string& model) override {
    pb::ModelMetadataRequest q;
    q.set_name(model);
    pb::ModelMetadataResponse r;
    GPUOPT_RETURN_IF_ERROR(call([&](grpc::ClientContext* c) { return stub_->ModelMetadata(c, q, &r); }, "ModelMetadata"));
    auto io = [](const auto& v) {
      json a = json::array();
      for (const auto& t : v)
        a.push_back({{"name", t.name()}, {"datatype", t.datatype()}, {"shape", Shape(t.shape().begin(), t.shape().end())}});
      return a;
    };
    return json{{"name", r.name()}, {"inputs", io(r.inputs())}, {"outputs", io(r.outputs())}};
  }
  Result<json> stats(const std::string& model) override {
    pb::ModelStatisticsRequest q;
    q.set_name(model);
    pb::ModelStatisticsResponse r;
    GPUOPT_RETURN_IF_ERROR(call([&](grpc::ClientContext* c) { return stub_->ModelStatistics(c, q, &r); }, "ModelStatistics"));
    json a = json::array();
    for (const auto& m : r.model_stats()) {
      const auto& s = m.inference_stats();
      auto d = [](const pb::StatisticDuration& x) { return json{{"count", x.count()}, {"ns", x.ns()}}; };
      a.push_back({{"name", m.name()},
                   {"version", m.version()},
                   {"inference_stats",
                    {{"success", d(s.success())}, {"fail", d(s.fail())}, {"queue", d(s.queue())},
                     {"compute_input", d(s.compute_input())}, {"compute_infer", d(s.compute_infer())},
                     {"compute_output", d(s.compute_output())}}}});
    }
    return json{{"model_stats", a}};
  }
  Status infer() override {
    pb::ModelInferResponse r;
    return call([&](grpc::ClientContext* c) { return stub_->ModelInfer(c, request_, &r); }, "ModelInfer");
  }

 protected:
  Status build_request(const ShmLayout* shm) override {
    request_.set_model_name(req_->model);
    for (size_t i = 0; i < inputs_.inputs.size(); ++i) {
      const auto& in = inputs_.inputs[i];
      auto* t = request_.add_inputs();
      t->set_name(in.name);
      t->set_datatype(std::string(dtype_kserve_name(in.tensor.dtype())));
      for (int64_t d : in.tensor.shape()) t->add_shape(d);
      if (shm) {
        auto& p = *t->mutable_parameters();
        p["shared_memory_region"].set_string_param(shm->in->name);
        p["shared_memory_offset"].set_int64_param(static_cast<int64_t>(shm->in_at[i].first));
        p["shared_memory_byte_size"].set_int64_param(static_cast<int64_t>(shm->in_at[i].second));
      } else {
        server::append_tensor_wire(request_.add_raw_input_contents(), in.tensor);
      }
    }
    if (shm)
      for (size_t i = 0; i < req_->outputs.size(); ++i) {
        auto* o = request_.add_outputs();
        o->set_name(req_->outputs[i]);
        auto& p = *o->mutable_parameters();
        p["shared_memory_region"].set_string_param(shm->out->name);
        p["shared_memory_offset"].set_int64_param(static_cast<int64_t>(i * shm->out_each));
        p["shared_memory_byte_size"].set_int64_param(static_cast<int64_t>(shm->out_each));
      }
    return Status::Ok();
  }
  Status register_system(const Region& r) override {
    pb::SystemSharedMemoryRegisterRequest q;
    q.set_name(r.name);
    q.set_key(r.key);
    q.set_byte_size(r.bytes);
    pb::SystemSharedMemoryRegisterResponse resp;
    return call([&](grpc::ClientContext* c) { return stub_->SystemSharedMemoryRegister(c, q, &resp); }, "register");
  }
  Status register_cuda(const Region& r) override {
    pb::CudaSharedMemoryRegisterRequest q;
    q.set_name(r.name);
    q.set_raw_handle(r.raw_handle);
    q.set_device_id(0);
    q.set_byte_size(r.bytes);
    pb::CudaSharedMemoryRegisterResponse resp;
    return call([&](grpc::ClientContext* c) { return stub_->CudaSharedMemoryRegister(c, q, &resp); }, "register");
  }
  void unregister(const std::string& name, bool cuda) override {
    if (cuda) {
      pb::CudaSharedMemoryUnregisterRequest q;
      q.set_name(name);
      pb::CudaSharedMemoryUnregisterResponse r;
      (void)call([&](grpc::ClientContext* c) { return stub_->CudaSharedMemoryUnregister(c, q, &r); }, "unregister");
    } else {
      pb::SystemSharedMemoryUnregisterRequest q;
      q.set_name(name);
      pb::SystemSharedMemoryUnregisterResponse r;
      (void)call([&](grpc::ClientContext* c) { return stub_->SystemSharedMemoryUnregister(c, q, &r); }, "unregister");
    }
  }

 private:
  static int next_channel_id() {
    static std::atomic<int> n{0};
    return n++;
  }
  template <typename F>
  Status call(F&& f, const char* what) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    grpc::Status s = f(&ctx);
    if (s.ok()) return Status::Ok();
    return Status::Unavailable("gRPC {}: {} ({})", what, s.error_message(), static_cast<int>(s.error_code()));
  }

  std::unique_ptr<pb::GRPCInferenceService::Stub> stub_;
  pb::ModelInferRequest request_;
};

}  // namespace

Result<std::unique_ptr<PerfClient>> make_perf_client(const PerfTransport& t, std::shared_ptr<const PerfRequest> request,
                                                     int worker_id) {
  if (t.protocol == "grpc") {
    auto c = std::make_unique<GrpcPerfClient>(t);
    GPUOPT_RETURN_IF_ERROR(c->setup(t, std::move(request), worker_id));
    return std::unique_ptr<PerfClient>(std::move(c));
  }
  auto c = std::make_unique<HttpPerfClient>(t);
  GPUOPT_RETURN_IF_ERROR(c->setup(t, std::move(request), worker_id));
  return std::unique_ptr<PerfClient>(std::move(c));
}

}  // namespace gpuopt::cli
