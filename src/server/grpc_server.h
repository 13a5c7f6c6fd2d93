// The KServe v2 gRPC endpoint (Triton's GRPCInferenceService, port 8001) over grpc++'s callback
// API: health, metadata, config, statistics, repository control, the shared-memory RPCs,
// ModelInfer and the bidirectional ModelStreamInfer. Every inference goes through
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
};

class GrpcServer {
 public:
  // Binds host:port; Unavailable naming the address when it cannot (port in use).
  static Result<std::unique_ptr<GrpcServer>> start(InferenceServer* server, const GrpcOptions& options);
  ~GrpcServer();
  uint16_t port() const { return port_; }
  // Stops accepting calls, lets the ones in progress finish for up to `grace`, cancels the rest.
  void stop(std::chrono::milliseconds grace);

  struct Impl;

 private:
  GrpcServer() = default;
  std::unique_ptr<Impl> impl_;
  uint16_t port_ = 0;
};

}  // namespace gpuopt::server
