// `gpuopt perf`'s measurement of one load level (perf_measure.h).
#include "cli/perf_measure.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <mutex>
#include <thread>

#include <nlohmann/json.hpp>

#include "cli/perf_data.h"
#include "cli/process_cpu.h"

namespace gpuopt::cli {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

double percentile(std::vector<uint64_t>& v, double p) {
  if (v.empty()) return 0;
  size_t k = static_cast<size_t>(p / 100.0 * static_cast<double>(v.size() - 1));
  std::nth_element(v.begin(), v.begin() + static_cast<long>(k), v.end());
  return static_cast<double>(v[k]) / 1000.0;
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
  std::string first_error;
  std::atomic<int> worker_ids{0};
  auto fail = [&](const Status& r) {
    if (errors++ == 0) {
      std::lock_guard<std::mutex> lk(mu);
      first_error = r.to_string();
    }
  };
  // One answer: counted, its outputs checked against validation_data, its latency kept.
  auto record = [&](size_t k, uint64_t ns, Status r, const std::vector<std::pair<std::string, Tensor>>& outs) {
    if (r.ok()) {
      ++sent;  // the server answered it (and counted it a success), whatever validation finds
      r = check_outputs(work->requests[k], outs);
    }
    if (!r.ok()) return fail(r);
    std::lock_guard<std::mutex> lk(mu);
    window_lat.push_back(ns);
  };
  const bool validate = std::any_of(work->requests.begin(), work->requests.end(),
                                    [](const PerfRequest& r) { return !r.expected.empty(); });
  // -a over gRPC: a few threads, each keeping its share of the N requests in flight through one
  // completion queue, instead of N threads each blocked in a call.
  const bool async = o.async && tgt.protocol == "grpc" && !rate;
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const int threads = rate ? std::max(4, cores)
                      : async ? std::clamp(static_cast<int>(value), 1, std::max(1, cores / 4))
                              : static_cast<int>(value);
  auto worker = [&] {
    const int id = worker_ids++;
    auto client = make_perf_client(tgt, work, id);
    if (!client.ok()) return fail(client.status());
    PerfClient& c = **client;
    if (async) {
      const int inflight = static_cast<int>(value) / threads + (id < static_cast<int>(value) % threads ? 1 : 0);
      Status r = c.run_async(inflight, [&] { return next_request++ % work->requests.size(); }, stop, validate, record);
      if (!r.ok()) fail(r);
      return;
    }
    while (!stop.load()) {
      if (rate) {
        std::this_thread::sleep_until(arrivals.next());
        if (stop.load()) break;
      }
      const size_t k = next_request++ % work->requests.size();
      std::vector<std::pair<std::string, Tensor>> outs;
      auto s = Clock::now();
      // With validation_data the answer's outputs are decoded too (inside the latency, as perf_analyzer).
      Status r = c.infer(k, work->requests[k].expected.empty() ? nullptr : &outs);
      record(k, static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - s).count()),
             std::move(r), outs);
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

}  // namespace gpuopt::cli
