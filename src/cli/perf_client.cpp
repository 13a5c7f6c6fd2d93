// PerfClient over HTTP (net::HttpClient) and gRPC (the generated GRPCInferenceService stub),
// with shared-memory regions made, filled and registered per worker.
#include "cli/perf_client.h"

#include <fcntl.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/impl/client_unary_call.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string_view>

#include "grpc_service.grpc.pb.h"
#include "cli/perf_shm_region.h"
#include "net/http.h"
#include "server/kserve.h"
#include "server/shared_memory.h"

namespace gpuopt::cli {
namespace {

using nlohmann::json;
namespace pb = inference;

// Where each input and output lives when shared memory is used: every request's inputs side
// by side in one region, one output slot per model output (one request in flight per worker).
struct ShmLayout {
  std::unique_ptr<Region> in, out;
  std::vector<std::vector<std::pair<size_t, size_t>>> in_at;  // per request, per input: offset, bytes
  size_t out_each = 0;
};

// The transport-specific calls a client makes; the shared-memory set-up is common.
class Base : public PerfClient {
 public:
  Status setup(const PerfTransport& t, std::shared_ptr<const PerfWorkload> work, int worker) {
    work_ = std::move(work);
    if (!work_) return Status::Ok();
    for (const auto& r : work_->requests) {
      GPUOPT_ASSIGN_OR_RETURN(server::InferRequest ir,
                              server::decode_infer_request(
                                  r.body, work_->binary ? std::optional<size_t>(r.header_length) : std::nullopt));
      inputs_.push_back(std::move(ir));
    }
    if (t.shared_memory == "none") return build_requests(nullptr);
    const bool cuda = t.shared_memory == "cuda";
    std::string base = fmt::format("gpuopt_perf_{}_{}", getpid(), worker);
    std::vector<std::pair<size_t, std::string>> wire;  // offset, bytes
    size_t total = 0;
    for (const auto& req : inputs_) {
      shm_.in_at.emplace_back();
      for (const auto& in : req.inputs) {
        wire.emplace_back(total, std::string());
        server::append_tensor_wire(&wire.back().second, in.tensor);
        shm_.in_at.back().emplace_back(total, wire.back().second.size());
        total += (wire.back().second.size() + 63) / 64 * 64;
      }
    }
    GPUOPT_ASSIGN_OR_RETURN(shm_.in, make_region(base + "_in", total, cuda));
    for (const auto& [at, bytes] : wire) GPUOPT_RETURN_IF_ERROR(write_region(*shm_.in, at, bytes));
    shm_.out_each = t.output_shm_bytes;
    GPUOPT_ASSIGN_OR_RETURN(shm_.out, make_region(base + "_out", t.output_shm_bytes * work_->outputs.size(), cuda));
    for (Region* r : {shm_.in.get(), shm_.out.get()}) {
      Status s = cuda ? register_cuda(*r) : register_system(*r);
      if (!s.ok()) return s.with_context(fmt::format("registering shared memory region '{}'", r->name));
      registered_.push_back(r->name);
    }
    cuda_ = cuda;
    return build_requests(&shm_);
  }

 protected:
  // Prepares what infer(k) sends for each request k of the workload.
  virtual Status build_requests(const ShmLayout* shm) = 0;
  virtual Status register_system(const Region& r) = 0;
  virtual Status register_cuda(const Region& r) = 0;
  virtual void unregister(const std::string& name, bool cuda) = 0;
  void unregister_all() {
    for (const auto& n : registered_) unregister(n, cuda_);
    registered_.clear();
  }

  // An output of an answer: its bytes from the response, or (`in_shm`) from its slot in the
  // output region, `bytes` long.
  Status add_output(std::vector<std::pair<std::string, Tensor>>* outs, const std::string& name,
                    const std::string& datatype, const Shape& shape, std::string_view data, bool in_shm,
                    uint64_t bytes) {
    auto dt = dtype_from_kserve(datatype);
    if (!dt) return Status::Unimplemented("output '{}': datatype {}", name, datatype);
    GPUOPT_ASSIGN_OR_RETURN(Tensor t, Tensor::try_empty(*dt, shape, name));
    std::string copy;
    if (in_shm) {
      size_t slot = work_->outputs.size();
      for (size_t i = 0; i < work_->outputs.size(); ++i)
        if (work_->outputs[i] == name) slot = i;
      if (slot == work_->outputs.size() || bytes > shm_.out_each)
        return Status::Internal("output '{}': {} bytes in shared memory, not in its {}-byte slot", name, bytes,
                                shm_.out_each);
      copy.resize(bytes);
      const char* src = static_cast<const char*>(shm_.out->ptr) + slot * shm_.out_each;
      if (cuda_)
        GPUOPT_RETURN_IF_ERROR(server::cuda_ipc::copy_to_host(copy.data(), src, bytes, 0));
      else
        std::memcpy(copy.data(), src, bytes);
      data = copy;
    }
    GPUOPT_RETURN_IF_ERROR(server::tensor_from_wire(&t, data, name));
    outs->emplace_back(name, std::move(t));
    return Status::Ok();
  }

