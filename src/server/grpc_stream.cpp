#include "server/grpc_stream.h"

#include <grpcpp/support/proto_buffer_reader.h>

#include <deque>
#include <mutex>

#include "core/log.h"
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
class StreamReactor final : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  explicit StreamReactor(StreamHost* svc) : svc_(svc) { StartRead(&in_); }

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
    Status parsed = parse(&req_);
    in_.Clear();
    auto reply = [this](Result<InferReply> r) {
      deliver(r.ok() ? encode_grpc_response_buffer(std::move(r).value(), /*stream=*/true)
                     : encode_stream_error(r.status().message()));
    };
    if (!parsed.ok()) {
      reply(parsed);
    } else {
      // The request is decoded before infer() returns (its raw inputs moved out into the tensors),
      // so req_ can take the next one.
      svc_->stream_infer(req_, reply);
    }
    {
      std::lock_guard<std::mutex> lk(mu_);
      if (outstanding_ >= kMaxStreamInFlight) {
        paused_ = true;  // an answer written (or dropped) resumes the reads
        GPUOPT_LOG(debug, "ModelStreamInfer: {} answers wait; reads paused", outstanding_);
        return;
      }
    }
    StartRead(&in_);
  }

  void OnWriteDone(bool ok) override {
    std::unique_lock<std::mutex> lk(mu_);
    writes_.pop_front();
    --outstanding_;
    if (!ok) broken_ = true;  // the client is gone: the rest are dropped
    write_next_locked();
    resume_or_finish(lk);
  }

  void OnDone() override { delete this; }

 private:
  Status parse(pb::ModelInferRequest* out) {
    const size_t size = in_.Length();
    grpc::ProtoBufferReader reader(&in_);  // the message's slices as they are, not flattened
    return parse_infer_request(&reader, size, out);
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
    StartWrite(&writes_.front());
  }
  // After answers left: the paused reads go on (reads_done_ is false then, so there is nothing to
  // finish), or the call finishes when everything is done. Both outside the lock.
  void resume_or_finish(std::unique_lock<std::mutex>& lk) {
    if (paused_ && outstanding_ < kMaxStreamInFlight) {
      paused_ = false;
      lk.unlock();
      StartRead(&in_);
      return;
    }
    finish_if_done(lk);
  }
  // Finish() outside the lock: OnDone (which deletes this) may follow it at once.
  void finish_if_done(std::unique_lock<std::mutex>& lk) {
    if (reads_done_ && outstanding_ == 0 && !writing_ && !finished_) {
      finished_ = true;
      lk.unlock();
      Finish(grpc::Status::OK);
    }
  }

  StreamHost* svc_;
  grpc::ByteBuffer in_;
  pb::ModelInferRequest req_;
  std::mutex mu_;
  std::deque<grpc::ByteBuffer> writes_;  // front is being written
  int64_t outstanding_ = 0;              // requests read and not yet written (or dropped)
  bool writing_ = false, reads_done_ = false, broken_ = false, finished_ = false;
  bool paused_ = false;  // kMaxStreamInFlight reached: no read started
};

}  // namespace

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* new_stream_reactor(StreamHost* host) {
  return new StreamReactor(host);
}

}  // namespace gpuopt::server
