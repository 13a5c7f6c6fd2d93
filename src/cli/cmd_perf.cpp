// `gpuopt perf`: a load generator in the spirit of Triton's perf_analyzer. Closed loop
// (--concurrency-range) or open loop (--request-rate-range); measurement windows repeat until
// three in a row agree on throughput within --stability-percentage; prints throughput,
// latency percentiles and the server-side queue/compute breakdown from the stats endpoint.
// --service-kind openai load-tests a language model instead (perf_llm.h).
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <random>
#include <thread>

#include "cli/command.h"
#include "cli/perf_client.h"
#include "cli/perf_data.h"
#include "cli/perf_llm.h"
#include "cli/process_cpu.h"
#include "core/table.h"
#include "net/http.h"
#include "server/kserve.h"

namespace gpuopt::cli {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

struct PerfOptions {
  std::string model;
  std::string url;  // default 127.0.0.1:8000 (HTTP) or :8001 (gRPC)
  std::string protocol = "http";
  std::string shared_memory = "none";
  int64_t output_shm_size = 100 << 10;
  std::string concurrency_range = "1";
  std::string request_rate_range;
  int64_t batch = 1;
  std::vector<std::string> shapes;  // NAME:d1,d2 for dynamic non-batch dims
  bool binary = true;
  bool json_data = false;
  int interval_ms = 2000;
  double stability = 10.0;
  int max_trials = 10;
  bool json_out = false;
  std::string csv;
  std::string input_data;                // perf_analyzer's --input-data: zero, random or a JSON file (perf_data.h)
  int percentile = 0;                     // 0: stability on throughput alone; N: and on the pN latency
  bool async = false, sync = false;       // perf_analyzer's -a/--sync: accepted, no effect (see setup)
  std::string measurement_mode = "time_windows";
  int64_t measurement_request_count = 50;
  bool verbose_csv = false;
  std::string distribution = "constant";  // open loop: constant or poisson intervals
};

struct Level {
  std::string mode;
  double value = 0;  // concurrency or requests/s
  double throughput = 0;
  double p50 = 0, p90 = 0, p95 = 0, p99 = 0, avg_us = 0;
  double pct_us = 0;  // the --percentile latency (0 without it)
  uint64_t requests = 0, errors = 0;
  std::string first_error;  // the first failed request's error, when errors > 0
  uint64_t sent = 0;  // successful requests over every window (the server's success count moves by this)
  double queue_us = 0, compute_input_us = 0, compute_infer_us = 0, compute_output_us = 0, overhead_us = 0;
  // Server side only: request duration from the server's stats (arrival to answer handed to the
  // connection), and that minus queue and compute: what parsing, batching hand-offs and encoding cost.
  double server_request_us = 0, server_overhead_us = 0;
  int windows = 0;
  bool stable = false;
  double client_cores = 0;  // CPU cores perf itself kept busy over the windows (process_cpu.h)
};

double percentile(std::vector<uint64_t>& v, double p) {
  if (v.empty()) return 0;
  size_t k = static_cast<size_t>(p / 100.0 * static_cast<double>(v.size() - 1));
  std::nth_element(v.begin(), v.begin() + static_cast<long>(k), v.end());
  return static_cast<double>(v[k]) / 1000.0;
}

// One request of the model's inputs: random values, or zeros (--input-data zero).
Result<std::string> build_body(const PerfOptions& o, const json& meta, size_t* hlen) {
  const bool zero = o.input_data == "zero";
  std::mt19937 rng(42);
  std::vector<std::pair<std::string, Tensor>> inputs;
  for (const auto& in : meta["inputs"]) {
    std::string name = in["name"];
    auto dt = dtype_from_kserve(in["datatype"].get<std::string>());
    if (!dt) return Status::Unimplemented("input '{}': datatype {}", name, in["datatype"].dump());
    Shape shape = in["shape"].get<Shape>();
    for (const auto& spec : o.shapes) {
      if (spec.rfind(name + ":", 0) != 0) continue;
      shape.clear();
      std::string dims = spec.substr(name.size() + 1);
      size_t i = 0;
      while (i <= dims.size()) {
        size_t j = dims.find(',', i);
        if (j == std::string::npos) j = dims.size();
        shape.push_back(std::atoll(dims.substr(i, j - i).c_str()));
        i = j + 1;
      }
      shape.insert(shape.begin(), -1);
    }
    if (!shape.empty() && shape[0] < 0) shape[0] = o.batch;
    for (auto d : shape)
      if (d < 0) return Status::InvalidArgument("input '{}' has a dynamic dim: give --shape {}:d1,d2,...", name, name);
    GPUOPT_ASSIGN_OR_RETURN(Tensor t, Tensor::try_empty(*dt, shape, name));
    if (*dt == DType::String) {
      for (auto& s : t.strings()) s = zero ? "" : "gpuopt";
    } else if (zero) {
      for (int64_t i = 0; i < t.numel(); ++i) t.set_f64(i, 0.0);
    } else {
      for (int64_t i = 0; i < t.numel(); ++i)
        t.set_f64(i, dtype_is_float(*dt) ? std::uniform_real_distribution<double>(-1, 1)(rng) : double(rng() % 4));
    }
    inputs.emplace_back(name, std::move(t));
  }
  return server::encode_infer_request(inputs, o.binary, o.binary, "", hlen);
}

Result<Level> measure(const PerfOptions& o, const PerfTransport& tgt, std::shared_ptr<const PerfWorkload> work,
                      bool rate, double value) {
  std::atomic<uint64_t> sent{0}, next_request{0};
  std::mutex mu;
  std::vector<uint64_t> window_lat;
  std::atomic<uint64_t> errors{0};
  std::atomic<bool> stop{false};
  const auto t0 = Clock::now();
  ArrivalSchedule arrivals(value, o.distribution == "poisson", t0);
  int threads = rate ? std::max(4, static_cast<int>(std::thread::hardware_concurrency())) : static_cast<int>(value);
  std::string first_error;
  std::atomic<int> worker_ids{0};
  auto worker = [&] {
    auto client = make_perf_client(tgt, work, worker_ids++);
    if (!client.ok()) {
      if (errors++ == 0) {
        std::lock_guard<std::mutex> lk(mu);
        first_error = client.status().to_string();
      }
      return;
    }
    PerfClient& c = **client;
    while (!stop.load()) {
      if (rate) {
        std::this_thread::sleep_until(arrivals.next());
        if (stop.load()) break;
      }
      const size_t k = next_request++ % work->requests.size();
      const PerfRequest& req = work->requests[k];
      std::vector<std::pair<std::string, Tensor>> outs;
      auto s = Clock::now();
      // With validation_data the answer's outputs are decoded too (inside the latency, as perf_analyzer).
      Status r = c.infer(k, req.expected.empty() ? nullptr : &outs);
      uint64_t ns =
          static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - s).count());
      if (r.ok()) {
        ++sent;  // the server answered it (and counted it a success), whatever validation finds
        r = check_outputs(req, outs);
      }
      if (!r.ok()) {
        if (errors++ == 0) {
          std::lock_guard<std::mutex> lk(mu);
          first_error = r.to_string();
        }
        continue;
      }
      std::lock_guard<std::mutex> lk(mu);
      window_lat.push_back(ns);
    }
  };
  GPUOPT_ASSIGN_OR_RETURN(auto stats_client, make_perf_client(tgt, nullptr, -1));
  std::vector<std::thread> ts;
  for (int i = 0; i < threads; ++i) ts.emplace_back(worker);
  const double cpu0 = process_cpu_seconds();
  const auto wall0 = Clock::now();
  // Windows until three consecutive throughputs agree within the stability percentage.
  std::vector<double> tputs, lats;
  std::vector<std::vector<uint64_t>> windows;  // latencies per window
  Level lv;
  lv.mode = rate ? "request_rate" : "concurrency";
  lv.value = value;
  json s_before, s_after;
  std::vector<json> stats_hist;  // stats at the start of each window
  for (int w = 0; w < o.max_trials; ++w) {
    {
      std::lock_guard<std::mutex> lk(mu);
      window_lat.clear();
    }
    auto before = stats_client->stats(o.model);
    stats_hist.push_back(before.ok() ? *before : json());
    auto ws = Clock::now();
    if (o.measurement_mode == "count_windows") {
      // The window ends once --measurement-request-count requests completed in it; a server that
      // stopped answering ends it at 60 s (or 10 intervals) with what came back.
      const auto limit = ws + std::chrono::milliseconds(std::max<int64_t>(60000, int64_t{10} * o.interval_ms));
      for (;;) {
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
        std::lock_guard<std::mutex> lk(mu);
        if (static_cast<int64_t>(window_lat.size()) >= o.measurement_request_count || Clock::now() >= limit) break;
      }
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(o.interval_ms));
    }
    std::vector<uint64_t> lat;
    {
      std::lock_guard<std::mutex> lk(mu);
      lat.swap(window_lat);
    }
    double secs = std::chrono::duration<double>(Clock::now() - ws).count();
    auto after = stats_client->stats(o.model);
    s_after = after.ok() ? *after : json();
    tputs.push_back(static_cast<double>(lat.size()) * static_cast<double>(o.batch) / secs);
    if (o.percentile > 0) {
      std::vector<uint64_t> copy = lat;
      lats.push_back(percentile(copy, o.percentile));
    }
    lv.windows = w + 1;
    windows.push_back(std::move(lat));
    // Three windows agree when each is within the stability percentage of their mean.
    auto agree = [&](const std::vector<double>& v) {
      double a = v[v.size() - 3], b = v[v.size() - 2], c = v.back();
      double mean = (a + b + c) / 3;
      double dev = std::max({std::abs(a - mean), std::abs(b - mean), std::abs(c - mean)});
      return mean > 0 && dev / mean * 100.0 <= o.stability;
    };
    if (tputs.size() >= 3) {
      // With --percentile, as perf_analyzer: the pN latency must agree too.
      if (agree(tputs) && (o.percentile == 0 || agree(lats))) {
        lv.stable = true;
        break;
      }
    }
  }
  lv.client_cores = (process_cpu_seconds() - cpu0) / std::chrono::duration<double>(Clock::now() - wall0).count();
  stop = true;
  for (auto& t : ts) t.join();
  lv.errors = errors.load();
  lv.sent = sent.load();
  lv.first_error = first_error;
  // Samples and server stats of the last three windows (or all, when fewer ran).
  std::vector<uint64_t> kept;
  size_t first = windows.size() >= 3 ? windows.size() - 3 : 0;
  for (size_t i = first; i < windows.size(); ++i) kept.insert(kept.end(), windows[i].begin(), windows[i].end());
  if (first < stats_hist.size()) s_before = stats_hist[first];
  if (kept.empty() && lv.errors > 0) return Status::Unavailable("every request failed: {}", first_error);
  double sum = 0;
  for (auto x : kept) sum += static_cast<double>(x);
  lv.requests = kept.size();
  lv.avg_us = kept.empty() ? 0 : sum / static_cast<double>(kept.size()) / 1000.0;
  size_t n = tputs.size();
  lv.throughput = n >= 3 ? (tputs[n - 1] + tputs[n - 2] + tputs[n - 3]) / 3 : tputs.back();
  lv.p50 = percentile(kept, 50);
  lv.p90 = percentile(kept, 90);
  lv.p95 = percentile(kept, 95);
  lv.p99 = percentile(kept, 99);
  if (o.percentile > 0) lv.pct_us = percentile(kept, o.percentile);
  // Server-side breakdown over the measured windows (Triton's statistics extension).
  if (!s_before.is_null() && !s_after.is_null() && !s_before["model_stats"].empty() &&
      !s_after["model_stats"].empty()) {
    auto& b = s_before["model_stats"][0]["inference_stats"];
    auto& a = s_after["model_stats"][0]["inference_stats"];
    double cnt = a["success"]["count"].get<double>() - b["success"]["count"].get<double>();
    auto avg = [&](const char* k) {
      return cnt > 0 ? (a[k]["ns"].get<double>() - b[k]["ns"].get<double>()) / cnt / 1000.0 : 0.0;
    };
    lv.queue_us = avg("queue");
    lv.compute_input_us = avg("compute_input");
    lv.compute_infer_us = avg("compute_infer");
    lv.compute_output_us = avg("compute_output");
    lv.overhead_us = lv.avg_us - lv.compute_input_us - lv.compute_infer_us - lv.compute_output_us - lv.queue_us;
    lv.server_request_us = avg("success");
    lv.server_overhead_us = lv.server_request_us - lv.compute_input_us - lv.compute_infer_us - lv.compute_output_us -
                            lv.queue_us;
  }
  return lv;
}

