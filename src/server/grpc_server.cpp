// GRPCInferenceService on grpc++'s asynchronous API, one completion queue per thread polled by
// threads of ours (grpc_async.h), every method on raw bytes. ModelInfer: the request parsed from
// grpc's received slices, the response written as slices over the output tensors (grpc_codec.h).
// ModelStreamInfer keeps reading while earlier requests run and writes each response as it is
// ready (one write at a time). The other RPCs answer at once on the queue's thread, or (model
// load/unload) from the thread that finishes the work.
#include "server/grpc_server.h"

#include <google/protobuf/util/json_util.h>
#include <absl/synchronization/mutex.h>
#include <grpc/support/log.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/support/proto_buffer_reader.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "core/log.h"
#include "core/nvtx.h"
#include "gpuopt/build_info.h"
#include "grpc_service.grpc.pb.h"
#include "server/grpc_codec.h"
#include "server/grpc_guard.h"
#include "server/grpc_async.h"
#include "server/inference_server.h"

namespace gpuopt::server {
namespace {

namespace pb = inference;

// grpc's own log lines (a failed bind prints a nested error tree) go to gpuopt's log at debug
// level; the user sees the one-line Status the server returns.
void grpc_log(gpr_log_func_args* a) { GPUOPT_LOG(debug, "grpc: {}:{}: {}", a->file, a->line, a->message); }

// The methods of GRPCInferenceService in the proto's order (the generated code's indices).
constexpr const char* kMethods[] = {
    "ServerLive", "ServerReady", "ModelReady", "ServerMetadata", "ModelMetadata", "ModelInfer", "ModelStreamInfer",
    "ModelConfig", "ModelStatistics", "RepositoryIndex", "RepositoryModelLoad", "RepositoryModelUnload",
    "SystemSharedMemoryStatus", "SystemSharedMemoryRegister", "SystemSharedMemoryUnregister",
    "CudaSharedMemoryStatus", "CudaSharedMemoryRegister", "CudaSharedMemoryUnregister", "TraceSetting", "LogSettings"};
constexpr int kModelInfer = 5, kModelStreamInfer = 6, kMethodCount = 20;

// A unary method's request parsed from its bytes, the handler's answer serialized: a message that
// does not parse is INVALID_ARGUMENT naming the method. `f(const Req*, Resp*, done)` answers
// through done(Status), at once or later from any thread.
template <class Req, class Resp, class F>
void unary(int method, grpc::ByteBuffer& in, RawFinish finish, F&& f) {
  Req req;
  bool parsed = false;
  {
    grpc::ProtoBufferReader reader(&in);
    parsed = req.ParseFromZeroCopyStream(&reader);
  }
  if (!parsed)
    return finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                               fmt::format("the request is not a valid protobuf message for "
                                           "/inference.GRPCInferenceService/{} (truncated, a wrong wire type, or a "
                                           "string field that is not UTF-8)",
                                           kMethods[method])),
                  grpc::ByteBuffer());
  auto resp = std::make_shared<Resp>();
  f(&req, resp.get(), [finish = std::move(finish), resp](const Status& s) {
    if (!s.ok()) return finish(to_grpc_status(s), grpc::ByteBuffer());
    grpc::ByteBuffer out;
    bool own = false;
    grpc::SerializationTraits<Resp>::Serialize(*resp, &out, &own);
    finish(grpc::Status::OK, std::move(out));
  });
}

// Triton's JSON forms (config, statistics, index) into their proto messages: the field names are
// the proto's, so protobuf's JSON parser maps them; fields without a proto counterpart are skipped.
Status json_to_proto(const nlohmann::json& j, google::protobuf::Message* m) {
  google::protobuf::util::JsonParseOptions o;
  o.ignore_unknown_fields = true;
  auto st = google::protobuf::util::JsonStringToMessage(json_text(j), m, o);
  if (!st.ok()) return Status::Internal("JSON to {}: {}", m->GetTypeName(), st.ToString());
  return Status::Ok();
}

