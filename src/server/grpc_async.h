// Internal to the gRPC service (grpc_server.cpp): its calls on grpc++'s asynchronous API, one
// completion queue per thread, each polled by a thread of ours (grpc then has no threads of its
// own serving calls). A ModelInfer call's arrival, its parse and decode and the hand-off to the
// batcher run on the queue's thread that got it; the thread that finishes the inference encodes
// the answer and posts it back to that queue (one wake-up for all the answers of a batch posted
// to a queue), whose thread writes it and, at its completion, frees the call. The other unary
// methods are handled on the queue's thread (InferHost::handle_unary).
//
//   class Service : public ServiceBase /* every method WithRawMethod_ */, public InferHost { ... };
//   auto cqs = ...builder.AddCompletionQueue() per thread...;
//   AsyncInfer engine(&service, std::move(cqs));
//   server = builder.BuildAndStart();  engine.start();
//   ...  server->Shutdown(deadline);  engine.stop();  // queues drained, threads joined
#pragma once

#include <grpcpp/alarm.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/support/async_stream.h>
#include <grpcpp/support/async_unary_call.h>

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "grpc_service.pb.h"
#include "server/inference_server.h"

namespace gpuopt::server {

using RawResponder = grpc::ServerAsyncResponseWriter<grpc::ByteBuffer>;
using RawStream = grpc::ServerAsyncReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>;
// A unary call's answer: a status and, when OK, the response's bytes. Called once, from any thread.
using RawFinish = std::function<void(grpc::Status, grpc::ByteBuffer)>;

// What the asynchronous calls need of the service.
class InferHost {
 public:
  virtual ~InferHost() = default;
  // Asks grpc for the next ModelInfer / ModelStreamInfer call on `cq`; `tag` comes back from it.
  virtual void request_infer(grpc::ServerContext* ctx, grpc::ByteBuffer* request, RawResponder* responder,
                             grpc::ServerCompletionQueue* cq, void* tag) = 0;
  virtual void request_stream(grpc::ServerContext* ctx, RawStream* stream, grpc::ServerCompletionQueue* cq,
                              void* tag) = 0;
  // The other unary methods (health, metadata, repository, shared memory ...), by the generated
  // code's index: asked for like ModelInfer, handled on the queue's thread from their bytes.
  virtual std::vector<int> unary_methods() const = 0;
  virtual void request_unary(int method, grpc::ServerContext* ctx, grpc::ByteBuffer* request,
                             RawResponder* responder, grpc::ServerCompletionQueue* cq, void* tag) = 0;
  virtual void handle_unary(int method, grpc::ByteBuffer& request, RawFinish finish) = 0;
  // Decodes `req` before it returns (its raw inputs moved out into the tensors); `done` is called
  // exactly once, from any thread (at once on an error).
  virtual void infer(inference::ModelInferRequest& req, InferDone done, std::shared_ptr<WireTimes> wire) = 0;
  virtual bool tracing() const = 0;
};

// A completion of one operation: the tag given to grpc.
class CqTag {
 public:
  virtual void on(bool ok) = 0;

 protected:
  ~CqTag() = default;
};

// Work handed to a queue's thread (AsyncInfer::post).
class Posted {
 public:
  virtual void run() = 0;

 protected:
  ~Posted() = default;
};

class AsyncInfer {
 public:
  AsyncInfer(InferHost* host, std::vector<std::unique_ptr<grpc::ServerCompletionQueue>> cqs);
  ~AsyncInfer();  // stop()
  // Once the server is built: asks for the first calls on every queue and starts their threads.
  void start();
  // Once grpc::Server::Shutdown returned (every call finished or cancelled, so nothing waits
  // for an answer): shuts the queues down, drains them and joins their threads.
  void stop();

  // For the calls: the next call of that kind on queue `q` (none once stopping).
  void request_infer(size_t q);
  void request_stream(size_t q);
  void request_unary(size_t q, int method);
  // Runs p->run() on queue q's thread: the answers of a batch become one wake-up per queue.
  void post(size_t q, Posted* p);
  InferHost* host() const { return host_; }
  grpc::ServerCompletionQueue* cq(size_t q) const { return cqs_[q].get(); }

 private:
  InferHost* host_;
  // Work posted to a queue's thread: an alarm due at once wakes the thread (armed while set).
  struct Mailbox final : CqTag {
    void on(bool ok) override;
    std::mutex mu;
    std::vector<Posted*> work;
    bool armed = false;
    grpc::Alarm alarm;
  };
  std::vector<std::unique_ptr<grpc::ServerCompletionQueue>> cqs_;
  std::vector<std::unique_ptr<Mailbox>> mail_;
  std::vector<std::thread> threads_;
  std::atomic<bool> stopping_{false};
  bool stopped_ = false;
};

// One ModelStreamInfer call waiting on queue `q` (grpc_stream.cpp); it frees itself.
void new_stream_call(AsyncInfer* engine, size_t q);

}  // namespace gpuopt::server