  std::shared_ptr<const PerfWorkload> work_;
  std::vector<server::InferRequest> inputs_;  // per request
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
  Status infer(size_t index, std::vector<std::pair<std::string, Tensor>>* outputs) override {
    const Prepared& p = prepared_.at(index);
    auto r = c_.post(path_, p.body, p.headers, p.binary ? "application/octet-stream" : "application/json");
    if (!r.ok()) return r.status();
    if (r->status != 200) return Status::Unavailable("HTTP {}: {}", r->status, r->body);
    if (!outputs) return Status::Ok();
    outputs->clear();
    if (!shm_.out) {
      const std::string_view hl = r->header("Inference-Header-Content-Length");
      std::optional<size_t> hlen;
      if (!hl.empty()) hlen = static_cast<size_t>(std::strtoull(std::string(hl).c_str(), nullptr, 10));
      GPUOPT_ASSIGN_OR_RETURN(*outputs, server::decode_infer_response(r->body, hlen));
      return Status::Ok();
    }
    // Outputs in shared memory: the JSON answer gives their datatype, shape and byte size.
    json j = json::parse(r->body, nullptr, false);
    if (j.is_discarded() || !j.contains("outputs") || !j["outputs"].is_array())
      return Status::Internal("the answer has no outputs array: {}", r->body.substr(0, 200));
    for (const auto& o : j["outputs"]) {
      if (!o.contains("parameters") || !o["parameters"].contains("shared_memory_byte_size"))
        return Status::Internal("output {}: not in shared memory", o.value("name", "?"));
      GPUOPT_RETURN_IF_ERROR(add_output(outputs, o.value("name", ""), o.value("datatype", ""), o.value("shape", Shape{}),
                                        {}, true, o["parameters"]["shared_memory_byte_size"].get<uint64_t>()));
    }
    return Status::Ok();
  }

