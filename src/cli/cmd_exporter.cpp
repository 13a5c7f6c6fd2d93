// `gpuopt exporter`: Prometheus /metrics with DCGM-exporter names, /health; `--self-bench`
// measures what it costs (CPU share of one core at the interval, scrape latency).
#include "cli/command.h"
#include "monitor/exporter.h"
#include "monitor/exporter_bench.h"
#include "kube/pod_resources.h"
#include "net/http.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <csignal>
#include <fstream>
#include <thread>

namespace gpuopt::cli {
namespace {

using namespace gpuopt::gpu;

struct Options {
  std::string listen = "0.0.0.0:9400";
  std::string interval = "1s";
  std::string slow_interval = "10s";
  std::string slow_budget = "2ms";
  int threads = 2;
  bool no_processes = false;
  bool self_bench = false;
  double bench_seconds = 10;
  double bench_warmup = 2;
  int bench_scrapes = 500;
  bool json = false;
  std::string pod_resources_socket;  // empty: no Kubernetes labels
  // dcgm-exporter's flags (docs/coming-from-triton.md).
  std::string address;               // -a ":9400": --listen
  int64_t collect_interval_ms = 0;   // -c: --interval in ms (0: not given)
  std::string collectors;            // -f: CSV of DCGM field names to export
  bool kubernetes = false;           // -k: pod labels from the kubelet's default socket
  std::vector<std::string> refused;  // dcgm-exporter flags given that gpuopt does not take
  std::vector<std::string> refused_values;
};

// The DCGM fields gpuopt's exporter writes (monitor/metrics.cpp). A --collectors file naming
// others gets one warning listing them.
const std::vector<std::string>& exported_fields() {
  static const std::vector<std::string> f = {
      "DCGM_FI_DEV_CLOCKS_EVENT_REASONS", "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL", "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
      "DCGM_FI_DEV_ECC_SBE_AGG_TOTAL",    "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "DCGM_FI_DEV_FB_FREE",
      "DCGM_FI_DEV_FB_RESERVED",          "DCGM_FI_DEV_FB_TOTAL",          "DCGM_FI_DEV_FB_USED",
      "DCGM_FI_DEV_GPU_TEMP",             "DCGM_FI_DEV_GPU_UTIL",          "DCGM_FI_DEV_MAX_MEM_CLOCK",
      "DCGM_FI_DEV_MAX_SM_CLOCK",         "DCGM_FI_DEV_MEMORY_TEMP",       "DCGM_FI_DEV_MEM_CLOCK",
      "DCGM_FI_DEV_MEM_COPY_UTIL",        "DCGM_FI_DEV_MIG_MODE",          "DCGM_FI_DEV_PCIE_REPLAY_COUNTER",
      "DCGM_FI_DEV_PCIE_RX_THROUGHPUT",   "DCGM_FI_DEV_PCIE_TX_THROUGHPUT", "DCGM_FI_DEV_POWER_MGMT_LIMIT",
      "DCGM_FI_DEV_POWER_USAGE",          "DCGM_FI_DEV_SM_CLOCK",          "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
      "DCGM_FI_DEV_XID_ERRORS",           "DCGM_FI_PROF_DRAM_ACTIVE",      "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
      "DCGM_FI_PROF_NVLINK_RX_BYTES",     "DCGM_FI_PROF_NVLINK_TX_BYTES",  "DCGM_FI_PROF_PCIE_RX_BYTES",
      "DCGM_FI_PROF_PCIE_TX_BYTES",       "DCGM_FI_PROF_PIPE_FP16_ACTIVE", "DCGM_FI_PROF_PIPE_FP32_ACTIVE",
      "DCGM_FI_PROF_PIPE_FP64_ACTIVE",    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "DCGM_FI_PROF_SM_ACTIVE",
      "DCGM_FI_PROF_SM_OCCUPANCY"};
  return f;
}

// dcgm-exporter's counters CSV: "DCGM_FI_DEV_SM_CLOCK, gauge, SM clock frequency (in MHz)." per
// line, '#' comments. Returns the field names; one warning names those gpuopt does not export.
Result<std::vector<std::string>> read_collectors(const std::string& path) {
  std::ifstream f(path);
  if (!f) return Status::NotFound("--collectors '{}': cannot read it", path);
  std::vector<std::string> keep, unknown;
  std::string line;
  int n = 0;
  while (std::getline(f, line)) {
    ++n;
    size_t a = line.find_first_not_of(" \t\r");
    if (a == std::string::npos || line[a] == '#') continue;
    std::string name = line.substr(a, line.find(',', a) == std::string::npos ? std::string::npos : line.find(',', a) - a);
    while (!name.empty() && std::isspace(static_cast<unsigned char>(name.back()))) name.pop_back();
    if (!name.starts_with("DCGM_FI_") && !name.starts_with("DCGM_EXP_"))
      return Status::InvalidArgument("--collectors '{}' line {}: '{}' is not a DCGM field name (DCGM_FI_...)", path, n,
                                     name);
    const auto& known = exported_fields();
    (std::find(known.begin(), known.end(), name) != known.end() ? keep : unknown).push_back(name);
  }
  if (!unknown.empty())
    fmt::print(stderr, "gpuopt exporter: warning: --collectors: not exported by gpuopt, ignored: {}\n",
               fmt::join(unknown, ", "));
  if (keep.empty())
    return Status::InvalidArgument("--collectors '{}' names no field gpuopt exports (it exports {} ... )", path,
                                   exported_fields().front());
  return keep;
}

double cpu_seconds() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return double(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) + double(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

nlohmann::json threads_json(const std::vector<ThreadCpu>& threads, double wall) {
  nlohmann::json j = nlohmann::json::array();
  for (const ThreadCpu& t : threads)
    j.push_back({{"name", t.name}, {"tid", t.tid}, {"cpu_ms", 1e3 * t.cpu_s}, {"cpu_percent_of_one_core", 100 * t.cpu_s / wall}});
  return j;
}

int self_bench(const Options& o, ExporterOptions eo) {
  // Threads that exist before the exporter starts belong to libraries loaded with the binary
  // (OpenBLAS starts one per core and spins ~0.1 s in each right after start-up).
  const std::vector<ThreadCpu> library_threads = thread_cpu_times();
  eo.listen = "127.0.0.1:0";
  auto e = Exporter::start(eo);
  if (!e.ok()) return report_error(e.status().with_context("exporter"));
  Exporter& ex = **e;
  // Wait for the first sample so the idle phase measures steady state.
  for (int i = 0; i < 200 && ex.gpu_count() > 0 && ex.samples() < 1; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));

  // Start-up costs (library threads spinning, the first reads of every group) are not the
  // standing cost: let them pass before measuring.
  std::this_thread::sleep_for(std::chrono::duration<double>(o.bench_warmup));

  // Phase 1: sampling alone (nobody scrapes): the exporter's standing cost.
  uint64_t s0 = ex.samples();
  auto threads0 = thread_cpu_times();
  double c0 = cpu_seconds(), t0 = now_s();
  std::this_thread::sleep_for(std::chrono::duration<double>(o.bench_seconds));
  double cpu_idle = cpu_seconds() - c0, wall = now_s() - t0;
  auto threads = thread_cpu_delta(threads0, thread_cpu_times());
  for (ThreadCpu& t : threads)
    for (const ThreadCpu& l : library_threads)
      if (l.tid == t.tid && l.tid != int(getpid())) t.name += " (library)";
  uint64_t samples = ex.samples() - s0;
  double cpu_pct = 100.0 * cpu_idle / wall;
  Exporter::QueryReport queries = ex.query_report();

  // Phase 2: scrapes over one keep-alive connection, as Prometheus does.
  net::HttpClient client("127.0.0.1", ex.port(), std::chrono::seconds(5));
  size_t body = 0;
  for (int i = 0; i < 20; ++i) {
    auto r = client.get("/metrics");
    if (!r.ok()) return report_error(r.status().with_context("self-bench scrape"));
    if (r->status != 200) return report_error(Status::Internal("self-bench: /metrics answered {}", r->status));
    body = r->body.size();
  }
  std::vector<double> lat;
  lat.reserve(o.bench_scrapes);
  double c1 = cpu_seconds();
  for (int i = 0; i < o.bench_scrapes; ++i) {
    double a = now_s();
    auto r = client.get("/metrics");
    double b = now_s();
    if (!r.ok() || r->status != 200) return report_error(Status::Internal("self-bench: scrape {} failed", i));
    lat.push_back((b - a) * 1e6);
  }
  double cpu_per_scrape_us = (cpu_seconds() - c1) / o.bench_scrapes * 1e6;
  ex.stop();
  std::sort(lat.begin(), lat.end());
  auto q = [&](double p) { return lat[std::min(lat.size() - 1, size_t(p * double(lat.size())))]; };
  double p50 = q(0.5), p99 = q(0.99), mx = lat.back();
  bool cpu_ok = cpu_pct < 1.0, lat_ok = p99 < 1000.0;
  if (o.json) {
    nlohmann::json j = {{"interval_s", eo.interval_s},
                        {"gpus", ex.gpu_count()},
                        {"no_gpu_reason", ex.no_gpu_reason()},
                        {"warmup_seconds", o.bench_warmup},
                        {"idle_seconds", wall},
                        {"samples", samples},
                        {"last_sample_duration_ms", ex.last_sample_duration_s() * 1e3},
                        {"cpu_percent_of_one_core", cpu_pct},
                        {"slow_every", queries.slow_every},
                        {"slow_interval_s", double(queries.slow_every) * eo.interval_s},
                        {"sampling_seconds_total", queries.sample_seconds_total},
                        {"samples_total", queries.samples},
                        {"queries", query_rows_json(queries)},
                        {"threads", threads_json(threads, wall)},
                        {"scrapes", o.bench_scrapes},
                        {"metrics_bytes", body},
                        {"scrape_latency_us", {{"p50", p50}, {"p99", p99}, {"max", mx}}},
                        {"cpu_per_scrape_us_client_and_server", cpu_per_scrape_us},
                        {"goals", {{"cpu_percent_lt_1", cpu_ok}, {"scrape_p99_lt_1ms", lat_ok}}}};
    fmt::print("{}\n", j.dump(2));
  } else {
    fmt::print("gpuopt exporter self-bench: {} GPU(s){}, interval {} s\n", ex.gpu_count(),
               ex.no_gpu_reason().empty() ? "" : " (" + ex.no_gpu_reason() + ")", eo.interval_s);
    fmt::print("  {:<40} {:>12}  {}\n", "measure", "value", "goal");
    fmt::print("  {:<40} {:>12}\n", "samples in the idle phase", fmt::format("{} in {:.1f} s", samples, wall));
    fmt::print("  {:<40} {:>12.2f}\n", "last sample's NVML time (ms)", ex.last_sample_duration_s() * 1e3);
    fmt::print("  {:<40} {:>12.3f}  < 1% {}\n", "CPU, % of one core (sampling, no scrapes)", cpu_pct, cpu_ok ? "OK" : "MISSED");
    fmt::print("  {:<40} {:>12}\n", "/metrics size (bytes)", body);
    fmt::print("  {:<40} {:>12.0f}\n", "scrape latency p50 (us)", p50);
    fmt::print("  {:<40} {:>12.0f}  < 1000 us {}\n", "scrape latency p99 (us)", p99, lat_ok ? "OK" : "MISSED");
    fmt::print("  {:<40} {:>12.0f}\n", "scrape latency max (us)", mx);
    fmt::print("  {:<40} {:>12.1f}\n", "CPU per scrape, client+server (us)", cpu_per_scrape_us);
    if (queries.samples > 0) fmt::print("\n{}", format_query_table(queries));
    fmt::print("\n{}", format_thread_table(threads, wall));
  }
  return kExitOk;
}

int run(Options o) {
  if (!o.refused.empty())
    return report_error(Status::InvalidArgument("dcgm-exporter's {} is not supported by gpuopt exporter (it reads NVML "
                                                "directly; see docs/coming-from-triton.md)",
                                                fmt::join(o.refused, ", ")),
                        true);
  if (!o.address.empty()) o.listen = o.address;
  if (o.collect_interval_ms > 0) o.interval = fmt::format("{}ms", o.collect_interval_ms);
  if (o.kubernetes && o.pod_resources_socket.empty()) o.pod_resources_socket = kube::kDefaultPodResourcesSocket;
  std::vector<std::string> fields;
  if (!o.collectors.empty()) {
    auto f = read_collectors(o.collectors);
    if (!f.ok()) return report_error(f.status(), f.status().code() == StatusCode::kInvalidArgument);
    fields = std::move(f).value();
  }
  auto interval = parse_interval(o.interval);
  if (!interval.ok()) return report_error(interval.status(), true);
  if (o.threads < 1 || o.threads > 64) return report_error(Status::InvalidArgument("--threads must be 1..64"), true);
  if (o.bench_seconds <= 0 || o.bench_scrapes < 1 || o.bench_warmup < 0)
    return report_error(Status::InvalidArgument("--bench-seconds and --bench-scrapes must be positive, --bench-warmup >= 0"), true);
  ExporterOptions eo;
  eo.listen = o.listen;
  eo.interval_s = *interval;
  eo.threads = o.threads;
  eo.sampler.processes = !o.no_processes;
  eo.fields = fields;
  auto slow = parse_interval(o.slow_interval);
  if (!slow.ok()) return report_error(Status::InvalidArgument("--slow-interval: {}", slow.status().message()), true);
  // Slow series carry their read time; Prometheus rejects samples older than about an hour.
  if (*slow > 3600) return report_error(Status::InvalidArgument("--slow-interval '{}': at most 1h", o.slow_interval), true);
  eo.sampler.slow_interval_s = *slow;
  if (o.slow_budget == "0" || o.slow_budget == "off") {
    eo.sampler.slow_budget_s = 0;
  } else {
    auto budget = parse_interval(o.slow_budget);
    if (!budget.ok()) return report_error(Status::InvalidArgument("--slow-budget: {} (or 0/off)", budget.status().message()), true);
    eo.sampler.slow_budget_s = *budget;
  }
  if (!o.pod_resources_socket.empty()) {
    // Checked here, before serving: a missing socket is a mount missing from the pod spec.
    auto client = kube::PodResourcesClient::connect(o.pod_resources_socket, std::min(1.0, eo.interval_s));
    if (!client.ok()) return report_error(client.status());
    std::shared_ptr<kube::PodResourcesClient> c = std::move(*client);
    eo.pods = [c] { return c->list(); };
  }
  if (o.self_bench) return self_bench(o, eo);
  std::string host;
  uint16_t port = 0;
  if (Status st = parse_listen(o.listen, &host, &port); !st.ok()) return report_error(st, true);

  // Block the stop signals before any thread starts, so only sigwait below receives them.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  auto e = Exporter::start(eo);
  if (!e.ok()) return report_error(e.status().with_context("exporter"));
  fmt::print(stderr, "gpuopt exporter: serving http://{}:{}/metrics ({} GPU(s), interval {} s){}\n", (*e)->host(),
             (*e)->port(), (*e)->gpu_count(), eo.interval_s,
             (*e)->no_gpu_reason().empty() ? "" : "; no GPU series: " + (*e)->no_gpu_reason());
  int sig = 0;
  sigwait(&set, &sig);
  fmt::print(stderr, "gpuopt exporter: signal {}, stopping\n", sig);
  (*e)->stop();
  return kExitOk;
}

void setup(CLI::App& app) {
  auto* cmd = app.add_subcommand("exporter", "Prometheus exporter: /metrics with DCGM-exporter names, /health");
  auto o = std::make_shared<Options>();
  cmd->add_option("--listen", o->listen, "Address to serve on: host:port, [ipv6]:port or :port")->capture_default_str();
  cmd->add_option("--interval", o->interval, "Sampling interval (1s, 500ms, 2)")->capture_default_str();
  cmd->add_option("--threads", o->threads, "HTTP threads")->capture_default_str();
  cmd->add_option("--slow-interval", o->slow_interval,
                  "Read slow or costly NVML queries (ECC, power limit, PCIe replays/throughput, MIG, process "
                  "utilisation) this often; the last values are exported in between. <= --interval: every sample")
      ->capture_default_str();
  cmd->add_option("--slow-budget", o->slow_budget,
                  "A query group whose mean cost per read passes this moves to the slow cadence (0/off: never)")
      ->capture_default_str();
  cmd->add_flag("--no-processes", o->no_processes, "Do not export per-process series");
  cmd->add_option("--pod-resources-socket", o->pod_resources_socket,
                  "The kubelet's pod-resources socket (in Kubernetes: " + std::string(kube::kDefaultPodResourcesSocket) +
                      "): pod, namespace and container labels on per-process series, gpuopt_gpu_pod_info per GPU");
  cmd->add_flag("--self-bench", o->self_bench,
                "Measure the exporter on 127.0.0.1: CPU share at the interval, the cost of each NVML query group, "
                "CPU by thread, and /metrics scrape latency");
  cmd->add_option("--bench-seconds", o->bench_seconds, "Self-bench: seconds of sampling without scrapes")->capture_default_str();
  cmd->add_option("--bench-scrapes", o->bench_scrapes, "Self-bench: timed scrapes")->capture_default_str();
  cmd->add_option("--bench-warmup", o->bench_warmup, "Self-bench: seconds to wait after start-up before measuring")
      ->capture_default_str();
  cmd->add_flag("--json", o->json, "Self-bench: print JSON");
  // dcgm-exporter's flags.
  auto* address = cmd->add_option("-a,--address", o->address, "dcgm-exporter's form of --listen (\":9400\")");
  address->excludes(cmd->get_option("--listen"));
  cmd->add_option("-c,--collect-interval", o->collect_interval_ms, "dcgm-exporter's form of --interval, in ms")
      ->check(int_range(1, 3600000))
      ->excludes(cmd->get_option("--interval"));
  cmd->add_option("-f,--collectors", o->collectors,
                  "dcgm-exporter's counters CSV: export only the DCGM fields it lists (one warning names those "
                  "gpuopt does not export)");
  cmd->add_flag("-k,--kubernetes", o->kubernetes,
                "Pod labels from the kubelet (as --pod-resources-socket with its default path)");
  cmd->add_option("-p,--pod-resources-kubelet-socket", o->pod_resources_socket,
                  "dcgm-exporter's form of --pod-resources-socket");
  // dcgm-exporter's flags with no counterpart here: refused by name, not as unknown options.
  auto refused = std::make_shared<std::vector<std::pair<CLI::Option*, std::string>>>();
  for (const char* f : {"-r,--remote-hostengine-info", "-d,--devices", "--kubernetes-gpu-id-type", "-m,--configmap-data",
                        "--web-config-file", "--use-old-namespace", "-x,--xid-count-window-size",
                        "--enable-dcgm-log", "--dcgm-log-level", "--switch-devices", "--cpu-devices",
                        "--fake-gpus", "--replace-blanks-in-model-name", "--clock-events-count-window-size"}) {
    std::string names = f;
    std::string longname = names.substr(names.find("--"));
    auto* opt = cmd->add_option(names, o->refused_values, "dcgm-exporter's flag: refused (no counterpart)")
                    ->expected(0, 1)
                    ->group("dcgm-exporter flags refused");
    refused->emplace_back(opt, longname);
  }
  cmd->callback([o, refused] {
    for (auto& [opt, name] : *refused)
      if (opt->count() > 0) o->refused.push_back(name);
    set_exit_code(run(*o));
  });
}
GPUOPT_REGISTER_COMMAND(65, setup);

}  // namespace
}  // namespace gpuopt::cli
