#include "server/grpc_async.h"

#include <grpcpp/support/proto_buffer_reader.h>
#include <pthread.h>

#include <mutex>
#include <string>
#include <utility>

#include "core/log.h"
#include "server/grpc_codec.h"

namespace gpuopt::server {
namespace {

namespace pb = inference;

// Calls asked for ahead on each queue: a burst of arrivals finds a waiting slot (grpc queues the
// calls that find none until one is asked for, so this bounds nothing but latency).
constexpr int kInferSlots = 32;
constexpr int kStreamSlots = 4;

// One unary ModelInfer: asked for on queue q_, arrives there (the first completion), is decoded
// and handed to the inference on that thread; the answering thread encodes the answer and posts
// the call back to q_, whose thread writes it (Finish); the second completion, Finish's, frees
// it there. Writing from the queue's thread keeps the socket writes off the batcher's answer
// threads and spreads them over the queues; posting batches the wake-ups. mu_ orders the
// answering thread's writes before the queue thread's reads (the mailbox's mutex does too).
class UnaryCall final : public CqTag, public Posted {
 public:
  UnaryCall(AsyncInfer* e, size_t q) : e_(e), q_(q), responder_(&ctx_) {
    e_->host()->request_infer(&ctx_, &request_, &responder_, e_->cq(q_), tag());
  }

  void on(bool ok) override {
    if (!arrived_) {
      arrived_ = true;
      if (!ok) {  // the server is shutting down: this call never came
        delete this;
        return;
      }
      e_->request_infer(q_);
      handle();
      return;
    }
    std::shared_ptr<WireTimes> wire;
    uint64_t ready = 0;
    {
      std::lock_guard<std::mutex> lk(mu_);
      wire = std::move(wire_);
      ready = ready_ns_;
    }
    if (wire) {
      // submit_infer set `sent` before the answer (under mu_ since): the end of "network out".
      if (auto sent = std::exchange(wire->sent, nullptr)) sent(ready, ok ? now_ns() : 0);
    }
    delete this;
  }

 private:
  void handle() {
    // Parsed from grpc's slices as they are; decoding moves the inputs' raw bytes out of the
    // message into the tensors, so it may go once infer() returns.
    pb::ModelInferRequest req;
    const size_t size = request_.Length();
    Status parsed;
    {
      grpc::ProtoBufferReader reader(&request_);
      parsed = parse_infer_request(&reader, size, &req);
    }
    request_.Clear();  // grpc's slices: the parsed message holds what is needed
    if (!parsed.ok()) return answer(parsed);
    std::shared_ptr<WireTimes> wire;
    if (e_->host()->tracing()) {
      std::lock_guard<std::mutex> lk(mu_);
      wire = wire_ = std::make_shared<WireTimes>();
    }
    e_->host()->infer(req, [this](Result<InferReply> r) { answer(std::move(r)); }, std::move(wire));
  }

  // On the answering thread: encoded there, written by the call's queue thread (run).
  void answer(Result<InferReply> r) {
    {
      std::lock_guard<std::mutex> lk(mu_);
      ready_ns_ = now_ns();
      if (r.ok()) response_ = encode_grpc_response_buffer(std::move(r).value());
      else error_ = to_grpc_status(r.status());
    }
    e_->post(q_, this);
  }
  void run() override {
    std::lock_guard<std::mutex> lk(mu_);
    if (!error_.ok()) responder_.FinishWithError(error_, tag());
    else responder_.Finish(response_, grpc::Status::OK, tag());
  }

  void* tag() { return static_cast<CqTag*>(this); }  // what the queue loop casts back

  AsyncInfer* e_;
  size_t q_;
  bool arrived_ = false;  // the queue's thread only
  grpc::ServerContext ctx_;
  grpc::ByteBuffer request_;
  RawResponder responder_;
  std::mutex mu_;
  grpc::ByteBuffer response_;
  grpc::Status error_;
  std::shared_ptr<WireTimes> wire_;  // a traced call's network stages
  uint64_t ready_ns_ = 0;
};

// One call of another unary method: the same life as UnaryCall's, the handling the host's.
class MethodCall final : public CqTag {
 public:
  MethodCall(AsyncInfer* e, size_t q, int method) : e_(e), q_(q), method_(method), responder_(&ctx_) {
    e_->host()->request_unary(method_, &ctx_, &request_, &responder_, e_->cq(q_), this);
  }

