// `gpuopt perf`'s connection to the server under test: KServe v2 over HTTP or gRPC (-i), with
// the input and output tensors in the request/response or in shared memory (--shared-memory
// system|cuda, as perf_analyzer). One PerfClient per worker thread; each registers its own
// regions with the server and unregisters them when it is destroyed.
//
//   PerfTransport t{.protocol = "grpc", .host = "127.0.0.1", .port = 8001};
//   GPUOPT_ASSIGN_OR_RETURN(auto c, make_perf_client(t, nullptr, 0));   // metadata and stats only
//   GPUOPT_ASSIGN_OR_RETURN(nlohmann::json meta, c->metadata("simple"));
//   auto request = std::make_shared<PerfRequest>(...);                 // built from the metadata
//   GPUOPT_ASSIGN_OR_RETURN(auto w, make_perf_client(t, request, 1));
//   GPUOPT_RETURN_IF_ERROR(w->infer());
#pragma once

#include "core/status.h"
#include "core/tensor.h"

#include <nlohmann/json.hpp>

#include <memory>
#include <string>
#include <vector>

namespace gpuopt::cli {

struct PerfTransport {
  std::string protocol = "http";       // http or grpc
  std::string host = "127.0.0.1";
  uint16_t port = 8000;
  std::string shared_memory = "none";  // none, system or cuda
  size_t output_shm_bytes = 100 << 10;  // room per output in shared memory (--output-shared-memory-size)
};

// The request every worker sends: the HTTP body as build_body makes it (binary or JSON tensors)
// and the outputs the model has (for shared-memory output regions).
struct PerfRequest {
  std::string model;
  std::string body;
  size_t json_length = 0;
  bool binary = true;
  std::vector<std::string> outputs;
};

class PerfClient {
 public:
  virtual ~PerfClient() = default;
  // Model metadata in KServe v2's JSON form ({"name", "inputs": [{"name","datatype","shape"}], "outputs"}).
  virtual Result<nlohmann::json> metadata(const std::string& model) = 0;
  // {"model_stats": [{"inference_stats": {"success": {"count": N, "ns": N}, "queue": ...}}]} with numbers.
  virtual Result<nlohmann::json> stats(const std::string& model) = 0;
  // Sends the request once; OK when the server answered it successfully.
  virtual Status infer() = 0;
};

// `request` may be null for a client that only reads metadata and stats.
Result<std::unique_ptr<PerfClient>> make_perf_client(const PerfTransport& t, std::shared_ptr<const PerfRequest> request,
                                                     int worker_id);

}  // namespace gpuopt::cli
