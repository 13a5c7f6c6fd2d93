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

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
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

enum class ControlMode { kNone, kExplicit };

struct InferenceServerOptions {
  RepositoryOptions repo;
  ControlMode control_mode = ControlMode::kNone;
  std::vector<std::string> load_models;  // explicit mode: loaded at start ("*" = all)
  net::ServerOptions http;               // port 8000 by default in the CLI
  // Limits of one inference request (nesting, tensors, elements, memory). The server-wide
  // in-flight budget goes in http.inflight; start() shares it with the decoder.
  DecodeLimits request_limits;
  std::optional<uint16_t> metrics_port;  // unset = no metrics endpoint
  std::string metrics_host = "0.0.0.0";
  bool gpu_metrics = true;  // NVML metrics when a driver is present
  std::string trace_file;   // request stages as a Chrome trace (request_trace.h); "" = none
  int trace_rate = 1000;    // trace one request in this many
};

class InferenceServer {
 public:
  static Result<std::unique_ptr<InferenceServer>> start(InferenceServerOptions options);
  ~InferenceServer();

  uint16_t http_port() const { return http_->port(); }
  uint16_t metrics_port() const { return metrics_ ? metrics_->port() : 0; }
  bool live() const { return !stopped_.load(); }
  bool ready() const;
  // Readiness false, new inference requests 503, waits for accepted requests to be answered
  // (up to `timeout`), stops the batchers and the HTTP servers. Returns the requests still
  // unanswered at the deadline (0 on a clean drain).
  int64_t shutdown(std::chrono::milliseconds timeout);
  std::string metrics_text() const;
  Repository& repository() { return *repo_; }

 private:
  explicit InferenceServer(InferenceServerOptions options);
  net::Router routes();
  void handle_infer(net::HttpRequest&& req, net::Responder done);
  net::HttpResponse stats_response(const net::HttpRequest& req) const;
  void handle_load(net::HttpRequest&& req, net::Responder done, bool load);
  void loader_loop();
  void post_task(std::function<void()> task);

  InferenceServerOptions opt_;
  std::unique_ptr<RequestTracer> tracer_;  // before repo_: outlives the batchers that call it
  std::unique_ptr<Repository> repo_;
  std::unique_ptr<net::HttpServer> http_;
  std::unique_ptr<net::HttpServer> metrics_;
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