void add_io(const std::vector<TensorConfig>& v, int64_t max_batch,
            google::protobuf::RepeatedPtrField<pb::ModelMetadataResponse::TensorMetadata>* out) {
  for (const auto& t : v) {
    auto* m = out->Add();
    m->set_name(t.name);
    m->set_datatype(std::string(dtype_kserve_name(t.dtype)));
    if (max_batch > 0) m->add_shape(-1);
    for (int64_t d : t.dims) m->add_shape(d);
  }
}

}  // namespace

// Every method asynchronous and raw, so that no thread of grpc's own (the callback API's) polls
// the connections: ModelInfer's request is parsed from grpc's slices and its response written
// without a staging copy; a ModelStreamInfer request that is not a valid message is answered in
// the stream (error_message) and the stream goes on; the others parse and serialize their
// messages in unary() above.
using G = pb::GRPCInferenceService;
using ServiceBase =
        G::WithRawMethod_ServerLive<
        G::WithRawMethod_ServerReady<
        G::WithRawMethod_ModelReady<
        G::WithRawMethod_ServerMetadata<
        G::WithRawMethod_ModelMetadata<
        G::WithRawMethod_ModelInfer<
        G::WithRawMethod_ModelStreamInfer<
        G::WithRawMethod_ModelConfig<
        G::WithRawMethod_ModelStatistics<
        G::WithRawMethod_RepositoryIndex<
        G::WithRawMethod_RepositoryModelLoad<
        G::WithRawMethod_RepositoryModelUnload<
        G::WithRawMethod_SystemSharedMemoryStatus<
        G::WithRawMethod_SystemSharedMemoryRegister<
        G::WithRawMethod_SystemSharedMemoryUnregister<
        G::WithRawMethod_CudaSharedMemoryStatus<
        G::WithRawMethod_CudaSharedMemoryRegister<
        G::WithRawMethod_CudaSharedMemoryUnregister<
        G::WithRawMethod_TraceSetting<
        G::WithRawMethod_LogSettings<pb::GRPCInferenceService::Service>>>>>>>>>>>>>>>>>>>>;

