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
#include "cli/perf_measure.h"
#include "core/table.h"
#include "net/http.h"
#include "server/kserve.h"

namespace gpuopt::cli {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;



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
  if (o.async && o.sync) return report_error(Status::InvalidArgument("-a/--async and --sync: choose one"), true);
  if (o.async && o.shared_memory != "none")
    return report_error(Status::InvalidArgument("-a/--async with --shared-memory: not supported (every call in flight "
                                                "would share one output slot); leave out -a"),
                        true);
  if (o.async && (o.protocol != "grpc" || rate))
    fmt::print(stderr, "perf: -a applies to gRPC concurrency levels; these requests stay one per thread\n");
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
                "gRPC: the N requests of a concurrency level kept in flight by a few threads through completion "
                "queues (a lighter client) instead of one blocked thread each");
  cmd->add_flag("--sync", o->sync, "One thread and connection per request in flight (the default)");
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
