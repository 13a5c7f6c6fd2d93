// GRPCInferenceService on grpc++'s callback API. Unary calls answer at once, or (ModelInfer,
// model load/unload) from the thread that finishes the work; ModelStreamInfer keeps reading
// while earlier requests run and writes each response as it is ready (one write at a time).
#include "server/grpc_server.h"

#include <google/protobuf/util/json_util.h>
#include <grpc/support/log.h>
#include <grpcpp/grpcpp.h>

#include <atomic>
#include <climits>
#include <deque>
#include <mutex>
#include <optional>
#include <utility>

#include "core/log.h"
#include "core/nvtx.h"
#include "gpuopt/build_info.h"
#include "grpc_service.grpc.pb.h"
#include "server/grpc_codec.h"
#include "server/inference_server.h"

namespace gpuopt::server {
namespace {

using grpc::CallbackServerContext;
using grpc::ServerUnaryReactor;
namespace pb = inference;

// Triton's JSON forms (config, statistics, index) into their proto messages: the field names are
// the proto's, so protobuf's JSON parser maps them; fields without a proto counterpart are skipped.
Status json_to_proto(const nlohmann::json& j, google::protobuf::Message* m) {
  google::protobuf::util::JsonParseOptions o;
  o.ignore_unknown_fields = true;
  auto st = google::protobuf::util::JsonStringToMessage(j.dump(), m, o);
  if (!st.ok()) return Status::Internal("JSON to {}: {}", m->GetTypeName(), st.ToString());
  return Status::Ok();
}

// grpc's own log lines (a failed bind prints a nested error tree) go to gpuopt's log at debug
// level; the user sees the one-line Status the server returns.
void grpc_log(gpr_log_func_args* a) { GPUOPT_LOG(debug, "grpc: {}:{}: {}", a->file, a->line, a->message); }

ServerUnaryReactor* answer(CallbackServerContext* ctx, const Status& s) {
  auto* r = ctx->DefaultReactor();
  r->Finish(to_grpc_status(s));
  return r;
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

// A unary ModelInfer that reports when its answer went out: grpc calls OnDone once the response
// and status are sent (or the call was cancelled), the end of a traced request's "network out".
class WireReactor final : public ServerUnaryReactor {
 public:
  WireReactor() : wire_(std::make_shared<WireTimes>()) {}
  std::shared_ptr<WireTimes> wire() const { return wire_; }
  // From the thread that answers; wire_->sent was set on it before (submit_infer).
  void finish(const grpc::Status& s) {
    {
      std::lock_guard<std::mutex> lock(mu_);  // OnDone, on grpc's thread, reads what this thread wrote
      ready_ns_ = now_ns();
    }
    Finish(s);
  }
  void OnCancel() override { cancelled_ = true; }
  void OnDone() override {
    std::function<void(uint64_t, uint64_t)> sent;
    uint64_t ready = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      sent = std::exchange(wire_->sent, nullptr);
      ready = ready_ns_;
    }
    if (sent) sent(ready, cancelled_ ? 0 : now_ns());
    delete this;
  }

 private:
  std::mutex mu_;
  std::shared_ptr<WireTimes> wire_;
  uint64_t ready_ns_ = 0;
  std::atomic<bool> cancelled_{false};
};

}  // namespace

class Service final : public pb::GRPCInferenceService::CallbackService {
 public:
  explicit Service(InferenceServer* s) : s_(s) {}