int run(const PerfOptions& o) {
  PerfTransport tgt;
  tgt.protocol = o.protocol;
  tgt.shared_memory = o.shared_memory;
  tgt.output_shm_bytes = static_cast<size_t>(o.output_shm_size);
  std::string url = o.url.empty() ? (o.protocol == "grpc" ? "127.0.0.1:8001" : "127.0.0.1:8000") : o.url;
  auto colon = url.rfind(':');
  tgt.host = url.substr(0, colon);
  tgt.port = o.protocol == "grpc" ? 8001 : 8000;
  if (colon != std::string::npos) {
    const int port = std::atoi(url.c_str() + colon + 1);
    if (port < 1 || port > 65535 || url.find_first_not_of("0123456789", colon + 1) != std::string::npos)
      return report_error(Status::InvalidArgument("--url '{}': expected host:port with a port in 1..65535", url), true);
    tgt.port = static_cast<uint16_t>(port);
  }
  bool rate = !o.request_rate_range.empty();
  auto range = parse_range(rate ? o.request_rate_range : o.concurrency_range);
  if (!range.ok()) return report_error(range.status(), true);
  // The CSV file is opened before the measurement, so a path that cannot be written fails at once.
  std::ofstream csv;
  if (!o.csv.empty()) {
    csv.open(o.csv);
    if (!csv) return report_error(Status::NotFound("--csv '{}': cannot be written: {}", o.csv, std::strerror(errno)));
  }
  const bool generated = o.input_data.empty() || o.input_data == "zero" || o.input_data == "random";
  if (!generated && !std::filesystem::is_regular_file(o.input_data))
    return report_error(Status::NotFound("--input-data '{}': no such file", o.input_data));
  auto meta_client = make_perf_client(tgt, nullptr, -1);
  if (!meta_client.ok()) return report_error(meta_client.status());
  auto meta = (*meta_client)->metadata(o.model);
  if (!meta.ok()) return report_error(meta.status().with_context("model metadata"));
  auto work = std::make_shared<PerfWorkload>();
  work->model = o.model;
  work->binary = o.binary;
  for (const auto& out : (*meta)["outputs"]) work->outputs.push_back(out["name"].get<std::string>());
  if (!generated) {
    auto data = load_input_data(o.input_data, *meta, o.batch, o.binary);
    if (!data.ok()) return report_error(data.status(), true);
    work->requests = std::move(data).value();
  } else {
    PerfRequest one;
    auto body = build_body(o, *meta, &one.header_length);
    if (!body.ok()) return report_error(body.status(), true);
    one.body = std::move(body).value();
    work->requests.push_back(std::move(one));
  }
  std::vector<Level> levels;
  for (double v : *range) {
    auto lv = measure(o, tgt, work, rate, v);
    if (!lv.ok()) return report_error(lv.status());
    levels.push_back(*lv);
    if (lv->errors > 0)  // what failed, in --json runs too (stderr; the JSON has it as first_error)
      fmt::print(stderr, "perf: {} {}: {} requests failed; the first: {}\n", lv->mode, v, lv->errors, lv->first_error);
    if (!o.json_out)
      fmt::print(stderr, "{} {}: {:.1f} infer/s, p{} {:.0f} us{}\n", lv->mode, v, lv->throughput,
                 o.percentile > 0 ? o.percentile : 99, o.percentile > 0 ? lv->pct_us : lv->p99,
                 lv->stable ? "" : " (not stable)");
    // The client shares the host's cores with the server on loopback: say when it may be the limit.
    if (const double cores = std::thread::hardware_concurrency(); lv->client_cores > 0.75 * cores)
      fmt::print(stderr, "perf: the client itself kept {:.1f} of {:.0f} cores busy at {} {}: it may be the limit\n",
                 lv->client_cores, cores, lv->mode, v);
  }
  if (!o.csv.empty()) {
    // perf_analyzer's columns (microseconds). The client's send and receive are inside
    // "Network+Server Send/Recv" here (it is not split on the client): their columns are 0.
    csv << (rate ? "Request Rate" : "Concurrency")
        << ",Inferences/Second,Client Send,Network+Server Send/Recv,Server Queue,Server Compute Input,"
           "Server Compute Infer,Server Compute Output,Client Recv,p50 latency,p90 latency,p95 latency,p99 latency";
    if (o.verbose_csv) csv << (o.percentile > 0 ? "" : ",Avg latency") << ",request/response,response wait";
    csv << "\n";
    auto us = [](double x) { return static_cast<int64_t>(std::llround(x)); };
    for (const auto& l : levels) {
      csv << fmt::format("{},{:.2f},0,{},{},{},{},{},0,{},{},{},{}", l.value, l.throughput, us(l.overhead_us),
                         us(l.queue_us), us(l.compute_input_us), us(l.compute_infer_us), us(l.compute_output_us),
                         us(l.p50), us(l.p90), us(l.p95), us(l.p99));
      // request/response: the whole exchange; response wait: the part spent waiting for the server.
      if (o.verbose_csv)
        csv << (o.percentile > 0 ? "" : fmt::format(",{}", us(l.avg_us)))
            << fmt::format(",{},{}", us(l.avg_us), us(l.avg_us - l.overhead_us > 0 ? l.avg_us - l.overhead_us : 0));
      csv << "\n";
    }
  }
  if (o.json_out) {
    json a = json::array();
    for (const auto& l : levels)
      a.push_back({{l.mode, l.value},
                   {"throughput_infer_per_s", l.throughput},
                   {"latency_avg_us", l.avg_us},
                   {"p50_us", l.p50},
                   {"p90_us", l.p90},
                   {"p95_us", l.p95},
                   {"p99_us", l.p99},
                   {"percentile", o.percentile},
                   {"percentile_us", l.pct_us},
                   {"server_queue_us", l.queue_us},
                   {"server_compute_input_us", l.compute_input_us},
                   {"server_compute_infer_us", l.compute_infer_us},
                   {"server_compute_output_us", l.compute_output_us},
                   {"overhead_us", l.overhead_us},
                   {"server_request_us", l.server_request_us},
                   {"server_overhead_us", l.server_overhead_us},
                   {"requests", l.requests},
                   {"errors", l.errors},
                   {"first_error", l.first_error},
                   {"sent", l.sent},
                   {"windows", l.windows},
                   {"stable", l.stable},
                   {"client_cpu_cores", l.client_cores}});
    fmt::print("{}\n", json{{"model", o.model},
                            {"batch_size", o.batch},
                            {"binary", o.binary},
                            {"protocol", o.protocol},
                            {"shared_memory", o.shared_memory},
                            {"results", a}}
                           .dump(2));
    return kExitOk;
  }
  Table t({rate ? "rate/s" : "concurrency", "infer/s", "avg us", "p50 us", "p90 us", "p95 us", "p99 us", "queue us",
           "compute us", "overhead us", "server ovh us", "errors"},
          fmt::format("gpuopt perf: model '{}', batch {}, {}, {}", o.model, o.batch, o.protocol,
                      o.shared_memory != "none" ? o.shared_memory + " shared memory"
                      : o.protocol == "grpc"    ? "raw tensors"
                      : o.binary                ? "binary tensors"
                                                : "JSON tensors"));
  for (const auto& l : levels)
    t.add({fmt::format("{}", l.value), fmt::format("{:.1f}", l.throughput), fmt::format("{:.0f}", l.avg_us),
           fmt::format("{:.0f}", l.p50), fmt::format("{:.0f}", l.p90), fmt::format("{:.0f}", l.p95),
           fmt::format("{:.0f}", l.p99), fmt::format("{:.1f}", l.queue_us),
           fmt::format("{:.1f}", l.compute_input_us + l.compute_infer_us + l.compute_output_us),
           fmt::format("{:.1f}", l.overhead_us), fmt::format("{:.1f}", l.server_overhead_us),
           fmt::format("{}", l.errors)});
  fmt::print("{}", t.render());
  return kExitOk;
}

