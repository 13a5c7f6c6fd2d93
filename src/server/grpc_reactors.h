// Internal to the gRPC service (grpc_server.cpp): Triton's JSON forms into proto messages, and the
// unary ModelInfer reactor that reports when its answer went out.
#pragma once

#include <google/protobuf/message.h>
#include <google/protobuf/util/json_util.h>
#include <grpcpp/grpcpp.h>

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <utility>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "server/grpc_codec.h"
#include "server/inference_server.h"

namespace gpuopt::server {

// Triton's JSON forms (config, statistics, index) into their proto messages: the field names are
// the proto's, so protobuf's JSON parser maps them; fields without a proto counterpart are skipped.
inline Status json_to_proto(const nlohmann::json& j, google::protobuf::Message* m) {
  google::protobuf::util::JsonParseOptions o;
  o.ignore_unknown_fields = true;
  auto st = google::protobuf::util::JsonStringToMessage(json_text(j), m, o);
  if (!st.ok()) return Status::Internal("JSON to {}: {}", m->GetTypeName(), st.ToString());
  return Status::Ok();
}

// A unary ModelInfer that reports when its answer went out: grpc calls OnDone once the response
// and status are sent (or the call was cancelled), the end of a traced request's "network out".
class WireReactor final : public grpc::ServerUnaryReactor {
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

}  // namespace gpuopt::server
