// ModelStreamInfer on the asynchronous API (grpc_async.h), over raw bytes: reads requests as they
// come, runs each through the service's inference path on the queue's thread and writes each
// answer as it is ready, one write at a time.
#include <grpcpp/support/proto_buffer_reader.h>

#include <deque>
#include <mutex>

#include "core/log.h"
#include "server/grpc_async.h"
#include "server/grpc_codec.h"

namespace gpuopt::server {
namespace {

namespace pb = inference;

constexpr int64_t kMaxStreamInFlight = 256;

// One ModelStreamInfer call: reads requests as they come, answers each when its inference is
// done (errors, a malformed message among them, as a response with error_message, the stream
// going on), and finishes once the client closed its side and every answer is written. At most
// kMaxStreamInFlight requests are read and not yet answered: past that the next read waits for
// an answer to be written, so a client that sends without reading its answers holds at most that
// many in the server (grpc's flow control then holds the client's sends).
//
// Completions (arrival, read, write, finish) come on queue q_'s thread; answers from any thread.
// Every operation on the stream is started under mu_, which also orders all state between them.
class StreamCall {
 public:
  StreamCall(AsyncInfer* e, size_t q) : e_(e), q_(q), rw_(&ctx_) {
    e_->host()->request_stream(&ctx_, &rw_, e_->cq(q_), &arrive_);
  }

 private:
  // A completion routed to one of the call's handlers.
  struct Tag final : CqTag {
    Tag(StreamCall* c, void (StreamCall::*f)(bool)) : call(c), fn(f) {}
    void on(bool ok) override { (call->*fn)(ok); }
    StreamCall* call;
    void (StreamCall::*fn)(bool);
  };

  void on_arrive(bool ok) {
    if (!ok) {  // the server is shutting down: this call never came
      delete this;
      return;
    }
    e_->request_stream(q_);
    std::lock_guard<std::mutex> lk(mu_);
    rw_.Read(&in_, &read_);
  }

  void on_read(bool ok) {
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
    pb::ModelInferRequest req;
    Status parsed;
    {
      const size_t size = in_.Length();
      grpc::ProtoBufferReader reader(&in_);  // the message's slices as they are, not flattened
      parsed = parse_infer_request(&reader, size, &req);
    }
    in_.Clear();
    auto reply = [this](Result<InferReply> r) {
      deliver(r.ok() ? encode_grpc_response_buffer(std::move(r).value(), /*stream=*/true)
                     : encode_stream_error(r.status().message()));
    };
    if (!parsed.ok()) reply(parsed);
    else e_->host()->infer(req, reply, nullptr);  // decoded before it returns: in_ can take the next one
    std::lock_guard<std::mutex> lk(mu_);
    if (outstanding_ >= kMaxStreamInFlight) {
      paused_ = true;  // an answer written (or dropped) resumes the reads
      GPUOPT_LOG(debug, "ModelStreamInfer: {} answers wait; reads paused", outstanding_);
      return;
    }
    rw_.Read(&in_, &read_);
  }

  void on_write(bool ok) {
    std::unique_lock<std::mutex> lk(mu_);
    writes_.pop_front();
    --outstanding_;
    if (!ok) broken_ = true;  // the client is gone: the rest are dropped
    write_next_locked();
    resume_or_finish(lk);
  }

  void on_finish(bool) {
    { std::lock_guard<std::mutex> lk(mu_); }  // whoever started the last operation is out of it
    delete this;
  }

  void deliver(grpc::ByteBuffer bb) {
    std::unique_lock<std::mutex> lk(mu_);
    if (broken_) {
      --outstanding_;
      resume_or_finish(lk);
      return;
    }
    writes_.push_back(std::move(bb));
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
    rw_.Write(writes_.front(), &write_);
  }
  // After answers left: the paused reads go on (reads_done_ is false then, so there is nothing to
  // finish), or the call finishes when everything is done.
  void resume_or_finish(std::unique_lock<std::mutex>& lk) {
    if (paused_ && outstanding_ < kMaxStreamInFlight) {
      paused_ = false;
      rw_.Read(&in_, &read_);
      return;
    }
    finish_if_done(lk);
  }
  void finish_if_done(std::unique_lock<std::mutex>&) {
    if (reads_done_ && outstanding_ == 0 && !writing_ && !finished_) {
      finished_ = true;
      rw_.Finish(grpc::Status::OK, &finish_);
    }
  }

  AsyncInfer* e_;
  size_t q_;
  grpc::ServerContext ctx_;
  RawStream rw_;
  Tag arrive_{this, &StreamCall::on_arrive}, read_{this, &StreamCall::on_read};
  Tag write_{this, &StreamCall::on_write}, finish_{this, &StreamCall::on_finish};
  grpc::ByteBuffer in_;  // the read in progress (the queue's thread between reads)
  std::mutex mu_;
  std::deque<grpc::ByteBuffer> writes_;  // front is being written
  int64_t outstanding_ = 0;              // requests read and not yet written (or dropped)
  bool writing_ = false, reads_done_ = false, broken_ = false, finished_ = false;
  bool paused_ = false;  // kMaxStreamInFlight reached: no read started
};

}  // namespace

void new_stream_call(AsyncInfer* engine, size_t q) { new StreamCall(engine, q); }

}  // namespace gpuopt::server