void setup(CLI::App& app) {
  auto* cmd = app.add_subcommand("perf", "Load-test a KServe v2 server (perf_analyzer-like): throughput and latency");
  auto o = std::make_shared<PerfOptions>();
  cmd->add_option("-m,--model-name", o->model, "Model to load-test")->required();
  cmd->add_option("-u,--url", o->url, "Server host:port (default 127.0.0.1:8000, with -i grpc 127.0.0.1:8001)");
  cmd->add_option("-i,--protocol", o->protocol, "http or grpc")
      ->check(one_of({"http", "grpc"}))
      ->capture_default_str();
  cmd->add_option("--shared-memory", o->shared_memory,
                  "none, system or cuda: pass input and output tensors through shared memory regions")
      ->check(one_of({"none", "system", "cuda"}))
      ->capture_default_str();
  cmd->add_option("--output-shared-memory-size", o->output_shm_size, "Bytes of shared memory per output")
      ->check(int_range(1))
      ->capture_default_str();
  cmd->add_option("--concurrency-range", o->concurrency_range, "start[:end[:step]] requests in flight")
      ->capture_default_str();
  cmd->add_option("--request-rate-range", o->request_rate_range, "start[:end[:step]] requests/s (open loop)");
  cmd->add_option("-b,--batch-size", o->batch, "Rows per request")->check(int_range(1, kMaxBatch))->capture_default_str();
  cmd->add_option("--shape", o->shapes, "NAME:d1,d2 for inputs with dynamic dims (without the batch dim)");
  cmd->add_flag("--json-data", o->json_data, "Send JSON tensors (default: binary tensor extension)");
  cmd->add_option("-p,--measurement-interval", o->interval_ms, "Window length in ms")
      ->check(int_range(10, 3600000))
      ->capture_default_str();
  cmd->add_option("-s,--stability-percentage", o->stability, "Allowed throughput spread of 3 windows")
      ->check(real_range(0.01, 1000))
      ->capture_default_str();
  cmd->add_option("-r,--max-trials", o->max_trials, "Windows at most per level")
      ->check(int_range(1, 10000))
      ->capture_default_str();
  cmd->add_flag("--json", o->json_out, "Print JSON");
  cmd->add_option("--input-data", o->input_data,
                  "zero, random (the default) or perf_analyzer's JSON file of request inputs (and validation_data)");
  cmd->add_option("--percentile", o->percentile,
                  "Stabilize on the pN latency too (and report it as the headline), as perf_analyzer")
      ->check(int_range(1, 99));
  cmd->add_flag("-a,--async", o->async,
                "Accepted for perf_analyzer command lines: every concurrency level already keeps its N requests "
                "in flight at once (one connection each)");
  cmd->add_flag("--sync", o->sync, "Accepted for perf_analyzer command lines (see --async)");
  cmd->add_option("--measurement-mode", o->measurement_mode,
                  "time_windows (windows of -p ms) or count_windows (a window ends after --measurement-request-count "
                  "requests)")
      ->check(one_of({"time_windows", "count_windows"}))
      ->capture_default_str();
  cmd->add_option("--measurement-request-count", o->measurement_request_count,
                  "Requests per window in count_windows mode")
      ->check(int_range(1, 100000000))
      ->capture_default_str();
  cmd->add_flag("--verbose-csv", o->verbose_csv,
                "CSV also gets perf_analyzer's Avg latency, request/response and response wait columns");
  cmd->add_option("--request-distribution", o->distribution, "Open loop: constant or poisson intervals")
      ->check(one_of({"constant", "poisson"}));
  cmd->add_option("-f,--csv", o->csv, "Also write a CSV file");
  // OpenAI mode (perf_llm.h): language models over /v1/chat/completions or /v1/completions.
  auto service_kind = std::make_shared<std::string>("kserve");
  cmd->add_option("--service-kind", *service_kind, "kserve (v2 inference) or openai (streaming LLM requests)")
      ->check(one_of({"kserve", "openai"}))
      ->capture_default_str();
  auto llm = std::make_shared<llmperf::Options>();
  llmperf::add_options(cmd, llm);
  cmd->callback([o, llm, service_kind, cmd] {
    if (*service_kind == "openai" || cmd->count("--endpoint-type") > 0) {
      llm->model = o->model;
      llm->url = o->url;
      llm->json = o->json_out;
      set_exit_code(llmperf::run(*llm));
      return;
    }
    o->binary = !o->json_data;
    set_exit_code(run(*o));
  });
}
GPUOPT_REGISTER_COMMAND(41, setup);

}  // namespace
}  // namespace gpuopt::cli