 protected:
  Status build_requests(const ShmLayout* shm) override {
    path_ = "/v2/models/" + work_->model + "/infer";
    for (size_t k = 0; k < work_->requests.size(); ++k) {
      Prepared& p = prepared_.emplace_back();
      if (!shm) {
        p.body = work_->requests[k].body;
        p.binary = work_->binary;
        if (p.binary)
          p.headers.emplace_back("Inference-Header-Content-Length", std::to_string(work_->requests[k].header_length));
        continue;
      }
      json ins = json::array(), outs = json::array();
      for (size_t i = 0; i < inputs_[k].inputs.size(); ++i) {
        const auto& t = inputs_[k].inputs[i].tensor;
        ins.push_back({{"name", inputs_[k].inputs[i].name},
                       {"datatype", std::string(dtype_kserve_name(t.dtype()))},
                       {"shape", t.shape()},
                       {"parameters",
                        {{"shared_memory_region", shm->in->name},
                         {"shared_memory_offset", shm->in_at[k][i].first},
                         {"shared_memory_byte_size", shm->in_at[k][i].second}}}});
      }
      for (size_t i = 0; i < work_->outputs.size(); ++i)
        outs.push_back({{"name", work_->outputs[i]},
                        {"parameters",
                         {{"shared_memory_region", shm->out->name},
                          {"shared_memory_offset", i * shm->out_each},
                          {"shared_memory_byte_size", shm->out_each}}}});
      p.body = json{{"inputs", ins}, {"outputs", outs}}.dump();
      p.binary = false;
    }
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

  struct Prepared {
    std::string body;
    net::Headers headers;
    bool binary = true;
  };
  net::HttpClient c_;
  std::string path_;
  std::vector<Prepared> prepared_;  // per request of the workload
};

class GrpcPerfClient final : public Base {
 public:
  explicit GrpcPerfClient(const PerfTransport& t) {
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(-1);
    args.SetMaxSendMessageSize(-1);
    // A channel of its own per worker: separate connections, as perf_analyzer's workers have.
    args.SetInt("gpuopt.worker", next_channel_id());
    channel_ = grpc::CreateCustomChannel(t.host + ":" + std::to_string(t.port), grpc::InsecureChannelCredentials(), args);
    stub_ = pb::GRPCInferenceService::NewStub(channel_);
    infer_method_.emplace("/inference.GRPCInferenceService/ModelInfer", grpc::internal::RpcMethod::NORMAL_RPC, channel_);
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
  Status infer(size_t index, std::vector<std::pair<std::string, Tensor>>* outputs) override {
    pb::ModelInferResponse r;
    // The request was serialized once (build_requests): each call sends those bytes by reference.
    const grpc::ByteBuffer& q = requests_.at(index);
    if (!outputs) {
      // Outputs not wanted (no validation data): the answer stays grpc's received slices, not
      // parsed into a message, which copies every output byte (393 KB a call for BERT-base's
      // hidden state; the -a client already keeps its answers as bytes).
      grpc::ByteBuffer answer;
      return call(
          [&](grpc::ClientContext* c) {
            return grpc::internal::BlockingUnaryCall<grpc::ByteBuffer, grpc::ByteBuffer, grpc::ByteBuffer,
                                                     grpc::ByteBuffer>(channel_.get(), *infer_method_, c, q, &answer);
          },
          "ModelInfer", /*wait_for_ready=*/true);
    }
    GPUOPT_RETURN_IF_ERROR(call(
        [&](grpc::ClientContext* c) {
          return grpc::internal::BlockingUnaryCall<grpc::ByteBuffer, pb::ModelInferResponse, grpc::ByteBuffer,
                                                   grpc::protobuf::MessageLite>(channel_.get(), *infer_method_, c, q, &r);
        },
        "ModelInfer", /*wait_for_ready=*/true));
    return outputs ? decode(r, outputs) : Status::Ok();
  }
  Status run_async(int inflight, const std::function<size_t()>& next_index, const std::atomic<bool>& stop, bool want,
                   const AsyncDone& done) override;

 private:
  Status decode(const pb::ModelInferResponse& r, std::vector<std::pair<std::string, Tensor>>* outputs) {
    outputs->clear();
    for (int i = 0; i < r.outputs_size(); ++i) {
      const auto& o = r.outputs(i);
      auto bs = o.parameters().find("shared_memory_byte_size");
      const bool in_shm = bs != o.parameters().end();
      if (!in_shm && i >= r.raw_output_contents_size())
        return Status::Internal("output '{}': no raw_output_contents entry", o.name());
      GPUOPT_RETURN_IF_ERROR(add_output(outputs, o.name(), o.datatype(), Shape(o.shape().begin(), o.shape().end()),
                                        in_shm ? std::string_view() : std::string_view(r.raw_output_contents(i)), in_shm,
                                        in_shm ? static_cast<uint64_t>(bs->second.int64_param()) : 0));
    }
    return Status::Ok();
  }

 protected:
  Status build_requests(const ShmLayout* shm) override {
    for (size_t k = 0; k < inputs_.size(); ++k) {
      pb::ModelInferRequest q;
      GPUOPT_RETURN_IF_ERROR(build_request(shm, k, &q));
      grpc::Slice bytes(q.SerializeAsString());
      requests_.emplace_back(&bytes, 1);
    }
    return Status::Ok();
  }
  Status build_request(const ShmLayout* shm, size_t k, pb::ModelInferRequest* q) {
    q->set_model_name(work_->model);
    for (size_t i = 0; i < inputs_[k].inputs.size(); ++i) {
      const auto& in = inputs_[k].inputs[i];
      auto* t = q->add_inputs();
      t->set_name(in.name);
      t->set_datatype(std::string(dtype_kserve_name(in.tensor.dtype())));
      for (int64_t d : in.tensor.shape()) t->add_shape(d);
      if (shm) {
        auto& p = *t->mutable_parameters();
        p["shared_memory_region"].set_string_param(shm->in->name);
        p["shared_memory_offset"].set_int64_param(static_cast<int64_t>(shm->in_at[k][i].first));
        p["shared_memory_byte_size"].set_int64_param(static_cast<int64_t>(shm->in_at[k][i].second));
      } else {
        server::append_tensor_wire(q->add_raw_input_contents(), in.tensor);
      }
    }
    if (shm)
      for (size_t i = 0; i < work_->outputs.size(); ++i) {
        auto* o = q->add_outputs();
        o->set_name(work_->outputs[i]);
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
  // wait_for_ready: a call that finds the channel in TRANSIENT_FAILURE (a connection reset under
  // load) waits, up to the deadline, for it to reconnect instead of failing at once. Used for the
  // inference calls, made after metadata() found the server up; the first call fails fast, so a
  // server that is not there is reported at once.
  template <typename F>
  Status call(F&& f, const char* what, bool wait_for_ready = false) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    ctx.set_wait_for_ready(wait_for_ready);
    grpc::Status s = f(&ctx);
    if (s.ok()) return Status::Ok();
    return Status::Unavailable("gRPC {}: {} ({})", what, s.error_message(), static_cast<int>(s.error_code()));
  }

  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<pb::GRPCInferenceService::Stub> stub_;
  std::optional<grpc::internal::RpcMethod> infer_method_;  // made once channel_ is
  std::vector<grpc::ByteBuffer> requests_;  // per request of the workload, serialized
};


// One asynchronous call: its context, the answer's bytes and status, and when it started.
struct AsyncCall {
  grpc::ClientContext ctx;
  grpc::ByteBuffer answer;
  grpc::Status status;
  std::unique_ptr<grpc::GenericClientAsyncResponseReader> reader;
  size_t index = 0;
  std::chrono::steady_clock::time_point start;
};

Status GrpcPerfClient::run_async(int inflight, const std::function<size_t()>& next_index, const std::atomic<bool>& stop,
                                 bool want, const AsyncDone& done) {
  if (!registered_.empty()) return Status::InvalidArgument("-a with shared memory: every call would share one output slot");
  grpc::CompletionQueue cq;
  grpc::GenericStub stub(channel_);
  int live = 0;
  auto launch = [&] {
    auto* c = new AsyncCall;
    c->index = next_index();
    c->ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    c->ctx.set_wait_for_ready(true);
    c->start = std::chrono::steady_clock::now();
    c->reader = stub.PrepareUnaryCall(&c->ctx, "/inference.GRPCInferenceService/ModelInfer", requests_.at(c->index), &cq);
    c->reader->StartCall();
    c->reader->Finish(&c->answer, &c->status, c);
    ++live;
  };
  for (int i = 0; i < inflight; ++i) launch();
  std::vector<std::pair<std::string, Tensor>> outs;
  void* tag = nullptr;
  bool ok = false;
  while (live > 0 && cq.Next(&tag, &ok)) {
    std::unique_ptr<AsyncCall> c(static_cast<AsyncCall*>(tag));
    --live;
    const auto ns = static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - c->start).count());
    Status s = !ok               ? Status::Unavailable("gRPC ModelInfer: the call did not complete")
               : c->status.ok() ? Status::Ok()
                                : Status::Unavailable("gRPC ModelInfer: {} ({})", c->status.error_message(),
                                                      static_cast<int>(c->status.error_code()));
    outs.clear();
    if (s.ok() && want) {
      pb::ModelInferResponse r;
      grpc::Status ps = grpc::GenericDeserialize<grpc::ProtoBufferReader, pb::ModelInferResponse>(&c->answer, &r);
      s = ps.ok() ? decode(r, &outs) : Status::Internal("gRPC ModelInfer: undecodable answer: {}", ps.error_message());
    }
    done(c->index, ns, std::move(s), outs);
    if (!stop.load()) launch();
  }
  cq.Shutdown();
  while (cq.Next(&tag, &ok)) delete static_cast<AsyncCall*>(tag);
  return Status::Ok();
}

}  // namespace

Result<std::unique_ptr<PerfClient>> make_perf_client(const PerfTransport& t, std::shared_ptr<const PerfWorkload> work,
                                                     int worker_id) {
  if (t.protocol == "grpc") {
    auto c = std::make_unique<GrpcPerfClient>(t);
    GPUOPT_RETURN_IF_ERROR(c->setup(t, std::move(work), worker_id));
    return std::unique_ptr<PerfClient>(std::move(c));
  }
  auto c = std::make_unique<HttpPerfClient>(t);
  GPUOPT_RETURN_IF_ERROR(c->setup(t, std::move(work), worker_id));
  return std::unique_ptr<PerfClient>(std::move(c));
}

}  // namespace gpuopt::cli