class Service final : public ServiceBase, public InferHost {
 public:
  explicit Service(InferenceServer* s) : s_(s) {}
  void request_infer(grpc::ServerContext* ctx, grpc::ByteBuffer* request, RawResponder* responder,
                     grpc::ServerCompletionQueue* cq, void* tag) override {
    RequestModelInfer(ctx, request, responder, cq, cq, tag);
  }
  void request_stream(grpc::ServerContext* ctx, RawStream* stream, grpc::ServerCompletionQueue* cq,
                      void* tag) override {
    RequestModelStreamInfer(ctx, stream, cq, cq, tag);
  }
  bool tracing() const override { return s_->tracing(); }
  void request_unary(int method, grpc::ServerContext* ctx, grpc::ByteBuffer* request, RawResponder* responder,
                     grpc::ServerCompletionQueue* cq, void* tag) override {
    RequestAsyncUnary(method, ctx, request, responder, cq, cq, tag);
  }
  // The methods other than ModelInfer and ModelStreamInfer, on the queue's thread.
  void handle_unary(int m, grpc::ByteBuffer& in, RawFinish fin) override {
    switch (m) {
      case 0:
        return call(m, in, std::move(fin), &Service::server_live);
      case 1:
        return call(m, in, std::move(fin), &Service::server_ready);
      case 2:
        return call(m, in, std::move(fin), &Service::model_ready);
      case 3:
        return call(m, in, std::move(fin), &Service::server_metadata);
      case 4:
        return call(m, in, std::move(fin), &Service::model_metadata);
      case 7:
        return call(m, in, std::move(fin), &Service::model_config);
      case 8:
        return call(m, in, std::move(fin), &Service::model_statistics);
      case 9:
        return call(m, in, std::move(fin), &Service::repository_index);
      case 10:
        return unary<pb::RepositoryModelLoadRequest, pb::RepositoryModelLoadResponse>(
            m, in, std::move(fin), [this](auto* q, auto*, auto done) { repository_model_load(q, std::move(done)); });
      case 11:
        return unary<pb::RepositoryModelUnloadRequest, pb::RepositoryModelUnloadResponse>(
            m, in, std::move(fin),
            [this](auto* q, auto*, auto done) { control(q->model_name(), false, std::move(done)); });
      case 12:
        return call(m, in, std::move(fin), &Service::system_shared_memory_status);
      case 13:
        return call(m, in, std::move(fin), &Service::system_shared_memory_register);
      case 14:
        return call(m, in, std::move(fin), &Service::system_shared_memory_unregister);
      case 15:
        return call(m, in, std::move(fin), &Service::cuda_shared_memory_status);
      case 16:
        return call(m, in, std::move(fin), &Service::cuda_shared_memory_register);
      case 17:
        return call(m, in, std::move(fin), &Service::cuda_shared_memory_unregister);
      case 18:
        return unary<pb::TraceSettingRequest, pb::TraceSettingResponse>(
            m, in, std::move(fin),
            [](auto*, auto*, auto done) { done(Status::Unimplemented("TraceSetting is not supported")); });
      case 19:
        return unary<pb::LogSettingsRequest, pb::LogSettingsResponse>(
            m, in, std::move(fin),
            [](auto*, auto*, auto done) { done(Status::Unimplemented("LogSettings is not supported")); });
      default:
        fin(grpc::Status(grpc::StatusCode::UNIMPLEMENTED, ""), grpc::ByteBuffer());
    }
  }
  // A method that answers at once.
  template <class Req, class Resp>
  void call(int m, grpc::ByteBuffer& in, RawFinish fin, Status (Service::*f)(const Req*, Resp*)) {
    unary<Req, Resp>(m, in, std::move(fin), [this, f](const Req* q, Resp* r, auto done) { done((this->*f)(q, r)); });
  }
  std::vector<int> unary_methods() const override {
    std::vector<int> v;
    for (int m = 0; m < kMethodCount; ++m)
      if (m != kModelInfer && m != kModelStreamInfer) v.push_back(m);
    return v;
  }

  // Decodes, then hands the request to the shared inference path; `done` is called exactly once.
  // The message is given up: its raw_input_contents move into the input tensors (no copy).
  void infer(pb::ModelInferRequest& req, InferDone done, std::shared_ptr<WireTimes> wire) override {
    const uint64_t t_start = now_ns();
    if (s_->shutting_down()) return done(Status::Unavailable("server is shutting down"));
    auto v = s_->repository().find(req.model_name(), req.model_version());
    if (!v.ok()) return done(v.status());
    std::optional<NvtxRange> decode_range(std::in_place, "serve decode");
    auto decoded = decode_grpc_request(&req, s_->request_limits());
    decode_range.reset();
    if (!decoded.ok()) {
      (*v)->stats->record_request(false, now_ns() - t_start, 0, 0, 0, 0, 0,
                                  decoded.status().code() == StatusCode::kUnavailable ? FailReason::kRejected
                                                                                      : FailReason::kOther);
      return done(decoded.status());
    }
    s_->submit_infer(std::move(v).value(), std::move(decoded).value(), t_start, std::move(done), std::move(wire));
  }

