// Internal to the gRPC service (grpc_server.cpp): ModelStreamInfer's reactor, over raw bytes. It
// reads requests as they come, runs each through the service's inference path and writes each
// answer as it is ready, one write at a time.
//
//   class Service : public ServiceBase, public StreamHost { ... };
//   ... ModelStreamInfer(CallbackServerContext*) override { return new_stream_reactor(this); }
#pragma once

#include <grpcpp/grpcpp.h>

#include "grpc_service.pb.h"
#include "server/inference_server.h"

namespace gpuopt::server {

// What a stream needs of the service.
class StreamHost {
 public:
  virtual ~StreamHost() = default;
  // Decodes `req` before it returns (its raw inputs moved out); `done` is called exactly once.
  virtual void stream_infer(inference::ModelInferRequest& req, InferDone done) = 0;
};

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* new_stream_reactor(StreamHost* host);

}  // namespace gpuopt::server
