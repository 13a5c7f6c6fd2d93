// The inference server: KServe v2 / Triton HTTP endpoints over a model repository, a metrics
// endpoint with Triton's metric names, and graceful shutdown.
//
//   InferenceServerOptions o;
//   o.repo.path = "models";
//   o.repo.loader = session_model_loader();
//   o.http.port = 8000;
//   o.metrics_port = 8002;
//   GPUOPT_ASSIGN_OR_RETURN(auto server, InferenceServer::start(std::move(o)));
//   ... wait for SIGTERM ...
//   server->shutdown(std::chrono::seconds(30));  // not ready, 503 for new work, drain, exit
#pragma once

#include "net/http.h"
#include "server/kserve.h"
#include "server/repository.h"
#include "server/request_trace.h"
#include "server/shared_memory.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace gpuopt::nvml {
class Nvml;
}

namespace gpuopt::server {

namespace openai {
class LlmModels;
struct LlmServeOptions;
}  // namespace openai

class GrpcServer;
struct GrpcOptions;

enum class ControlMode { kNone, kExplicit, kPoll };

struct InferenceServerOptions {
  RepositoryOptions repo;
  ControlMode control_mode = ControlMode::kNone;
  std::vector<std::string> load_models;  // explicit mode: loaded at start ("*" = all)
  int poll_secs = 15;                    // poll mode: seconds between re-scans of the repository
  // false: a model that fails to load at start is UNAVAILABLE (with the reason) and the rest
  // serve; true: the start fails (tritonserver's --exit-on-error).
  bool exit_on_error = true;
  // true: /v2/health/ready needs every model ready; false: a live server is ready.
  bool strict_readiness = true;
  bool http_enabled = true;  // false: no HTTP endpoint (gRPC and metrics only)
  net::ServerOptions http;               // port 8000 by default in the CLI
  // Limits of one inference request (nesting, tensors, elements, memory). The server-wide
  // in-flight budget goes in http.inflight; start() shares it with the decoder.
  DecodeLimits request_limits;
  std::optional<uint16_t> metrics_port;  // unset = no metrics endpoint
  std::string metrics_host = "0.0.0.0";
  bool gpu_metrics = true;  // NVML metrics when a driver is present
  std::string trace_file;   // request stages as a Chrome trace (request_trace.h); "" = none
  int trace_rate = 1000;    // trace one request in this many (HTTP and gRPC alike)
  // The KServe v2 gRPC endpoint (unset = none); same models, batcher, limits, drain and tracing.
  std::shared_ptr<GrpcOptions> grpc;
  // More HTTP routes, added before the v2 ones (the OpenAI routes: server/openai/).
  std::function<void(net::Router&)> extra_http_routes;
  // Generation models (server/openai): folders of the repositories that hold a language model,
  // and those named on the command line, served through the OpenAI API and Triton's generate
  // extension. Null: the defaults.
  std::shared_ptr<openai::LlmServeOptions> llm;
};

// The protocol extensions both endpoints report in server metadata.
const std::vector<std::string>& server_extensions();

// A finished inference, for the protocol that encodes it (HTTP JSON/binary or gRPC).
struct InferReply {
  ResponseMeta meta;
  std::vector<std::pair<std::string, Tensor>> outputs;  // in the order the client asked for
  std::vector<bool> binary;                             // HTTP: binary_data of each output
  std::vector<std::optional<ShmRef>> shm;               // outputs already written to shared memory
};
using InferDone = std::function<void(Result<InferReply>)>;

// A request's time on the wire, which only its protocol sees (the trace's "network" stages).
struct WireTimes {
  uint64_t received_ns = 0;  // its first byte was read (now_ns clock; 0: the protocol cannot tell)
  // Set by submit_infer for a traced request before `done` runs. The protocol calls it once, from
  // any thread, with when its answer was ready to send and when the last byte was written (0: never).
  std::function<void(uint64_t ready_ns, uint64_t written_ns)> sent;
};

class InferenceServer {
 public:
  static Result<std::unique_ptr<InferenceServer>> start(InferenceServerOptions options);
  ~InferenceServer();

