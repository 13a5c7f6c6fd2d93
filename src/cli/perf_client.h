// `gpuopt perf`'s connection to the server under test: KServe v2 over HTTP or gRPC (-i), with
// the input and output tensors in the request/response or in shared memory (--shared-memory
// system|cuda, as perf_analyzer). One PerfClient per worker thread; each registers its own
// regions with the server and unregisters them when it is destroyed.
//
//   PerfTransport t{.protocol = "grpc", .host = "127.0.0.1", .port = 8001};
//   GPUOPT_ASSIGN_OR_RETURN(auto c, make_perf_client(t, nullptr, 0));   // metadata and stats only
//   GPUOPT_ASSIGN_OR_RETURN(nlohmann::json meta, c->metadata("simple"));
//   auto work = std::make_shared<PerfWorkload>(...);                   // built from the metadata
//   GPUOPT_ASSIGN_OR_RETURN(auto w, make_perf_client(t, work, 1));
//   GPUOPT_RETURN_IF_ERROR(w->infer(0, nullptr));                      // request 0 of the workload
//   std::vector<std::pair<std::string, Tensor>> outs;
//   GPUOPT_RETURN_IF_ERROR(w->infer(1, &outs));                        // request 1, its outputs decoded
#pragma once

#include "cli/perf_data.h"
#include "core/status.h"
#include "core/tensor.h"

#include <nlohmann/json.hpp>

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace gpuopt::cli {

struct PerfTransport {
  std::string protocol = "http";       // http or grpc
  std::string host = "127.0.0.1";
  uint16_t port = 8000;
  std::string shared_memory = "none";  // none, system or cuda
  size_t output_shm_bytes = 100 << 10;  // room per output in shared memory (--output-shared-memory-size)
};

// What every worker sends: the requests (perf_data.h: the HTTP body as build_body or
// load_input_data makes it, binary or JSON tensors, and optional expected outputs), cycled
// through by index, and the outputs the model has (one shared-memory output slot each).
struct PerfWorkload {
  std::string model;
  bool binary = true;  // the bodies use the binary tensor extension
  std::vector<std::string> outputs;
  std::vector<PerfRequest> requests;
};

class PerfClient {
 public:
  virtual ~PerfClient() = default;
  // Model metadata in KServe v2's JSON form ({"name", "inputs": [{"name","datatype","shape"}], "outputs"}).
  virtual Result<nlohmann::json> metadata(const std::string& model) = 0;
  // {"model_stats": [{"inference_stats": {"success": {"count": N, "ns": N}, "queue": ...}}]} with numbers.
  virtual Result<nlohmann::json> stats(const std::string& model) = 0;
  // Sends request `index` of the workload once; OK when the server answered it successfully.
  // With `outputs`, the answer's output tensors are decoded into it (read back from the
  // shared-memory region when outputs go there), for check_outputs.
  virtual Status infer(size_t index, std::vector<std::pair<std::string, Tensor>>* outputs) = 0;

  // perf -a: keeps `inflight` requests in flight at once (request next_index() each time one
  // starts) until `stop`, calling done(index, latency ns, status, outputs) for every answer on
  // this thread (outputs decoded when `decode`). gRPC only; the HTTP client says it cannot.
  using AsyncDone = std::function<void(size_t, uint64_t, Status, const std::vector<std::pair<std::string, Tensor>>&)>;
  virtual Status run_async(int inflight, const std::function<size_t()>& next_index, const std::atomic<bool>& stop,
                           bool decode, const AsyncDone& done) {
    (void)inflight, (void)next_index, (void)stop, (void)decode, (void)done;
    return Status::Unimplemented("asynchronous requests (-a) are made over gRPC only");
  }
};

// `work` may be null for a client that only reads metadata and stats.
Result<std::unique_ptr<PerfClient>> make_perf_client(const PerfTransport& t, std::shared_ptr<const PerfWorkload> work,
                                                     int worker_id);

}  // namespace gpuopt::cli
