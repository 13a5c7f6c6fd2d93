// InferenceServer lifecycle and the non-inference endpoints (health, metadata, config, stats,
// repository control).
#include "server/inference_server.h"

#include "core/log.h"
#include "monitor/nvml.h"
#include "gpuopt/build_info.h"
#include "server/grpc_server.h"
#include "server/request_body.h"
#include "server/openai/llm_models.h"
#include "server/openai/routes.h"

namespace gpuopt::server {

using net::HttpRequest;
using net::HttpResponse;
using nlohmann::json;

int http_status_for(const Status& s) {
  switch (s.code()) {
    case StatusCode::kInvalidArgument:
    case StatusCode::kUnimplemented:
    case StatusCode::kFailedPrecondition:
    case StatusCode::kAlreadyExists:
      return 400;
    case StatusCode::kNotFound:
      return 404;
    case StatusCode::kUnavailable:
    case StatusCode::kDeadlineExceeded:
      return 503;
    default:
      return 500;
  }
}

const std::vector<std::string>& server_extensions() {
  static const std::vector<std::string> e = {"binary_tensor_data", "model_configuration", "model_repository",
                                             "statistics",         "schedule_policy",     "system_shared_memory",
                                             "cuda_shared_memory"};
  return e;
}

namespace {

// The control endpoints' bodies hold a few keys. A JSON DOM costs ~20x its text, so a large body
// is refused before parsing rather than allowed to cost a gigabyte.
constexpr size_t kMaxControlBody = size_t{64} << 10;

// The body as a JSON object, or the error answer.
Result<json> control_body(const HttpRequest& req) {
  if (req.body.size() > kMaxControlBody)
    return Status::InvalidArgument("request body of {} bytes is larger than the {} this endpoint accepts",
                                   req.body.size(), kMaxControlBody);
  json j = json::parse(req.body, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return Status::InvalidArgument("request body is not a JSON object");
  return j;
}

HttpResponse error_response(const Status& s) {
  return HttpResponse::error(http_status_for(s), s.message());
}

json io_metadata(const std::vector<TensorConfig>& v, int64_t max_batch) {
  json a = json::array();
  for (const auto& t : v) {
    Shape s = t.dims;
    if (max_batch > 0) s.insert(s.begin(), -1);
    a.push_back({{"name", t.name}, {"datatype", std::string(dtype_kserve_name(t.dtype))}, {"shape", s}});
  }
  return a;
}

}  // namespace

InferenceServer::InferenceServer(InferenceServerOptions options) : opt_(std::move(options)) {}

uint16_t InferenceServer::grpc_port() const { return grpc_ ? grpc_->port() : 0; }

InferenceServer::~InferenceServer() {
  shutdown(std::chrono::milliseconds(0));
}

bool InferenceServer::ready() const {
  return !shutting_down_.load() && (!opt_.strict_readiness || (repo_->all_ready() && llm_->failed().empty()));
}

void InferenceServer::post_task(std::function<void()> task) {
  {
    std::lock_guard<std::mutex> lk(task_mu_);
    tasks_.push_back(std::move(task));
  }
  task_cv_.notify_one();
}

void InferenceServer::loader_loop() {
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock<std::mutex> lk(task_mu_);
      task_cv_.wait(lk, [&] { return loader_exit_ || !tasks_.empty(); });
      if (tasks_.empty()) return;
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    task();
  }
}

Result<std::unique_ptr<InferenceServer>> InferenceServer::start(InferenceServerOptions options) {
  std::unique_ptr<InferenceServer> s(new InferenceServer(std::move(options)));
  s->repo_ = std::make_unique<Repository>(s->opt_.repo);
  GPUOPT_RETURN_IF_ERROR(s->repo_->duplicates());
  GPUOPT_RETURN_IF_ERROR(s->load_llm_models());
  std::vector<std::string> to_load;
  if (s->opt_.control_mode != ControlMode::kExplicit) {
    to_load = s->repo_->scan();
    if (to_load.empty() && s->opt_.control_mode == ControlMode::kNone && s->llm_->all().empty())
      return Status::NotFound("no models found in '{}'", s->opt_.repo.path);
  } else {
    auto llm_names = s->llm_dirs();
    for (const auto& m : s->opt_.load_models) {
      if (m == "*") {
        for (const auto& x : s->repo_->scan()) to_load.push_back(x);
      } else if (!llm_names.count(m)) {  // generation models: load_llm_models() took them
        to_load.push_back(m);
      }
    }
  }
  for (const auto& m : to_load) {
    Status st = s->repo_->load(m);
    if (st.ok()) continue;
    if (s->opt_.exit_on_error)
      return Status(st.code(), fmt::format("model '{}': {} (--exit-on-error=false serves the other models)", m,
                                           st.message()));
    GPUOPT_LOG(error, "model '{}' is UNAVAILABLE: {}", m, st.message());  // --exit-on-error=false
  }
  if (s->opt_.control_mode == ControlMode::kPoll)
    s->poller_ = std::make_unique<RepositoryPoller>(*s->repo_, std::chrono::seconds(s->opt_.poll_secs),
                                                   [srv = s.get()] { srv->poll_llm(); });
  if (s->opt_.gpu_metrics && s->opt_.metrics_port) {
    auto n = nvml::Nvml::load();
    if (n.ok())
      s->nvml_ = *n;
    else
      GPUOPT_LOG(info, "metrics: no GPU metrics ({})", n.status().message());
  }
  if (!s->opt_.trace_file.empty()) {
    GPUOPT_ASSIGN_OR_RETURN(s->tracer_, RequestTracer::open(s->opt_.trace_file, s->opt_.trace_rate));
  }
  s->opt_.request_limits.inflight = s->opt_.http.inflight;
  s->loader_ = std::thread([p = s.get()] { p->loader_loop(); });
  // Large binary bodies: straight from the socket, aligned, pinned on a host with a GPU.
  if (!s->opt_.http.body_buffer) s->opt_.http.body_buffer = infer_body_buffers(cuda_device_count() > 0);
  if (s->opt_.http_enabled) {
    GPUOPT_ASSIGN_OR_RETURN(s->http_, net::HttpServer::start(s->opt_.http, s->routes()));
  }
  if (s->opt_.grpc) {
    auto g = GrpcServer::start(s.get(), *s->opt_.grpc);
    if (!g.ok()) return g.status();
    s->grpc_ = std::move(g).value();
  }
  if (s->opt_.metrics_port) {
    net::Router mr;
    InferenceServer* self = s.get();
    mr.get("/metrics", [self](const HttpRequest&) {
      return HttpResponse::text(200, self->metrics_text(), "text/plain; version=0.0.4; charset=utf-8");
    });
    net::ServerOptions mo;
    mo.host = s->opt_.metrics_host;
    mo.port = *s->opt_.metrics_port;
    mo.threads = 1;
    mo.descriptor_share = 0.05;  // a scraper or two; the rest stays with HTTP and gRPC
    auto m = net::HttpServer::start(mo, std::move(mr));
    if (!m.ok()) return m.status().with_context("metrics endpoint");
    s->metrics_ = std::move(m).value();
  }
  return s;
}

int64_t InferenceServer::shutdown(std::chrono::milliseconds timeout) {
  if (shutdown_called_.exchange(true)) return 0;
  shutting_down_ = true;
  if (poller_) poller_->stop();  // no loads start during the drain
  auto deadline = std::chrono::steady_clock::now() + timeout;
  {
    std::unique_lock<std::mutex> lk(drain_mu_);
    drain_cv_.wait_until(lk, deadline, [&] { return pending_.load() == 0; });
  }
  int64_t left = pending_.load();
  if (left > 0) GPUOPT_LOG(warn, "shutdown: {} request(s) still unanswered at the exit timeout", left);
  {
    std::lock_guard<std::mutex> lk(task_mu_);
    loader_exit_ = true;
  }
  task_cv_.notify_all();
  if (loader_.joinable()) loader_.join();
  auto remaining = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
  if (remaining.count() < 0) remaining = std::chrono::milliseconds(0);
  // Answers already handed to connections get written during the HTTP grace period.
  if (http_) http_->stop(std::max(remaining, std::chrono::milliseconds(200)));
  // Every accepted inference is answered by now; what is left are idle streams and connections.
  if (grpc_) grpc_->stop(std::chrono::milliseconds(200));
  if (left == 0) repo_->stop_all();  // otherwise a stuck model would block the exit
  if (llm_) llm_->stop(std::chrono::milliseconds(0));
  if (metrics_) metrics_->stop(std::chrono::milliseconds(200));
  stopped_ = true;
  return left;
}

void InferenceServer::handle_load(HttpRequest&& req, net::Responder done, bool load) {
  if (opt_.control_mode != ControlMode::kExplicit) {
    done(HttpResponse::error(400,
                             "explicit model load / unload is not allowed: start the server with "
                             "--model-control-mode explicit"));
    return;
  }
  if (shutting_down_) {
    done(HttpResponse::error(503, "server is shutting down"));
    return;
  }
  std::string name(req.param("model"));
  if (!req.body.empty()) {
    auto parsed = control_body(req);
    if (!parsed.ok()) {
      done(error_response(parsed.status()));
      return;
    }
    const json& j = *parsed;
    if (j.contains("parameters") && j["parameters"].is_object())
      for (auto& [k, v] : j["parameters"].items())
        if (k == "config" || k.rfind("file:", 0) == 0) {
          done(HttpResponse::error(400, "load parameter '" + k + "' (config/file override) is not supported"));
          return;
        }
  }
  control_model(name, load, [done](Status s) {
    if (s.ok())
      done(HttpResponse::json(200, "{}"));
    else
      done(HttpResponse::error(s.code() == StatusCode::kNotFound ? 400 : http_status_for(s), s.message()));
  });
}

void InferenceServer::control_model(const std::string& name, bool load, std::function<void(Status)> done) {
  if (control_llm(name, load, done)) return;
  post_task([this, name, done = std::move(done), load] {
    Status s = load ? repo_->load(name) : repo_->unload(name);
    if (!s.ok())
      s = Status(s.code(), (load ? "failed to load '" : "failed to unload '") + net::printable(name) + "': " + s.message());
    done(s);
  });
}

HttpResponse InferenceServer::stats_response(const HttpRequest& q) const {
  std::string name(q.param("model")), version(q.param("version"));
  json a = json::array();
  if (name.empty()) {
    for (auto& v : repo_->ready_versions()) a.push_back(v->stats->json(v->name, v->version_str));
  } else {
    auto v = repo_->find(name, version);
    if (!v.ok()) return error_response(v.status());
    if (version.empty()) {
      for (auto& x : repo_->ready_versions())
        if (x->name == name) a.push_back(x->stats->json(x->name, x->version_str));
    } else {
      a.push_back((*v)->stats->json((*v)->name, (*v)->version_str));
    }
  }
  return HttpResponse::json(200, json_text(json{{"model_stats", a}}));
}

net::Router InferenceServer::routes() {
  net::Router r;
  if (opt_.extra_http_routes) opt_.extra_http_routes(r);
  // Before /v2/models/{model}: the first matching route wins.
  r.get("/v2/models/stats", [this](const HttpRequest& q) { return stats_response(q); });
  r.get("/v2/health/live", [this](const HttpRequest&) {
    return live() ? HttpResponse::json(200, "") : HttpResponse::error(503, "not live");
  });
  r.get("/v2/health/ready", [this](const HttpRequest&) {
    return ready() ? HttpResponse::json(200, "") : HttpResponse::error(503, "server is not ready");
  });
  r.get("/v2", [](const HttpRequest&) {
    json j = {{"name", "gpuopt"}, {"version", GPUOPT_VERSION_STRING}, {"extensions", server_extensions()}};
    return HttpResponse::json(200, json_text(j));
  });
  auto metadata = [this](const HttpRequest& q) {
    auto v = repo_->find(std::string(q.param("model")), std::string(q.param("version")));
    if (auto m = llm_->find(std::string(q.param("model"))); !v.ok() && m)
      return HttpResponse::json(200, json_text(openai::generate_model_metadata(*m)));
    if (!v.ok()) return error_response(v.status());
    const LoadedVersion& lv = **v;
    json versions = json::array();
    for (auto& x : repo_->ready_versions())
      if (x->name == lv.name) versions.push_back(x->version_str);
    json j = {{"name", lv.name},
              {"versions", versions},
              {"platform", lv.config.platform},
              {"inputs", io_metadata(lv.config.inputs, lv.config.max_batch_size)},
              {"outputs", io_metadata(lv.config.outputs, lv.config.max_batch_size)}};
    return HttpResponse::json(200, json_text(j));
  };
  r.get("/v2/models/{model}", metadata);
  r.get("/v2/models/{model}/versions/{version}", metadata);
  auto model_ready = [this](const HttpRequest& q) {
    auto v = repo_->find(std::string(q.param("model")), std::string(q.param("version")));
    if (!v.ok() && llm_->find(std::string(q.param("model"))))
      return shutting_down_ ? HttpResponse::error(503, "server is shutting down") : HttpResponse::json(200, "");
    // Triton answers 400 for a known model that is not ready (failed to load, unloaded).
    if (!v.ok()) return v.status().code() == StatusCode::kUnavailable ? HttpResponse::error(400, v.status().message())
                                                                       : error_response(v.status());
    return shutting_down_ ? HttpResponse::error(503, "server is shutting down") : HttpResponse::json(200, "");
  };
  r.get("/v2/models/{model}/ready", model_ready);
  r.get("/v2/models/{model}/versions/{version}/ready", model_ready);
  auto config = [this](const HttpRequest& q) {
    auto v = repo_->find(std::string(q.param("model")), std::string(q.param("version")));
    if (!v.ok()) return error_response(v.status());
    return HttpResponse::json(200, json_text(model_config_json((*v)->config)));
  };
  r.get("/v2/models/{model}/config", config);
  r.get("/v2/models/{model}/versions/{version}/config", config);
  auto stats = [this](const HttpRequest& q) { return stats_response(q); };
  r.get("/v2/models/{model}/stats", stats);
  r.get("/v2/models/{model}/versions/{version}/stats", stats);
  r.post("/v2/repository/index", [this](const HttpRequest& q) {
    bool ready_only = false;
    if (!q.body.empty()) {
      auto parsed = control_body(q);
      if (!parsed.ok()) return error_response(parsed.status());
      const json& j = *parsed;
      if (j.contains("ready") && j["ready"].is_boolean()) ready_only = j["ready"].get<bool>();
    }
    json index = repo_->index(ready_only);
    llm_index(index, ready_only);
    return HttpResponse::json(200, json_text(index));
  });
  r.add_async("POST", "/v2/repository/models/{model}/load",
              [this](HttpRequest&& q, net::Responder d) { handle_load(std::move(q), d, true); });
  r.add_async("POST", "/v2/repository/models/{model}/unload",
              [this](HttpRequest&& q, net::Responder d) { handle_load(std::move(q), d, false); });
  add_shared_memory_routes(r);
  add_llm_routes(r);
  r.add_async("POST", "/v2/models/{model}/infer",
              [this](HttpRequest&& q, net::Responder d) { handle_infer(std::move(q), d); });
  r.add_async("POST", "/v2/models/{model}/versions/{version}/infer",
              [this](HttpRequest&& q, net::Responder d) { handle_infer(std::move(q), d); });
  return r;
}

}  // namespace gpuopt::server