  Status server_live(const pb::ServerLiveRequest* /*req*/, pb::ServerLiveResponse* resp) {
    resp->set_live(s_->live());
    return Status::Ok();
  }
  Status server_ready(const pb::ServerReadyRequest* /*req*/, pb::ServerReadyResponse* resp) {
    resp->set_ready(s_->ready());
    return Status::Ok();
  }
  Status model_ready(const pb::ModelReadyRequest* req, pb::ModelReadyResponse* resp) {
    // As Triton: an unknown or unloaded model is "not ready", not an error.
    resp->set_ready(!s_->shutting_down() && s_->repository().find(req->name(), req->version()).ok());
    return Status::Ok();
  }
  Status server_metadata(const pb::ServerMetadataRequest* /*req*/, pb::ServerMetadataResponse* resp) {
    resp->set_name("gpuopt");
    resp->set_version(GPUOPT_VERSION_STRING);
    for (const auto& e : server_extensions()) resp->add_extensions(e);
    return Status::Ok();
  }
  Status model_metadata(const pb::ModelMetadataRequest* req, pb::ModelMetadataResponse* resp) {
    auto v = s_->repository().find(req->name(), req->version());
    if (!v.ok()) return v.status();
    const LoadedVersion& lv = **v;
    resp->set_name(lv.name);
    for (auto& x : s_->repository().ready_versions())
      if (x->name == lv.name) resp->add_versions(x->version_str);
    resp->set_platform(lv.config.platform);
    add_io(lv.config.inputs, lv.config.max_batch_size, resp->mutable_inputs());
    add_io(lv.config.outputs, lv.config.max_batch_size, resp->mutable_outputs());
    return Status::Ok();
  }
  Status model_config(const pb::ModelConfigRequest* req, pb::ModelConfigResponse* resp) {
    auto v = s_->repository().find(req->name(), req->version());
    if (!v.ok()) return v.status();
    return json_to_proto(model_config_json((*v)->config), resp->mutable_config());
  }
  Status model_statistics(const pb::ModelStatisticsRequest* req, pb::ModelStatisticsResponse* resp) {
    nlohmann::json a = nlohmann::json::array();
    if (!req->name().empty()) {
      auto v = s_->repository().find(req->name(), req->version());
      if (!v.ok()) return v.status();
      if (!req->version().empty()) a.push_back((*v)->stats->json((*v)->name, (*v)->version_str));
    }
    if (req->name().empty() || req->version().empty())
      for (auto& x : s_->repository().ready_versions())
        if (req->name().empty() || x->name == req->name()) a.push_back(x->stats->json(x->name, x->version_str));
    return json_to_proto(nlohmann::json{{"model_stats", a}}, resp);
  }
  Status repository_index(const pb::RepositoryIndexRequest* req, pb::RepositoryIndexResponse* resp) {
    return json_to_proto(nlohmann::json{{"models", s_->repository().index(req->ready())}}, resp);
  }
  void repository_model_load(const pb::RepositoryModelLoadRequest* req, std::function<void(Status)> done) {
    for (const auto& [k, v] : req->parameters())
      if (k == "config" || k.rfind("file:", 0) == 0)
        return done(Status::InvalidArgument("load parameter '{}' (config/file override) is not supported", k));
    control(req->model_name(), true, std::move(done));
  }

  Status system_shared_memory_status(const pb::SystemSharedMemoryStatusRequest* req,
                                     pb::SystemSharedMemoryStatusResponse* resp) {
    auto st = s_->shared_memory().status(ShmKind::kSystem, req->name());
    if (!st.ok()) return st.status();
    for (const auto& r : *st) {
      auto& x = (*resp->mutable_regions())[r.name];
      x.set_name(r.name);
      x.set_key(r.key);
      x.set_offset(r.offset);
      x.set_byte_size(r.byte_size);
    }
    return Status::Ok();
  }
  Status system_shared_memory_register(const pb::SystemSharedMemoryRegisterRequest* req,
                                       pb::SystemSharedMemoryRegisterResponse* /*resp*/) {
    return s_->shared_memory().register_system(req->name(), req->key(), req->offset(), req->byte_size());
  }
  Status system_shared_memory_unregister(const pb::SystemSharedMemoryUnregisterRequest* req,
                                         pb::SystemSharedMemoryUnregisterResponse* /*resp*/) {
    s_->shared_memory().unregister(ShmKind::kSystem, req->name());
    return Status::Ok();
  }
  Status cuda_shared_memory_status(const pb::CudaSharedMemoryStatusRequest* req,
                                   pb::CudaSharedMemoryStatusResponse* resp) {
    auto st = s_->shared_memory().status(ShmKind::kCuda, req->name());
    if (!st.ok()) return st.status();
    for (const auto& r : *st) {
      auto& x = (*resp->mutable_regions())[r.name];
      x.set_name(r.name);
      x.set_device_id(static_cast<uint64_t>(r.device_id));
      x.set_byte_size(r.byte_size);
    }
    return Status::Ok();
  }
  Status cuda_shared_memory_register(const pb::CudaSharedMemoryRegisterRequest* req,
                                     pb::CudaSharedMemoryRegisterResponse* /*resp*/) {
    if (req->device_id() < 0 || req->device_id() > INT_MAX)
      return Status::InvalidArgument("CUDA shared memory region '{}': device_id {} is out of range", req->name(),
                                     req->device_id());
    return s_->shared_memory().register_cuda(req->name(), req->raw_handle(), static_cast<int>(req->device_id()),
                                             req->byte_size());
  }
  Status cuda_shared_memory_unregister(const pb::CudaSharedMemoryUnregisterRequest* req,
                                       pb::CudaSharedMemoryUnregisterResponse* /*resp*/) {
    s_->shared_memory().unregister(ShmKind::kCuda, req->name());
    return Status::Ok();
  }

