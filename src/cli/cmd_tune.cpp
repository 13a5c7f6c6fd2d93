// `gpuopt tune MODEL` (or --model-repository DIR -m NAME): search batch size, precision,
// instances and queue delay under latency/memory/throughput constraints; write the chosen
// config.pbtxt as a ready model repository, tune.json and an HTML/SVG report (docs/tune.md).
#include "backends/backend.h"
#include "cli/command.h"
#include "cli/engine_option.h"
#include "cli/device_option.h"
#include "core/table.h"
#include "profile/inputs.h"
#include "tune/process.h"
#include "tune/tune.h"

#include <fmt/format.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace gpuopt::cli {
namespace {

namespace fs = std::filesystem;

struct Options {
  std::string model, repository, name;
  std::string mode = "offline";
  std::string device = "cpu";
  std::vector<std::string> precisions;
  int64_t max_batch = 256;
  std::vector<int> instances{1, 2};
  std::vector<int64_t> delays{0, 1000};
  double latency_budget_ms = 0;
  size_t memory_limit = 0;  // bytes; 0: none
  double min_throughput = 0;
  double time_budget_s = 0;
  int iterations = 10;
  int measurement_ms = 1000;
  int max_concurrency = 64;
  std::vector<std::string> dims;
  std::vector<std::pair<std::string, std::string>> kernels;  // --kernel NAME=VALUE
  std::string output_dir;
  bool json = false;
};

// DIR/NAME/<highest version>/model.onnx
Result<std::string> model_in_repository(const std::string& dir, const std::string& name) {
  std::error_code ec;
  const fs::path m = fs::path(dir) / name;
  if (!fs::is_directory(m, ec)) return Status::NotFound("--model-repository: no model folder {}", m.string());
  long best = -1;
  for (const auto& e : fs::directory_iterator(m, ec)) {
    const std::string v = e.path().filename().string();
    if (!e.is_directory() || v.empty() || v.find_first_not_of("0123456789") != std::string::npos) continue;
    if (fs::exists(e.path() / "model.onnx", ec)) best = std::max(best, std::atol(v.c_str()));
  }
  if (best < 0) return Status::NotFound("--model-repository: no {}/<version>/model.onnx", m.string());
  return (m / std::to_string(best) / "model.onnx").string();
}

void print_progress(const tune::Progress& p, bool tty) {
  const int width = 24;
  const int filled = p.expected > 0 ? std::min(width, width * p.done / p.expected) : 0;
  const std::string bar = std::string(static_cast<size_t>(filled), '#') + std::string(static_cast<size_t>(width - filled), '.');
  const std::string eta = p.done > 0 ? fmt::format("ETA {:.0f} s", p.eta_s) : "ETA ?";
  const std::string line = fmt::format("[{}] {}/{} points, {:.1f} s, {}  {}", bar, p.done, p.expected, p.elapsed_s, eta, p.what);
  if (tty) std::fprintf(stderr, "\r%-150s", line.c_str());
  else std::fprintf(stderr, "%s\n", line.c_str());
  std::fflush(stderr);
}

int run(const Options& o) {
  tune::TuneOptions t;
  if (o.model.empty() == o.repository.empty())
    return report_error(Status::InvalidArgument("give MODEL.onnx or --model-repository DIR -m NAME"), true);
  if (!o.repository.empty()) {
    if (o.name.empty()) return report_error(Status::InvalidArgument("--model-repository needs -m NAME"), true);
    auto m = model_in_repository(o.repository, o.name);
    if (!m.ok()) return report_error(m.status());
    t.model = *m;
    t.model_name = o.name;
  } else {
    std::error_code ec;
    if (!fs::is_regular_file(o.model, ec)) return report_error(Status::NotFound("model '{}' does not exist", o.model));
    t.model = o.model;
    t.model_name = o.name.empty() ? fs::path(o.model).stem().string() : o.name;
  }
  t.mode = o.mode;
  t.device = o.device;
  t.precisions = o.precisions;
  t.kernels = o.kernels;
  t.max_batch = o.max_batch;
  t.instances = o.instances;
  t.delays_us = o.delays;
  t.latency_budget_ms = o.latency_budget_ms;
  t.min_throughput = o.min_throughput;
  t.time_budget_s = o.time_budget_s;
  t.iterations = o.iterations;
  t.measurement_ms = o.measurement_ms;
  t.max_concurrency = o.max_concurrency;
  if (o.memory_limit > 0) t.memory_limit = o.memory_limit;
  auto dims = profile::parse_dims(o.dims);
  if (!dims.ok()) return report_error(dims.status(), true);
  t.dims = *dims;
  const std::string out = o.output_dir.empty() ? "tune-" + t.model_name : o.output_dir;
  std::error_code ec;
  fs::create_directories(out, ec);
  if (ec) return report_error(Status::InvalidArgument("--output-dir '{}': {}", out, ec.message()));
  t.work_dir = (fs::path(out) / "work").string();
  if (t.mode == "online") {
    fs::create_directories(t.work_dir, ec);
    t.gpuopt_exe = tune::self_exe();
  }

  const bool tty = isatty(2);
  auto r = tune::run_tune(t, [&](const tune::Progress& p) { print_progress(p, tty); });
  if (tty) std::fprintf(stderr, "\n");
  if (!r.ok()) return report_error(r.status());

  // The chosen point as a ready model repository: OUT/repository/NAME/{config.pbtxt,1/model.onnx}.
  std::string config_path;
  if (r->chosen >= 0) {
    const fs::path mdir = fs::path(out) / "repository" / t.model_name;
    fs::create_directories(mdir / "1", ec);
    fs::remove(mdir / "1" / "model.onnx", ec);
    fs::create_symlink(fs::absolute(t.model), mdir / "1" / "model.onnx", ec);
    if (ec) return report_error(Status::Internal("cannot link the model into {}: {}", (mdir / "1").string(), ec.message()));
    config_path = (mdir / "config.pbtxt").string();
    std::ofstream(config_path) << tune::config_pbtxt(*r);
  }
  nlohmann::json j = tune::result_json(*r);
  j["config_file"] = config_path.empty() ? nlohmann::json(nullptr) : nlohmann::json(config_path);
  j["report"] = (fs::path(out) / "report.html").string();
  std::ofstream(fs::path(out) / "tune.json") << j.dump(2) << "\n";
  if (Status st = tune::write_report(*r, out); !st.ok()) return report_error(st);
  if (o.json) {
    fmt::print("{}\n", j.dump(2));
  } else {
    fmt::print("{}", tune::render_table(*r));
    if (!config_path.empty())
      fmt::print("config written to {} (serve it: gpuopt serve --model-repository {})\n", config_path,
                 (fs::path(out) / "repository").string());
    fmt::print("report: {}  json: {}\n", (fs::path(out) / "report.html").string(), (fs::path(out) / "tune.json").string());
  }
  return r->chosen >= 0 ? kExitOk : kExitRuntimeError;
}

void setup(CLI::App& app) {
  auto o = std::make_shared<Options>();
  auto* cmd = app.add_subcommand("tune", "Find the best batch size, precision, instances and queue delay under constraints");
  cmd->add_option("model", o->model, "ONNX model file");
  cmd->add_option("--model-repository", o->repository, "Triton model repository (with -m NAME)");
  cmd->add_option("-m,--model-name", o->name, "Model in --model-repository; the name in the written config");
  cmd->add_option("--mode", o->mode, "offline (engine only) or online (a real serve driven by perf)")
      ->check(one_of({"offline", "online"}));
  add_device_option(cmd, &o->device, "cpu (fast), cpu-ref (reference kernels), cuda or cuda:N when built in");
  add_precision_option(cmd, &o->precisions,
                       "Precisions to search (repeatable; default fp32 on the CPU; on CUDA fp32 fp16 bf16, and int8 or "
                       "fp8 for a model quantized for it)");
  cmd->add_option("--max-batch", o->max_batch, "Largest batch tried (default 256)")->check(int_range(1, int64_t{1} << 20));
  cmd->add_option("--instances", o->instances, "Online: instance counts to try (default 1 2)")->check(int_range(1, 64));
  cmd->add_option("--max-queue-delay-us", o->delays, "Online: dynamic batching delays to try (default 0 1000)")
      ->check(int_range(0, 10000000));
  cmd->add_option("--latency-budget-ms", o->latency_budget_ms, "p99 latency at most (ms)")->check(real_range(0, 1e9));
  add_memory_limit_option(cmd, &o->memory_limit, "Memory a session may hold, e.g. 2G (also each point's cap)");
  cmd->add_option("--min-throughput", o->min_throughput, "Inferences/s at least")->check(real_range(0, 1e12));
  cmd->add_option("--time-budget", o->time_budget_s, "Seconds; no new point starts after it")->check(real_range(0, 1e9));
  cmd->add_option("--iterations", o->iterations, "Offline: timed runs per point (default 10)")->check(int_range(1, 100000));
  cmd->add_option("--measurement-ms", o->measurement_ms, "Online: perf window per concurrency (default 1000)")
      ->check(int_range(50, 600000));
  cmd->add_option("--max-concurrency", o->max_concurrency, "Online: highest concurrency (default 64)")->check(int_range(1, 4096));
  cmd->add_option("--dim", o->dims, "NAME=VALUE for another symbolic input dim (repeatable)");
  add_kernel_option(cmd, &o->kernels);
  cmd->add_option("--output-dir", o->output_dir, "Where tune.json, report.html, the plots and repository/ go (default tune-NAME)");
  cmd->add_flag("--json", o->json, "Print JSON (also written to OUTPUT_DIR/tune.json)");
  cmd->callback([o] { set_exit_code(run(*o)); });
}
GPUOPT_REGISTER_COMMAND(43, setup);

}  // namespace
}  // namespace gpuopt::cli
