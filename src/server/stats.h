// Per model-version statistics: Triton's statistics extension (counts and cumulative ns per
// phase, per batch size) and histograms for the metrics endpoint. Updates take one short lock;
// readers take a snapshot.
//
//   ModelStats s;
//   s.record_execution(batch_rows, requests, in_ns, infer_ns, out_ns);
//   s.record_request(ok, total_ns, queue_ns, in_ns, infer_ns, out_ns, "");
//   nlohmann::json j = s.json("simple", "1");            // one entry of "model_stats"
#pragma once

#include <nlohmann/json.hpp>

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace gpuopt::server {

// Cumulative histogram with fixed upper bounds (Prometheus style; the last bucket is +Inf).
struct Histogram {
  std::vector<double> bounds;
  std::vector<uint64_t> counts;  // bounds.size() + 1
  double sum = 0;
  uint64_t count = 0;
  explicit Histogram(std::vector<double> b = {}) : bounds(std::move(b)), counts(bounds.size() + 1, 0) {}
  void observe(double v);
};

const std::vector<double>& duration_buckets_us();
const std::vector<double>& batch_size_buckets();

struct Duration {
  uint64_t count = 0;
  uint64_t ns = 0;
  void add(uint64_t n) {
    ++count;
    ns += n;
  }
};

// Failure reasons as Triton labels them.
enum class FailReason { kRejected, kCanceled, kBackend, kOther };
const char* fail_reason_name(FailReason r);

struct StatsSnapshot {
  Duration success, fail, queue, compute_input, compute_infer, compute_output;
  uint64_t inference_count = 0;  // inferences (batch rows) completed
  uint64_t execution_count = 0;  // model executions (batches)
  uint64_t last_inference_ms = 0;
  std::array<uint64_t, 4> failures{};  // by FailReason
  struct BatchStat {
    Duration compute_input, compute_infer, compute_output;
  };
  std::map<int64_t, BatchStat> batch_stats;
  Histogram request_us{duration_buckets_us()}, queue_us{duration_buckets_us()}, compute_us{duration_buckets_us()};
  Histogram batch_size{batch_size_buckets()};
};

class ModelStats {
 public:
  // One model execution of `rows` batch rows made of `requests` requests.
  void record_execution(int64_t rows, uint64_t in_ns, uint64_t infer_ns, uint64_t out_ns);
  // One request finished (success or failure). Phases are 0 when it never ran.
  void record_request(bool ok, uint64_t total_ns, uint64_t queue_ns, uint64_t in_ns, uint64_t infer_ns, uint64_t out_ns,
                      int64_t rows, FailReason reason = FailReason::kOther);
  StatsSnapshot snapshot() const;
  // {"name":..,"version":..,"last_inference":..,"inference_count":..,...} — Triton's shape.
  nlohmann::json json(const std::string& name, const std::string& version) const;

  std::atomic<int64_t> pending{0};  // requests accepted and not yet answered

 private:
  mutable std::mutex mu_;
  StatsSnapshot s_;
};

uint64_t now_ns();  // steady clock
uint64_t wall_ms();

}  // namespace gpuopt::server
