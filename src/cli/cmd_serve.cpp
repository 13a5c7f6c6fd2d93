// `gpuopt serve`: KServe v2 / Triton-compatible inference server (flags mirror tritonserver).
#include <fmt/format.h>
#include <signal.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <filesystem>
#include <map>

#include "cli/command.h"
#include "cli/engine_option.h"
#include "cli/llm_runner_option.h"
#include "core/env.h"
#include "core/log.h"
#include "server/grpc_server.h"
#include "server/inference_server.h"
#include "server/openai/embeddings.h"
#include "server/request_body.h"
#include "server/openai/llm_models.h"

namespace gpuopt::cli {
namespace {

struct ServeOptions {
  std::string model_file;
  std::vector<std::string> repositories;  // --model-repository, once or more
  std::string http_address = "0.0.0.0";
  std::string grpc_address;     // "" = --http-address
  std::string metrics_address;  // "" = --http-address
  bool allow_http = true;
  bool strict_model_config = false;
  bool disable_auto_complete = false;
  bool exit_on_error = true;
  bool strict_readiness = true;
  int poll_secs = 15;
  std::string log_file;
  bool refused_sagemaker = false, refused_vertex = false, refused_ssl = false;
  std::vector<std::string> ignored;  // tritonserver flags given that have no effect here
  std::vector<std::string> ignored_values;
  std::vector<CLI::Option*> ignored_options;
  int http_port = 8000;
  int metrics_port = 8002;
  int grpc_port = 8001;
  bool allow_grpc = true;
  bool allow_metrics = true;
  bool allow_gpu_metrics = true;
  std::string control_mode = "none";
  std::vector<std::string> load_models;
  int exit_timeout_secs = 30;
  int log_verbose = 0;
  int http_threads = 0;
  int grpc_threads = 0;
  int64_t default_max_batch_size = 4;
  int64_t max_input_size = int64_t{64} << 20;
  int max_connections = 4096;
  int max_connections_per_client = 1024;
  double idle_timeout_secs = 10;
  double grpc_idle_timeout_secs = 120;
  int64_t max_request_memory = static_cast<int64_t>(server::kMaxRequestMemory);
  int64_t max_inflight_bytes = 0;  // 0 = a quarter of physical memory
  int64_t pinned_pool_bytes = static_cast<int64_t>(server::kDefaultPinnedPoolBytes);
  EngineFlags engine;  // --precision (models without gpuopt.precision), --cache-dir, --kernel
  bool no_cuda_graphs = false;
  std::string trace_file;
  int trace_rate = 1000;
  std::vector<std::string> embedding_models;  // NAME=DIR: /v1/embeddings
  // Generation models (vLLM's flag names for the engine).
  std::vector<std::string> llm_models;  // --llm-model [NAME=]DIR
  server::openai::LlmServeOptions llm;
  double request_timeout_secs = 0;
};

// --max-inflight-bytes 0: a quarter of the host's physical memory.
size_t inflight_budget(int64_t flag) {
  if (flag > 0) return static_cast<size_t>(flag);
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page <= 0) return size_t{4} << 30;
  return static_cast<size_t>(pages) * static_cast<size_t>(page) / 4;
}

// tritonserver's flags that are accepted and have no effect here (docs/coming-from-triton.md).
// Each takes a value, as in tritonserver; those that may repeat are marked.
struct IgnoredFlag {
  const char* name;
  bool repeats;
};
constexpr IgnoredFlag kIgnoredFlags[] = {
    {"--backend-directory", false},      {"--backend-config", true},
    {"--repoagent-directory", false},    {"--id", false},
    {"--log-info", false},               {"--log-warning", false},
    {"--log-error", false},              {"--log-format", false},
    {"--cuda-memory-pool-byte-size", true}, {"--min-supported-compute-capability", false},
    {"--buffer-manager-thread-count", false}, {"--model-load-thread-count", false},
    {"--response-cache-byte-size", false}, {"--cache-config", true},
    {"--rate-limit", false},             {"--rate-limit-resource", true},
    {"--metrics-interval-ms", false},    {"--allow-cpu-metrics", false},
    {"--trace-config", true},            {"--grpc-infer-allocation-pool-size", false},
    {"--grpc-keepalive-time", false},    {"--grpc-keepalive-timeout", false},
    {"--host-policy", true},             {"--model-namespacing", false},
};

// tritonserver's boolean values (true/false, on/off, 1/0, any case); normalised for CLI11.
CLI::Validator triton_bool() {
  return CLI::Validator(
      [](std::string& v) -> std::string {
        std::string l = v;
        std::transform(l.begin(), l.end(), l.begin(), [](unsigned char c) { return std::tolower(c); });
        if (l == "true" || l == "on" || l == "1" || l == "yes") v = "true";
        else if (l == "false" || l == "off" || l == "0" || l == "no") v = "false";
        else return fmt::format("'{}' is not a boolean (true, false, 1, 0)", v);
        return "";
      },
      "true|false", "triton_bool");
}

// --log-file: the log (stderr) appended to FILE from here on; the first fatal error is still
// printed on the terminal too (via the saved descriptor).
int g_terminal_stderr = -1;

int fail(const Status& s) {
  int code = report_error(s);
  if (g_terminal_stderr >= 0) {
    std::string line = fmt::format("gpuopt: error: {}\n", s.message());
    (void)!write(g_terminal_stderr, line.data(), line.size());
  }
  return code;
}

int run(const ServeOptions& o) {
  if (o.log_verbose > 0) set_log_level(o.log_verbose >= 2 ? LogLevel::debug : LogLevel::info);
  if (!o.model_file.empty() && !o.repositories.empty())
    return report_error(Status::InvalidArgument("give either MODEL.onnx or --model-repository DIR"), true);
  if (o.model_file.empty() && o.repositories.empty() && o.llm_models.empty())
    return report_error(Status::InvalidArgument("give MODEL.onnx, --model-repository DIR or --llm-model DIR"), true);
  auto llm = std::make_shared<server::openai::LlmServeOptions>(o.llm);
  llm->engine.default_timeout = std::chrono::milliseconds(static_cast<int64_t>(o.request_timeout_secs * 1000.0));
  for (const auto& spec : o.llm_models) {
    // NAME=DIR, or DIR (named after its folder).
    auto eq = spec.find('=');
    std::string dir = eq == std::string::npos ? spec : spec.substr(eq + 1);
    std::string name = eq == std::string::npos ? std::filesystem::path(dir).lexically_normal().filename().string()
                                               : spec.substr(0, eq);
    if (name.empty() || name == "." || name == "..")
      name = std::filesystem::absolute(dir).lexically_normal().parent_path().filename().string();
    std::error_code dec;
    if (!std::filesystem::is_directory(dir, dec))
      return report_error(Status::NotFound("--llm-model '{}' is not a folder", dir));
    llm->extra.emplace_back(name, dir);
  }
  if (o.refused_sagemaker || o.refused_vertex || o.refused_ssl)
    return report_error(Status::InvalidArgument("{} is not supported by gpuopt serve (docs/coming-from-triton.md)",
                                                o.refused_sagemaker ? "--allow-sagemaker=true"
                                                : o.refused_vertex  ? "--allow-vertex-ai=true"
                                                                    : "--grpc-use-ssl=true"),
                        true);
  if (!o.allow_http && !o.allow_grpc)
    return report_error(Status::InvalidArgument("--allow-http=false and --allow-grpc=false leave no endpoint"), true);
  if (!o.ignored.empty())
    fmt::print(stderr, "gpuopt serve: warning: accepted but ignored (no effect in gpuopt): {}\n",
               fmt::join(o.ignored, ", "));
  server::set_pinned_pool_capacity(static_cast<size_t>(o.pinned_pool_bytes));  // before the first request
  server::InferenceServerOptions so;
  so.repo.path = o.repositories.empty() ? o.model_file : o.repositories[0];
  if (o.repositories.size() > 1) so.repo.extra_paths.assign(o.repositories.begin() + 1, o.repositories.end());
  so.repo.strict_config = o.strict_model_config || o.disable_auto_complete;
  so.exit_on_error = o.exit_on_error;
  so.strict_readiness = o.strict_readiness;
  so.http_enabled = o.allow_http;
  std::error_code ec;
  so.llm = llm;
  for (const auto& p : o.repositories.empty() ? (o.model_file.empty() ? std::vector<std::string>{}
                                                                      : std::vector<std::string>{o.model_file})
                                              : o.repositories) {
    if (!std::filesystem::exists(p, ec)) return report_error(Status::NotFound("'{}' does not exist", p));
    if (!o.repositories.empty() && !std::filesystem::is_directory(p, ec))
      return report_error(Status::InvalidArgument("--model-repository '{}' is not a directory", p), true);
  }
  if (!o.model_file.empty() && std::filesystem::is_directory(o.model_file, ec))
    return report_error(Status::InvalidArgument("'{}' is a directory: use --model-repository", o.model_file), true);
  so.repo.loader = server::session_model_loader();
  so.repo.default_max_batch_size = o.default_max_batch_size;
  so.repo.cuda_devices = server::cuda_device_count();
  auto eo = engine_options(o.engine, Device::cpu());  // each instance's device is the repository's choice
  if (!eo.ok()) return report_error(eo.status());
  so.repo.precision = o.engine.precision;
  so.repo.cuda_graphs = !o.no_cuda_graphs;
  so.repo.cache_dir = eo->cache_dir;
  if (!o.engine.kernels.empty()) so.repo.kernels = eo->kernels;  // else the environment at each model's load
  if (o.control_mode == "none") {
    so.control_mode = server::ControlMode::kNone;
    if (!o.load_models.empty())
      return report_error(Status::InvalidArgument("--load-model needs --model-control-mode explicit"), true);
  } else if (o.control_mode == "explicit") {
    so.control_mode = server::ControlMode::kExplicit;
    so.load_models = o.load_models;
    if (!o.model_file.empty() && so.load_models.empty()) so.load_models = {"*"};
  } else {
    if (!o.model_file.empty())
      return report_error(Status::InvalidArgument("--model-control-mode poll needs --model-repository DIR"), true);
    if (!o.load_models.empty())
      return report_error(Status::InvalidArgument("--load-model needs --model-control-mode explicit"), true);
    so.control_mode = server::ControlMode::kPoll;
    so.poll_secs = o.poll_secs;
  }
  so.trace_file = o.trace_file;
  so.trace_rate = o.trace_rate;
  so.http.host = o.http_address;
  so.http.port = static_cast<uint16_t>(o.http_port);
  so.http.threads = o.http_threads;
  so.http.max_body_bytes = static_cast<size_t>(o.max_input_size);
  so.http.max_connections = static_cast<size_t>(o.max_connections);
  so.http.max_connections_per_client = static_cast<size_t>(o.max_connections_per_client);
  so.http.first_request_timeout = std::chrono::milliseconds(static_cast<int64_t>(o.idle_timeout_secs * 1000.0));
  so.http.inflight = std::make_shared<net::ByteBudget>(inflight_budget(o.max_inflight_bytes));
  so.request_limits.max_memory_bytes = static_cast<size_t>(o.max_request_memory);
  so.http.server_name = "gpuopt";
  if (o.allow_metrics) so.metrics_port = static_cast<uint16_t>(o.metrics_port);
  const std::string& metrics_host = o.metrics_address.empty() ? o.http_address : o.metrics_address;
  const std::string& grpc_host = o.grpc_address.empty() ? o.http_address : o.grpc_address;
  so.metrics_host = metrics_host;
  so.gpu_metrics = o.allow_gpu_metrics;
  if (o.allow_grpc) {
    so.grpc = std::make_shared<server::GrpcOptions>();
    so.grpc->host = grpc_host;
    so.grpc->port = static_cast<uint16_t>(o.grpc_port);
    so.grpc->max_message_bytes = static_cast<size_t>(o.max_input_size);
    so.grpc->idle_timeout = std::chrono::milliseconds(static_cast<int64_t>(o.grpc_idle_timeout_secs * 1000.0));
    so.grpc->threads = o.grpc_threads;
  }

  if (!o.embedding_models.empty()) {
    // /v1/embeddings (server/openai/embeddings.h): each NAME=DIR loaded now, on the GPU when there is one.
    auto models = std::make_shared<std::map<std::string, std::shared_ptr<server::openai::Embedder>, std::less<>>>();
    const std::string device = server::cuda_device_count() > 0 ? "cuda" : "cpu";
    for (const auto& spec : o.embedding_models) {
      auto eq = spec.find('=');
      if (eq == std::string::npos || eq == 0 || eq + 1 == spec.size())
        return report_error(Status::InvalidArgument("--embedding-model '{}': expected NAME=DIR", spec), true);
      auto e = server::openai::load_embedder(spec.substr(eq + 1), device);
      if (!e.ok()) return report_error(e.status().with_context(fmt::format("--embedding-model '{}'", spec)));
      (*models)[spec.substr(0, eq)] = *e;
    }
    so.extra_http_routes = [models](net::Router& r) {
      server::openai::add_embedding_routes(r, [models](std::string_view name) -> std::shared_ptr<server::openai::Embedder> {
        auto it = models->find(name);
        return it == models->end() ? nullptr : it->second;
      });
    };
  }

  if (!o.log_file.empty()) {
    int fd = ::open(o.log_file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) return report_error(Status::NotFound("--log-file: cannot open '{}' for appending", o.log_file));
    std::fflush(stderr);
    g_terminal_stderr = ::dup(2);
    ::dup2(fd, 2);
    ::close(fd);
  }

  // Block the shutdown signals before any thread starts so that only sigwait below sees them.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);

  auto server = server::InferenceServer::start(std::move(so));
  if (!server.ok()) return fail(server.status());
  auto& s = **server;
  for (const auto& m : s.repository().index(false))
    if (m.value("state", "") == "UNAVAILABLE" && m.value("reason", "") != "unloaded")
      fmt::print("model '{}' UNAVAILABLE: {}\n", m.value("name", ""), m.value("reason", ""));
  for (const auto& v : s.repository().ready_versions()) {
    // Start -> ready per model, and what the plan cache gave it (cold and warm starts compare here).
    std::string cache;
    if (v->plan_cache.state != "off") {
      cache = fmt::format(", plan cache {}", v->plan_cache.state);
      if (v->plan_cache.state == "warm") cache += fmt::format(" ({} choices)", v->plan_cache.entries);
      if (!v->plan_cache.note.empty()) cache += fmt::format(" ({})", v->plan_cache.note);
    }
    fmt::print("model '{}' version {} READY (max_batch_size {}, {} instance(s) at {}, start {:.2f} s{})\n", v->name,
               v->version_str, v->config.max_batch_size, v->batcher->instance_count(), v->precisions, v->start_s, cache);
  }
  for (const auto& m : s.llm_models().all())
    fmt::print("generation model '{}' READY on {} (context {} tokens{})\n", m->name, m->device, m->max_model_len,
               m->chat ? ", chat template" : "");
  if (o.allow_grpc) fmt::print("Started GRPCInferenceService at {}:{}\n", grpc_host, s.grpc_port());
  if (o.allow_http) fmt::print("Started HTTPService at {}:{}\n", o.http_address, s.http_port());
  if (o.allow_metrics) fmt::print("Started Metrics Service at {}:{}\n", metrics_host, s.metrics_port());
  if (o.control_mode == "poll")
    fmt::print("Polling the model repository every {} s\n", o.poll_secs);
  std::fflush(stdout);

  int sig = 0;
  sigwait(&set, &sig);
  fmt::print("Received {}, draining (exit timeout {} s)\n", sig == SIGTERM ? "SIGTERM" : "SIGINT", o.exit_timeout_secs);
  std::fflush(stdout);
  auto t0 = std::chrono::steady_clock::now();
  int64_t left = s.shutdown(std::chrono::seconds(o.exit_timeout_secs));
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (left > 0) {
    fmt::print("Exit timeout reached with {} request(s) in flight after {:.2f} s\n", left, secs);
    std::fflush(stdout);
    std::_Exit(1);  // a stuck model must not keep the process alive
  }
  fmt::print("Server stopped cleanly in {:.2f} s\n", secs);
  std::fflush(stdout);
  return kExitOk;
}

void setup(CLI::App& app) {
  auto* cmd = app.add_subcommand("serve", "Serve models over KServe v2 HTTP and gRPC (Triton-compatible) with dynamic batching");
  auto o = std::make_shared<ServeOptions>();
  cmd->add_option("model", o->model_file, "Serve one ONNX model file (name = file stem, version 1)");
  cmd->add_option("--model-repository,--model-store", o->repositories,
                  "Triton model repository directory (repeat for several: the models of all; a name in two is an "
                  "error)");
  cmd->add_option("--strict-model-config", o->strict_model_config,
                  "true: a model needs a config.pbtxt naming its inputs and outputs; false: what it leaves out is "
                  "derived from the model")
      ->check(triton_bool())
      ->capture_default_str();
  cmd->add_flag("--disable-auto-complete-config", o->disable_auto_complete, "Same as --strict-model-config=true");
  cmd->add_option("--exit-on-error", o->exit_on_error,
                  "true: a model that fails to load stops the start (exit 1); false: it is UNAVAILABLE with the "
                  "reason and the others serve")
      ->check(triton_bool())
      ->capture_default_str();
  cmd->add_option("--strict-readiness", o->strict_readiness,
                  "true: /v2/health/ready needs every model ready; false: a live server is ready")
      ->check(triton_bool())
      ->capture_default_str();
  cmd->add_option("--log-file", o->log_file, "Append the log (stderr) to FILE");
  cmd->add_option("--grpc-address", o->grpc_address, "Address of the gRPC endpoint (default: --http-address)");
  cmd->add_option("--metrics-address", o->metrics_address, "Address of the metrics endpoint (default: --http-address)");
  cmd->add_option("--allow-http", o->allow_http, "Serve the HTTP endpoint (false: gRPC and metrics only)")
      ->check(triton_bool())
      ->capture_default_str();
  cmd->add_option("--repository-poll-secs", o->poll_secs, "Seconds between re-scans in --model-control-mode poll")
      ->check(int_range(1, 86400))
      ->capture_default_str();
  cmd->add_option("--allow-sagemaker", o->refused_sagemaker, "Refused when true (no SageMaker endpoint)")
      ->check(triton_bool());
  cmd->add_option("--allow-vertex-ai", o->refused_vertex, "Refused when true (no Vertex AI endpoint)")
      ->check(triton_bool());
  cmd->add_option("--grpc-use-ssl", o->refused_ssl, "Refused when true (no TLS: terminate it in front)")
      ->check(triton_bool());
  for (const IgnoredFlag& f : kIgnoredFlags) {
    auto* opt = cmd->add_option(f.name, o->ignored_values, "tritonserver's flag: accepted, no effect here");
    opt->group("tritonserver flags accepted and ignored");
    if (!f.repeats) opt->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
    o->ignored_options.push_back(opt);
  }
  cmd->add_option("--embedding-model", o->embedding_models,
                  "NAME=DIR: serve /v1/embeddings for NAME from DIR (an ONNX encoder with tokenizer.json, or a "
                  "decoder checkpoint); repeatable");
  cmd->add_option("--trace-file", o->trace_file, "Write sampled requests' stages as a Chrome trace (docs/profile.md)");
  cmd->add_option("--trace-rate", o->trace_rate, "Trace one request in N (default 1000)")->check(int_range(1, 1000000000));
  cmd->add_option("--http-address", o->http_address, "Address to listen on")->capture_default_str();
  cmd->add_option("--http-port", o->http_port, "HTTP port (0 = any free port)")
      ->check(int_range(0, 65535))->capture_default_str();
  cmd->add_option("--grpc-port", o->grpc_port, "KServe v2 gRPC port (0 = any free port)")
      ->check(int_range(0, 65535))->capture_default_str();
  cmd->add_option("--allow-grpc", o->allow_grpc, "Serve the gRPC endpoint")->check(triton_bool())->capture_default_str();
  cmd->add_option("--http-thread-count", o->http_threads, "HTTP threads (0 = one per core)")
      ->check(int_range(0, 1024))->capture_default_str();
  cmd->add_option("--grpc-thread-count", o->grpc_threads, "gRPC threads, each polling a completion queue (0 = one per core)")
      ->check(int_range(0, 1024))->capture_default_str();
  cmd->add_option("--metrics-port", o->metrics_port, "Prometheus metrics port (0 = any free port)")
      ->check(int_range(0, 65535))->capture_default_str();
  cmd->add_option("--allow-metrics", o->allow_metrics, "Serve /metrics")->check(triton_bool())->capture_default_str();
  cmd->add_option("--allow-gpu-metrics", o->allow_gpu_metrics, "GPU metrics from NVML")
      ->check(triton_bool())
      ->capture_default_str();
  cmd->add_option("--model-control-mode", o->control_mode,
                  "none (load all at start), explicit (load/unload API) or poll (re-scan every --repository-poll-secs)")
      ->check(one_of({"none", "explicit", "poll"}))
      ->capture_default_str();
  cmd->add_option("--load-model", o->load_models, "Model to load at start in explicit mode ('*' = all)");
  cmd->add_option("--exit-timeout-secs", o->exit_timeout_secs, "Seconds to drain on SIGTERM/SIGINT")
      ->check(int_range(0, 86400))
      ->capture_default_str();
  cmd->add_option("--log-verbose", o->log_verbose, "Verbose logging level (0, 1, 2)")
      ->check(int_range(0, 2))
      ->capture_default_str();
  cmd->add_option("--default-max-batch-size", o->default_max_batch_size,
                  "max_batch_size for models without config.pbtxt that take any batch")
      ->check(int_range(0, kMaxBatch))
      ->capture_default_str();
  cmd->add_option("--http-max-input-size", o->max_input_size, "Largest request body in bytes (413 above; gRPC: largest request message, RESOURCE_EXHAUSTED above)")
      ->check(int_range(1))
      ->capture_default_str();
  add_precision_option(cmd, &o->engine.precision,
                       "fp32, fp16, bf16, int8 (a Q/DQ model: gpuopt quantize) or fp8 (a model with Fp8Gemm nodes) for "
                       "models without gpuopt.precision")
      ->capture_default_str();
  add_engine_flags(cmd, &o->engine, kCacheDirFlag | kKernelFlag);  // the log gives each model's cache state
  cmd->add_flag("--no-cuda-graphs", o->no_cuda_graphs,
                "GPU instances run node by node instead of replaying CUDA graphs (unless the model's "
                "config.pbtxt says optimization { cuda { graphs: true } })");
  cmd->add_option("--http-max-connections", o->max_connections, "Open connections at most (503 above)")
      ->check(int_range(1, 1 << 20))
      ->capture_default_str();
  cmd->add_option("--http-max-connections-per-client", o->max_connections_per_client,
                  "Open connections from one client address at most (503 above; 0 = no cap)")
      ->check(int_range(0, 1 << 20))
      ->capture_default_str();
  cmd->add_option("--http-idle-timeout", o->idle_timeout_secs,
                  "Seconds a new connection may wait before its first request's headers are in (then closed); "
                  "kept-alive connections that completed a request wait 120 s")
      ->check(real_range(0.001, 86400))
      ->capture_default_str();
  cmd->add_option("--grpc-idle-timeout", o->grpc_idle_timeout_secs,
                  "Seconds a gRPC connection may stay without a call in progress before it is closed")
      ->check(real_range(0.001, 86400))
      ->capture_default_str();
  cmd->add_option("--max-request-memory", o->max_request_memory,
                  "Bytes decoding one inference request may allocate (413 above)")
      ->check(int_range(1))
      ->capture_default_str();
  cmd->add_option("--max-inflight-bytes", o->max_inflight_bytes,
                  "Bytes all requests in flight may hold: bodies and decoded tensors (503 above, at once; "
                  "0 = a quarter of physical memory)")
      ->check(int_range(0))
      ->capture_default_str();
  cmd->add_option("--pinned-memory-pool-byte-size", o->pinned_pool_bytes,
                  "Page-locked host memory for request bodies and batches of GPU models, at most (beyond it: "
                  "ordinary memory; Triton's flag)")
      ->check(int_range(0))
      ->capture_default_str();
  cmd->add_option("--llm-model", o->llm_models,
                  "Serve a language model folder (config.json, *.safetensors, tokenizer.json) as NAME=DIR or DIR "
                  "(named after its folder); repeatable. Folders like it inside --model-repository are found too")
      ->group("Generation models");
  cmd->add_option("--llm-device", o->llm.device, "auto (cuda when present, else cpu), cpu, cuda or cuda:N")
      ->group("Generation models")
      ->capture_default_str();
  cmd->add_option("--dtype", o->llm.dtype, "auto (the checkpoint's on CUDA, fp32 on the CPU), fp16, bf16 or fp32")
      ->check(one_of({"auto", "fp16", "bf16", "fp32"}))
      ->group("Generation models")
      ->capture_default_str();
  cmd->add_option("--max-num-seqs", o->llm.engine.max_num_seqs, "Sequences in one engine step at most")
      ->check(int_range(1, 65536))
      ->group("Generation models")
      ->capture_default_str();
  cmd->add_option("--max-num-batched-tokens", o->llm.engine.max_num_batched_tokens,
                  "Tokens in one engine step at most (decodes + prefill chunks)")
      ->check(int_range(1, 1 << 24))
      ->group("Generation models")
      ->capture_default_str();
  cmd->add_option("--max-waiting", o->llm.engine.max_waiting,
                  "Requests queued per model at most; beyond it 429 at once")
      ->check(int_range(1, 1 << 24))
      ->group("Generation models")
      ->capture_default_str();
  cmd->add_option("--gpu-memory-utilization", o->llm.gpu_memory_utilization,
                  "CUDA: fraction of device memory for weights, activations and the KV cache")
      ->check(real_range(0.01, 1.0))
      ->group("Generation models")
      ->capture_default_str();
  cmd->add_option("--num-kv-blocks", o->llm.num_kv_blocks,
                  "KV-cache blocks (of 16 tokens) per model; 0 = from --gpu-memory-utilization (CUDA) or the "
                  "CPU runner's default")
      ->check(int_range(int64_t{0}, int64_t{1} << 40))
      ->group("Generation models")
      ->capture_default_str();
  cmd->add_option("--max-model-len", o->llm.max_model_len,
                  "Prompt + completion tokens at most (0 = the model's max_position_embeddings)")
      ->check(int_range(int64_t{0}, int64_t{1} << 40))
      ->group("Generation models")
      ->capture_default_str();
  cmd->add_flag("--no-enable-prefix-caching{false},--enable-prefix-caching", o->llm.engine.enable_prefix_caching,
                "Share full prompt blocks between requests (default on)")
      ->group("Generation models");
  cmd->add_option("--request-timeout", o->request_timeout_secs,
                  "Seconds a generation request may take from submission (0 = no limit)")
      ->check(real_range(0, 86400 * 7))
      ->group("Generation models")
      ->capture_default_str();
  add_kv_cache_dtype_option(cmd, &o->llm.kv_cache_dtype)->group("Generation models")->capture_default_str();
  cmd->add_flag("--quant-kernels", o->llm.quant_kernels,
                "CUDA, GPTQ/AWQ/FP8 language models: packed weights, quantized kernels (default: dequantize at load)");
  cmd->add_flag("--llm-random-weights", o->llm.random_weights,
                "Generation models get seeded random weights instead of their safetensors (tests, benchmarks)")
      ->group("Generation models");
  cmd->callback([o, cmd] {
    for (CLI::Option* opt : o->ignored_options)
      if (opt->count() > 0) o->ignored.push_back(opt->get_name());
    if (cmd->count("--repository-poll-secs") > 0 && o->control_mode != "poll")
      o->ignored.push_back("--repository-poll-secs (without --model-control-mode poll)");
    set_exit_code(run(*o));
  });
}
GPUOPT_REGISTER_COMMAND(40, setup);

}  // namespace
}  // namespace gpuopt::cli