 private:
  // Model load / unload: answered from the loader thread once done.
  void control(const std::string& name, bool load, std::function<void(Status)> done) {
    if (s_->control_mode() != ControlMode::kExplicit)
      return done(Status::InvalidArgument("explicit model load / unload is not allowed: start the server "
                                          "with --model-control-mode explicit"));
    if (s_->shutting_down()) return done(Status::Unavailable("server is shutting down"));
    s_->control_model(name, load, [done = std::move(done)](Status s) {
      // As HTTP: a model that does not exist in the repository is a bad request.
      if (s.code() == StatusCode::kNotFound) s = Status(StatusCode::kInvalidArgument, s.message());
      done(s);
    });
  }

  InferenceServer* s_;
};

// One running grpc server: its service, its completion queues and their threads.
struct Listener {
  std::unique_ptr<Service> service;
  std::unique_ptr<AsyncInfer> engine;
  std::unique_ptr<grpc::Server> server;
  // Calls in progress may finish until `deadline`, the rest are cancelled; then the queues are
  // drained and their threads joined (grpc's order: the server, then its queues).
  void stop(std::chrono::system_clock::time_point deadline) {
    if (server) {
      server->Shutdown(deadline);
      server->Wait();
    }
    if (engine) engine->stop();
    server.reset();
    engine.reset();
  }
  ~Listener() { stop(std::chrono::system_clock::now()); }
};

struct GrpcServer::Impl {
  InferenceServer* inference = nullptr;
  GrpcOptions opts;
  std::string addr;
  std::mutex mu;  // guards listener (the watchdog restarts it)
  std::unique_ptr<Listener> listener;
  std::once_flag stopped;
  std::mutex stop_mu;
  std::condition_variable stop_cv;
  bool stopping = false;
  std::thread watchdog;
  std::atomic<uint64_t> restarts{0};

