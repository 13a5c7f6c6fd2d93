// The KServe v2 gRPC endpoint (Triton's GRPCInferenceService, port 8001): health, metadata,
// config, statistics, repository control, the shared-memory RPCs, ModelInfer and the
// bidirectional ModelStreamInfer, all on grpc++'s asynchronous API (one completion queue per
// thread, polled by threads of ours). Every inference goes through
// InferenceServer::submit_infer, as HTTP's does: same batcher, limits, statistics and drain.
//
//   GrpcOptions o;  o.port = 8001;
//   GPUOPT_ASSIGN_OR_RETURN(auto g, GrpcServer::start(&inference_server, o));
//   ... g->port() ...
//   g->stop(std::chrono::milliseconds(200));   // after the inference server drained
#pragma once

#include "core/status.h"

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

namespace gpuopt::server {

class InferenceServer;

struct GrpcOptions {
  std::string host = "0.0.0.0";
  uint16_t port = 8001;  // 0 = any free port
  size_t max_message_bytes = size_t{64} << 20;  // largest request message (RESOURCE_EXHAUSTED above)
  // A connection without calls for this long is closed (one that only sent the preface too).
  std::chrono::milliseconds idle_timeout{std::chrono::seconds(120)};
  int max_concurrent_streams = 1024;  // calls in flight on one connection
  int threads = 0;  // completion queues, one thread each, serving every call (0 = one per core)
  // How often the listener is probed; one that stopped accepting (grpc gives up on accept
  // failures such as running out of file descriptors) is restarted. 0 = never.
  std::chrono::milliseconds watchdog_interval{std::chrono::seconds(2)};
};

class GrpcServer {
 public:
  // Binds host:port; Unavailable naming the address when it cannot (port in use).
  static Result<std::unique_ptr<GrpcServer>> start(InferenceServer* server, const GrpcOptions& options);
  ~GrpcServer();
  uint16_t port() const { return port_; }
  uint64_t restarts() const;  // listeners the watchdog restarted
  // Stops accepting calls, lets the ones in progress finish for up to `grace`, cancels the rest.
  void stop(std::chrono::milliseconds grace);

  struct Impl;

 private:
  GrpcServer() = default;
  std::unique_ptr<Impl> impl_;
  uint16_t port_ = 0;
};

}  // namespace gpuopt::server