  void on(bool ok) override {
    if (!arrived_) {
      arrived_ = true;
      if (!ok) {
        delete this;
        return;
      }
      e_->request_unary(q_, method_);
      e_->host()->handle_unary(method_, request_, [this](grpc::Status s, grpc::ByteBuffer bytes) {
        std::lock_guard<std::mutex> lk(mu_);
        if (!s.ok()) return responder_.FinishWithError(s, this);
        response_ = std::move(bytes);
        responder_.Finish(response_, s, this);
      });
      return;
    }
    { std::lock_guard<std::mutex> lk(mu_); }  // the answering thread is out of Finish
    delete this;
  }

 private:
  AsyncInfer* e_;
  size_t q_;
  int method_;
  bool arrived_ = false;
  grpc::ServerContext ctx_;
  grpc::ByteBuffer request_;
  RawResponder responder_;
  std::mutex mu_;
  grpc::ByteBuffer response_;
};

}  // namespace

AsyncInfer::AsyncInfer(InferHost* host, std::vector<std::unique_ptr<grpc::ServerCompletionQueue>> cqs)
    : host_(host), cqs_(std::move(cqs)) {
  for (size_t q = 0; q < cqs_.size(); ++q) mail_.push_back(std::make_unique<Mailbox>());
}

void AsyncInfer::post(size_t q, Posted* p) {
  Mailbox& m = *mail_[q];
  std::lock_guard<std::mutex> lk(m.mu);
  m.work.push_back(p);
  if (m.armed) return;  // the thread is woken already and takes this too
  m.armed = true;
  m.alarm.Set(cqs_[q].get(), gpr_time_0(GPR_CLOCK_MONOTONIC), static_cast<CqTag*>(&m));
}

void AsyncInfer::Mailbox::on(bool) {
  std::vector<Posted*> todo;
  {
    std::lock_guard<std::mutex> lk(mu);
    todo.swap(work);
    armed = false;
  }
  for (Posted* p : todo) p->run();
}

AsyncInfer::~AsyncInfer() { stop(); }

void AsyncInfer::start() {
  for (size_t q = 0; q < cqs_.size(); ++q) {
    for (int i = 0; i < kInferSlots; ++i) request_infer(q);
    for (int i = 0; i < kStreamSlots; ++i) request_stream(q);
    for (int m : host_->unary_methods()) request_unary(q, m);
  }
  for (size_t q = 0; q < cqs_.size(); ++q)
    threads_.emplace_back([this, q] {
      std::string name = "grpc-cq-" + std::to_string(q);
      pthread_setname_np(pthread_self(), name.substr(0, 15).c_str());
      void* tag = nullptr;
      bool ok = false;
      while (cqs_[q]->Next(&tag, &ok)) static_cast<CqTag*>(tag)->on(ok);
    });
}

void AsyncInfer::request_infer(size_t q) {
  if (!stopping_.load(std::memory_order_relaxed)) new UnaryCall(this, q);
}

void AsyncInfer::request_stream(size_t q) {
  if (!stopping_.load(std::memory_order_relaxed)) new_stream_call(this, q);
}

void AsyncInfer::request_unary(size_t q, int method) {
  if (!stopping_.load(std::memory_order_relaxed)) new MethodCall(this, q, method);
}

void AsyncInfer::stop() {
  if (stopped_) return;
  stopped_ = true;
  stopping_ = true;
  for (auto& cq : cqs_) cq->Shutdown();
  const bool started = !threads_.empty();
  for (auto& t : threads_) t.join();
  threads_.clear();
  if (!started)  // the server did not build: the queues are drained here (grpc requires it)
    for (auto& cq : cqs_) {
      void* tag = nullptr;
      bool ok = false;
      while (cq->Next(&tag, &ok)) static_cast<CqTag*>(tag)->on(ok);
    }
}

}  // namespace gpuopt::server
