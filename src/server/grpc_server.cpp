// GRPCInferenceService: ModelInfer and ModelStreamInfer on grpc++'s asynchronous API, one
// completion queue per thread polled by threads of ours (grpc_async.h), taking and giving raw
// bytes: the request parsed from grpc's received slices, the response written as slices over the
// output tensors (grpc_codec.h). ModelStreamInfer keeps reading while earlier requests run and
// writes each response as it is ready (one write at a time). The other RPCs are on the callback
// API: they answer at once, or (model load/unload) from the thread that finishes the work.
#include "server/grpc_server.h"

#include <google/protobuf/util/json_util.h>
#include <absl/synchronization/mutex.h>
#include <grpc/support/log.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/support/proto_buffer_reader.h>
#include <grpcpp/support/server_interceptor.h>

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

using grpc::CallbackServerContext;
using grpc::ServerUnaryReactor;
namespace pb = inference;

// grpc's own log lines (a failed bind prints a nested error tree) go to gpuopt's log at debug
// level; the user sees the one-line Status the server returns.
void grpc_log(gpr_log_func_args* a) { GPUOPT_LOG(debug, "grpc: {}:{}: {}", a->file, a->line, a->message); }

ServerUnaryReactor* answer(CallbackServerContext* ctx, const Status& s) {
  auto* r = ctx->DefaultReactor();
  r->Finish(to_grpc_status(s));
  return r;
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

// ModelStreamInfer takes raw bytes: a request that is not a valid message is answered in the
// stream (error_message) and the stream goes on, instead of grpc ending the reads silently.
// ModelInfer is raw for its response (written without a staging copy).
using G = pb::GRPCInferenceService;
// The callback service with ModelInfer and ModelStreamInfer asynchronous and raw (the generated
// code has no such alias).
using ServiceBase =
    G::WithCallbackMethod_ServerLive<
        G::WithCallbackMethod_ServerReady<
        G::WithCallbackMethod_ModelReady<
        G::WithCallbackMethod_ServerMetadata<
        G::WithCallbackMethod_ModelMetadata<
        G::WithRawMethod_ModelInfer<
        G::WithRawMethod_ModelStreamInfer<
        G::WithCallbackMethod_ModelConfig<
        G::WithCallbackMethod_ModelStatistics<
        G::WithCallbackMethod_RepositoryIndex<
        G::WithCallbackMethod_RepositoryModelLoad<
        G::WithCallbackMethod_RepositoryModelUnload<
        G::WithCallbackMethod_SystemSharedMemoryStatus<
        G::WithCallbackMethod_SystemSharedMemoryRegister<
        G::WithCallbackMethod_SystemSharedMemoryUnregister<
        G::WithCallbackMethod_CudaSharedMemoryStatus<
        G::WithCallbackMethod_CudaSharedMemoryRegister<
        G::WithCallbackMethod_CudaSharedMemoryUnregister<
        G::WithCallbackMethod_TraceSetting<
        G::WithCallbackMethod_LogSettings<pb::GRPCInferenceService::Service>>>>>>>>>>>>>>>>>>>>;

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

  ServerUnaryReactor* ServerLive(CallbackServerContext* ctx, const pb::ServerLiveRequest*,
                                 pb::ServerLiveResponse* resp) override {
    resp->set_live(s_->live());
    return answer(ctx, Status::Ok());
  }
  ServerUnaryReactor* ServerReady(CallbackServerContext* ctx, const pb::ServerReadyRequest*,
                                  pb::ServerReadyResponse* resp) override {
    resp->set_ready(s_->ready());
    return answer(ctx, Status::Ok());
  }
  ServerUnaryReactor* ModelReady(CallbackServerContext* ctx, const pb::ModelReadyRequest* req,
                                 pb::ModelReadyResponse* resp) override {
    // As Triton: an unknown or unloaded model is "not ready", not an error.
    resp->set_ready(!s_->shutting_down() && s_->repository().find(req->name(), req->version()).ok());
    return answer(ctx, Status::Ok());
  }
  ServerUnaryReactor* ServerMetadata(CallbackServerContext* ctx, const pb::ServerMetadataRequest*,
                                     pb::ServerMetadataResponse* resp) override {
    resp->set_name("gpuopt");
    resp->set_version(GPUOPT_VERSION_STRING);
    for (const auto& e : server_extensions()) resp->add_extensions(e);
    return answer(ctx, Status::Ok());
  }
  ServerUnaryReactor* ModelMetadata(CallbackServerContext* ctx, const pb::ModelMetadataRequest* req,
                                    pb::ModelMetadataResponse* resp) override {
    auto v = s_->repository().find(req->name(), req->version());
    if (!v.ok()) return answer(ctx, v.status());
    const LoadedVersion& lv = **v;
    resp->set_name(lv.name);
    for (auto& x : s_->repository().ready_versions())
      if (x->name == lv.name) resp->add_versions(x->version_str);
    resp->set_platform(lv.config.platform);
    add_io(lv.config.inputs, lv.config.max_batch_size, resp->mutable_inputs());
    add_io(lv.config.outputs, lv.config.max_batch_size, resp->mutable_outputs());
    return answer(ctx, Status::Ok());
  }
  ServerUnaryReactor* ModelConfig(CallbackServerContext* ctx, const pb::ModelConfigRequest* req,
                                  pb::ModelConfigResponse* resp) override {
    auto v = s_->repository().find(req->name(), req->version());
    if (!v.ok()) return answer(ctx, v.status());
    return answer(ctx, json_to_proto(model_config_json((*v)->config), resp->mutable_config()));
  }
  ServerUnaryReactor* ModelStatistics(CallbackServerContext* ctx, const pb::ModelStatisticsRequest* req,
                                      pb::ModelStatisticsResponse* resp) override {
    nlohmann::json a = nlohmann::json::array();
    if (!req->name().empty()) {
      auto v = s_->repository().find(req->name(), req->version());
      if (!v.ok()) return answer(ctx, v.status());
      if (!req->version().empty()) a.push_back((*v)->stats->json((*v)->name, (*v)->version_str));
    }
    if (req->name().empty() || req->version().empty())
      for (auto& x : s_->repository().ready_versions())
        if (req->name().empty() || x->name == req->name()) a.push_back(x->stats->json(x->name, x->version_str));
    return answer(ctx, json_to_proto(nlohmann::json{{"model_stats", a}}, resp));
  }
  ServerUnaryReactor* RepositoryIndex(CallbackServerContext* ctx, const pb::RepositoryIndexRequest* req,
                                      pb::RepositoryIndexResponse* resp) override {
    return answer(ctx, json_to_proto(nlohmann::json{{"models", s_->repository().index(req->ready())}}, resp));
  }
  ServerUnaryReactor* RepositoryModelLoad(CallbackServerContext* ctx, const pb::RepositoryModelLoadRequest* req,
                                          pb::RepositoryModelLoadResponse*) override {
    for (const auto& [k, v] : req->parameters())
      if (k == "config" || k.rfind("file:", 0) == 0)
        return answer(ctx, Status::InvalidArgument("load parameter '{}' (config/file override) is not supported", k));
    return control(ctx, req->model_name(), true);
  }
  ServerUnaryReactor* RepositoryModelUnload(CallbackServerContext* ctx, const pb::RepositoryModelUnloadRequest* req,
                                            pb::RepositoryModelUnloadResponse*) override {
    return control(ctx, req->model_name(), false);
  }

  ServerUnaryReactor* SystemSharedMemoryStatus(CallbackServerContext* ctx, const pb::SystemSharedMemoryStatusRequest* req,
                                               pb::SystemSharedMemoryStatusResponse* resp) override {
    auto st = s_->shared_memory().status(ShmKind::kSystem, req->name());
    if (!st.ok()) return answer(ctx, st.status());
    for (const auto& r : *st) {
      auto& x = (*resp->mutable_regions())[r.name];
      x.set_name(r.name);
      x.set_key(r.key);
      x.set_offset(r.offset);
      x.set_byte_size(r.byte_size);
    }
    return answer(ctx, Status::Ok());
  }
  ServerUnaryReactor* SystemSharedMemoryRegister(CallbackServerContext* ctx,
                                                 const pb::SystemSharedMemoryRegisterRequest* req,
                                                 pb::SystemSharedMemoryRegisterResponse*) override {
    return answer(ctx, s_->shared_memory().register_system(req->name(), req->key(), req->offset(), req->byte_size()));
  }
  ServerUnaryReactor* SystemSharedMemoryUnregister(CallbackServerContext* ctx,
                                                   const pb::SystemSharedMemoryUnregisterRequest* req,
                                                   pb::SystemSharedMemoryUnregisterResponse*) override {
    s_->shared_memory().unregister(ShmKind::kSystem, req->name());
    return answer(ctx, Status::Ok());
  }
  ServerUnaryReactor* CudaSharedMemoryStatus(CallbackServerContext* ctx, const pb::CudaSharedMemoryStatusRequest* req,
                                             pb::CudaSharedMemoryStatusResponse* resp) override {
    auto st = s_->shared_memory().status(ShmKind::kCuda, req->name());
    if (!st.ok()) return answer(ctx, st.status());
    for (const auto& r : *st) {
      auto& x = (*resp->mutable_regions())[r.name];
      x.set_name(r.name);
      x.set_device_id(static_cast<uint64_t>(r.device_id));
      x.set_byte_size(r.byte_size);
    }
    return answer(ctx, Status::Ok());
  }
  ServerUnaryReactor* CudaSharedMemoryRegister(CallbackServerContext* ctx, const pb::CudaSharedMemoryRegisterRequest* req,
                                               pb::CudaSharedMemoryRegisterResponse*) override {
    if (req->device_id() < 0 || req->device_id() > INT_MAX)
      return answer(ctx, Status::InvalidArgument("CUDA shared memory region '{}': device_id {} is out of range",
                                                 req->name(), req->device_id()));
    return answer(ctx, s_->shared_memory().register_cuda(req->name(), req->raw_handle(),
                                                         static_cast<int>(req->device_id()), req->byte_size()));
  }
  ServerUnaryReactor* CudaSharedMemoryUnregister(CallbackServerContext* ctx,
                                                 const pb::CudaSharedMemoryUnregisterRequest* req,
                                                 pb::CudaSharedMemoryUnregisterResponse*) override {
    s_->shared_memory().unregister(ShmKind::kCuda, req->name());
    return answer(ctx, Status::Ok());
  }

 private:
  ServerUnaryReactor* control(CallbackServerContext* ctx, const std::string& name, bool load) {
    if (s_->control_mode() != ControlMode::kExplicit)
      return answer(ctx, Status::InvalidArgument("explicit model load / unload is not allowed: start the server "
                                                 "with --model-control-mode explicit"));
    if (s_->shutting_down()) return answer(ctx, Status::Unavailable("server is shutting down"));
    auto* reactor = ctx->DefaultReactor();
    s_->control_model(name, load, [reactor](Status s) {
      // As HTTP: a model that does not exist in the repository is a bad request.
      if (s.code() == StatusCode::kNotFound) s = Status(StatusCode::kInvalidArgument, s.message());
      reactor->Finish(to_grpc_status(s));
    });
    return reactor;
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
    std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> interceptors;
    interceptors.push_back(std::make_unique<MalformedRequestInterceptorFactory>());
    b.experimental().SetInterceptorCreators(std::move(interceptors));
    std::vector<std::unique_ptr<grpc::ServerCompletionQueue>> cqs;
    const int threads = opts.threads > 0 ? opts.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
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