  // Builds and starts a server on opts.port (the bound port after the first start); the port it
  // got, 0 when it could not bind.
  int build() {
    grpc::ServerBuilder b;
    int selected = 0;
    // No SO_REUSEPORT (grpc's default): a second server on a taken port must fail, not share it.
    b.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
    // Idle connections (one that sent only the HTTP/2 preface among them) are closed, so that they
    // cannot hold descriptors for good.
    b.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_IDLE_MS,
                         static_cast<int>(std::clamp<int64_t>(opts.idle_timeout.count(), 1, INT_MAX)));
    b.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, opts.max_concurrent_streams);
    // Only uncompressed requests: this grpc inflates a compressed message whole before it checks
    // the size limit (a 1 MB gzip bomb took a gigabyte); a compressed request is refused at its
    // headers, before any byte is inflated.
    b.AddChannelArgument(GRPC_COMPRESSION_CHANNEL_ENABLED_ALGORITHMS_BITSET, 1 << GRPC_COMPRESS_NONE);
    b.AddListeningPort(addr, grpc::InsecureServerCredentials(), &selected);
    auto l = std::make_unique<Listener>();
    l->service = std::make_unique<Service>(inference);
    b.RegisterService(l->service.get());
    b.SetMaxReceiveMessageSize(static_cast<int>(std::min<size_t>(opts.max_message_bytes, INT_MAX)));
    b.SetMaxSendMessageSize(INT_MAX);
    std::vector<std::unique_ptr<grpc::ServerCompletionQueue>> cqs;
    const int threads =
        opts.threads > 0 ? opts.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    for (int i = 0; i < threads; ++i) cqs.push_back(b.AddCompletionQueue());
    l->engine = std::make_unique<AsyncInfer>(l->service.get(), std::move(cqs));
    l->server = b.BuildAndStart();
    if (!l->server) return 0;  // ~Listener drains the queues
    l->engine->start();
    listener = std::move(l);
    return selected;
  }

  // grpc's listener stops for good when accept fails other than with EAGAIN (out of descriptors:
  // EMFILE): a listener that no longer answers twice in a row is restarted on the same port.
  void watch() {
    int misses = 0;
    std::unique_lock<std::mutex> lk(stop_mu);
    while (!stop_cv.wait_for(lk, opts.watchdog_interval, [&] { return stopping; })) {
      lk.unlock();
      auto ok = listener_answers(opts.host, opts.port, 5000);
      lk.lock();
      if (stopping) break;
      if (!ok) continue;  // this process is out of descriptors itself: no verdict
      misses = *ok ? 0 : misses + 1;
      if (misses < 2) continue;
      misses = 0;
      GPUOPT_LOG(warn, "gRPC: the listener on {} stopped accepting (out of file descriptors?); restarting it", addr);
      std::lock_guard<std::mutex> g(mu);
      if (listener) {  // null when the last restart could not bind
        listener->stop(std::chrono::system_clock::now() + std::chrono::seconds(1));
        listener.reset();
      }
      if (build() == 0) GPUOPT_LOG(error, "gRPC: restarting the listener on {} failed; retrying", addr);
      else restarts++;
    }
  }
};

Result<std::unique_ptr<GrpcServer>> GrpcServer::start(InferenceServer* server, const GrpcOptions& o) {
  static std::once_flag log_once;
  std::call_once(log_once, [] {
    gpr_set_log_function(grpc_log);
    // Debian builds Abseil with its debug checks: every absl::Mutex lock grpc takes would record
    // lock order in one process-wide graph under a global lock (GraphCycles in a profile).
    absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  });
  std::unique_ptr<GrpcServer> g(new GrpcServer());
  g->impl_ = std::make_unique<Impl>();
  Impl& im = *g->impl_;
  im.inference = server;
  im.opts = o;
  im.addr = (o.host.find(':') != std::string::npos ? "[" + o.host + "]" : o.host) + ":" + std::to_string(o.port);
  const int selected = im.build();
  if (selected == 0) return Status::Unavailable("gRPC: cannot listen on {} (is the port in use?)", im.addr);
  g->port_ = static_cast<uint16_t>(selected);
  im.opts.port = g->port_;
  im.addr = (o.host.find(':') != std::string::npos ? "[" + o.host + "]" : o.host) + ":" + std::to_string(g->port_);
  if (o.watchdog_interval.count() > 0 && o.host.find(':') == std::string::npos)
    im.watchdog = std::thread([p = g->impl_.get()] { p->watch(); });
  return g;
}

GrpcServer::~GrpcServer() { stop(std::chrono::milliseconds(0)); }

uint64_t GrpcServer::restarts() const { return impl_ ? impl_->restarts.load() : 0; }

void GrpcServer::stop(std::chrono::milliseconds grace) {
  if (!impl_) return;
  std::call_once(impl_->stopped, [&] {
    {
      std::lock_guard<std::mutex> lk(impl_->stop_mu);
      impl_->stopping = true;
    }
    impl_->stop_cv.notify_all();
    if (impl_->watchdog.joinable()) impl_->watchdog.join();
    std::lock_guard<std::mutex> lk(impl_->mu);
    if (impl_->listener) impl_->listener->stop(std::chrono::system_clock::now() + grace);
  });
}

}  // namespace gpuopt::server