  uint16_t http_port() const { return http_ ? http_->port() : 0; }
  uint16_t metrics_port() const { return metrics_ ? metrics_->port() : 0; }
  uint16_t grpc_port() const;  // 0 without a gRPC endpoint
  bool live() const { return !stopped_.load(); }
  bool ready() const;
  // Readiness false, new inference requests 503 (gRPC UNAVAILABLE), waits for accepted requests
  // to be answered (up to `timeout`), stops the batchers, the HTTP and gRPC servers. Returns the requests still
  // unanswered at the deadline (0 on a clean drain).
  int64_t shutdown(std::chrono::milliseconds timeout);
  std::string metrics_text() const;
  Repository& repository() { return *repo_; }
  openai::LlmModels& llm_models() { return *llm_; }
  SharedMemoryManager& shared_memory() { return shm_; }
  bool shutting_down() const { return shutting_down_.load(); }
  // Reads shared-memory inputs, checks the request against the model's config and queues it on
  // the model's batcher; `done` is called exactly once (from a batcher thread, or at once on an
  // error). Statistics, the in-flight budget hold and the shutdown drain are handled here.
  // `wire` (optional): a traced request's network stages, recorded once the protocol calls
  // wire->sent; without it the trace is recorded when `done` returns.
  void submit_infer(std::shared_ptr<LoadedVersion> v, InferRequest&& request, uint64_t t_start, InferDone done,
                    std::shared_ptr<WireTimes> wire = nullptr);
  // Explicit model control (HTTP and gRPC): runs on the loader thread, `done` gets the outcome.
  void control_model(const std::string& name, bool load, std::function<void(Status)> done);
  ControlMode control_mode() const { return opt_.control_mode; }
  bool tracing() const { return tracer_ != nullptr; }  // --trace-file: requests are sampled into a trace
  const DecodeLimits& request_limits() const { return opt_.request_limits; }

 private:
  explicit InferenceServer(InferenceServerOptions options);
  net::Router routes();
  void handle_infer(net::HttpRequest&& req, net::Responder done);
  net::HttpResponse stats_response(const net::HttpRequest& req) const;
  void handle_load(net::HttpRequest&& req, net::Responder done, bool load);
  void add_shared_memory_routes(net::Router& r);  // shm_http.cpp
  Status load_llm_models();                       // server/openai/serve_llm.cpp
  void add_llm_routes(net::Router& r);            // server/openai/serve_llm.cpp
  // The generation models' folders in the repositories (name -> folder), and their share of the
  // model-control modes (server/openai/serve_llm.cpp): explicit load/unload, poll, the index.
  std::map<std::string, std::filesystem::path> llm_dirs() const;
  bool control_llm(const std::string& name, bool load, std::function<void(Status)>& done);
  void poll_llm();
  void llm_index(nlohmann::json& index, bool ready_only) const;
  void loader_loop();
  void post_task(std::function<void()> task);

  InferenceServerOptions opt_;
  std::unique_ptr<RequestTracer> tracer_;  // before repo_: outlives the batchers that call it
  SharedMemoryManager shm_;                // likewise: batcher callbacks write outputs into it
  std::unique_ptr<Repository> repo_;
  std::unique_ptr<openai::LlmModels> llm_;  // generation models (never null after start)
  std::unique_ptr<RepositoryPoller> poller_;  // poll mode
  std::map<std::string, std::string> llm_known_;  // poll mode: generation model -> its files' fingerprint
  std::unique_ptr<net::HttpServer> http_;
  std::unique_ptr<net::HttpServer> metrics_;
  std::unique_ptr<GrpcServer> grpc_;
  std::shared_ptr<nvml::Nvml> nvml_;

  std::atomic<bool> shutting_down_{false};
  std::atomic<bool> stopped_{false};  // live until the drain is over
  std::atomic<bool> shutdown_called_{false};
  std::atomic<int64_t> pending_{0};  // accepted inference requests not yet answered
  std::mutex drain_mu_;
  std::condition_variable drain_cv_;

  // Loads and unloads run here, off the request threads.
  std::thread loader_;
  std::mutex task_mu_;
  std::condition_variable task_cv_;
  std::deque<std::function<void()>> tasks_;
  bool loader_exit_ = false;
};


// Status -> HTTP code as Triton answers: 400 bad request, 404 unknown, 503 unavailable/timeout.
int http_status_for(const Status& s);

}  // namespace gpuopt::server