  // Decodes, then hands the request to the shared inference path; `done` is called exactly once.
  // The message is given up: its raw_input_contents move into the input tensors (no copy).
  void infer(pb::ModelInferRequest& req, InferDone done, std::shared_ptr<WireTimes> wire = nullptr) {
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

  ServerUnaryReactor* ModelInfer(CallbackServerContext* ctx, const pb::ModelInferRequest* request,
                                 pb::ModelInferResponse* resp) override {
    // grpc hands its own (non-const) message over as const and only destroys it after the call:
    // the inputs' raw bytes are moved out of it into the tensors instead of copied.
    auto* req = const_cast<pb::ModelInferRequest*>(request);
    if (s_->tracing()) {  // the trace's "network out": a reactor of our own tells when the answer went out
      auto* reactor = new WireReactor();
      infer(*req, [reactor, resp](Result<InferReply> r) {
        if (!r.ok()) return reactor->finish(to_grpc_status(r.status()));
        encode_grpc_response(std::move(r).value(), resp);
        reactor->finish(grpc::Status::OK);
      }, reactor->wire());
      return reactor;
    }
    auto* reactor = ctx->DefaultReactor();
    infer(*req, [reactor, resp](Result<InferReply> r) {
      if (!r.ok()) return reactor->Finish(to_grpc_status(r.status()));
      encode_grpc_response(std::move(r).value(), resp);
      reactor->Finish(grpc::Status::OK);
    });
    return reactor;
  }

  grpc::ServerBidiReactor<pb::ModelInferRequest, pb::ModelStreamInferResponse>* ModelStreamInfer(
      CallbackServerContext*) override;

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

// One ModelStreamInfer call: reads requests as they come, answers each when its inference is
// done (errors as a response with error_message, the stream going on), and finishes once the
// client closed its side and every answer is written.
class StreamReactor final : public grpc::ServerBidiReactor<pb::ModelInferRequest, pb::ModelStreamInferResponse> {
 public:
  explicit StreamReactor(Service* svc) : svc_(svc) { StartRead(&req_); }

  void OnReadDone(bool ok) override {
    if (!ok) {
      std::unique_lock<std::mutex> lk(mu_);
      reads_done_ = true;
      finish_if_done(lk);
      return;
    }
    {
      std::lock_guard<std::mutex> lk(mu_);
      ++outstanding_;
    }
    // The request is decoded before infer() returns (its raw inputs moved out into the tensors),
    // so req_ can take the next one.
    svc_->infer(req_, [this](Result<InferReply> r) {
      pb::ModelStreamInferResponse resp;
      if (r.ok())
        encode_grpc_response(std::move(r).value(), resp.mutable_infer_response());
      else
        resp.set_error_message(r.status().message());
      deliver(std::move(resp));
    });
    StartRead(&req_);
  }

  void OnWriteDone(bool ok) override {
    std::unique_lock<std::mutex> lk(mu_);
    writes_.pop_front();
    --outstanding_;
    if (!ok) broken_ = true;  // the client is gone: the rest are dropped
    write_next_locked();
    finish_if_done(lk);
  }

  void OnDone() override { delete this; }

 private:
  void deliver(pb::ModelStreamInferResponse resp) {
    std::unique_lock<std::mutex> lk(mu_);
    if (broken_) {
      --outstanding_;
      finish_if_done(lk);
      return;
    }
    writes_.push_back(std::move(resp));
    if (!writing_) write_next_locked();
  }
  void write_next_locked() {
    writing_ = false;
    while (!writes_.empty() && broken_) {
      writes_.pop_front();
      --outstanding_;
    }
    if (writes_.empty()) return;
    writing_ = true;
    StartWrite(&writes_.front());
  }
  // Finish() outside the lock: OnDone (which deletes this) may follow it at once.
  void finish_if_done(std::unique_lock<std::mutex>& lk) {
    if (reads_done_ && outstanding_ == 0 && !writing_ && !finished_) {
      finished_ = true;
      lk.unlock();
      Finish(grpc::Status::OK);
    }
  }

  Service* svc_;
  pb::ModelInferRequest req_;
  std::mutex mu_;
  std::deque<pb::ModelStreamInferResponse> writes_;  // front is being written
  int64_t outstanding_ = 0;                          // requests read and not yet written (or dropped)
  bool writing_ = false, reads_done_ = false, broken_ = false, finished_ = false;
};

grpc::ServerBidiReactor<pb::ModelInferRequest, pb::ModelStreamInferResponse>* Service::ModelStreamInfer(
    CallbackServerContext*) {
  return new StreamReactor(this);
}

struct GrpcServer::Impl {
  std::unique_ptr<Service> service;
  std::unique_ptr<grpc::Server> server;
  std::once_flag stopped;
};

Result<std::unique_ptr<GrpcServer>> GrpcServer::start(InferenceServer* server, const GrpcOptions& o) {
  static std::once_flag log_once;
  std::call_once(log_once, [] { gpr_set_log_function(grpc_log); });
  std::unique_ptr<GrpcServer> g(new GrpcServer());
  g->impl_ = std::make_unique<Impl>();
  g->impl_->service = std::make_unique<Service>(server);
  grpc::ServerBuilder b;
  int selected = 0;
  std::string addr = (o.host.find(':') != std::string::npos ? "[" + o.host + "]" : o.host) + ":" + std::to_string(o.port);
  // No SO_REUSEPORT (grpc's default): a second server on a taken port must fail, not share it.
  b.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  b.AddListeningPort(addr, grpc::InsecureServerCredentials(), &selected);
  b.RegisterService(g->impl_->service.get());
  b.SetMaxReceiveMessageSize(static_cast<int>(std::min<size_t>(o.max_message_bytes, INT_MAX)));
  b.SetMaxSendMessageSize(INT_MAX);
  g->impl_->server = b.BuildAndStart();
  if (!g->impl_->server || selected == 0)
    return Status::Unavailable("gRPC: cannot listen on {} (is the port in use?)", addr);
  g->port_ = static_cast<uint16_t>(selected);
  return g;
}

GrpcServer::~GrpcServer() { stop(std::chrono::milliseconds(0)); }

void GrpcServer::stop(std::chrono::milliseconds grace) {
  if (!impl_ || !impl_->server) return;  // start() failed: nothing was bound
  std::call_once(impl_->stopped, [&] {
    impl_->server->Shutdown(std::chrono::system_clock::now() + grace);
    impl_->server->Wait();
  });
}

}  // namespace gpuopt::server
