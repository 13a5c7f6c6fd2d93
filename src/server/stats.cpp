#include "server/stats.h"

#include <chrono>

namespace gpuopt::server {

void Histogram::observe(double v) {
  size_t i = 0;
  while (i < bounds.size() && v > bounds[i]) ++i;
  ++counts[i];
  sum += v;
  ++count;
}

const std::vector<double>& duration_buckets_us() {
  static const std::vector<double> b = {10,    25,    50,     100,    250,    500,     1000,    2500,    5000,    10000,
                                        25000, 50000, 100000, 250000, 500000, 1000000, 2500000, 5000000, 10000000};
  return b;
}

const std::vector<double>& batch_size_buckets() {
  static const std::vector<double> b = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024};
  return b;
}

const char* fail_reason_name(FailReason r) {
  switch (r) {
    case FailReason::kRejected:
      return "REJECTED";
    case FailReason::kCanceled:
      return "CANCELED";
    case FailReason::kBackend:
      return "BACKEND";
    case FailReason::kOther:
      return "OTHER";
  }
  return "OTHER";
}

uint64_t now_ns() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

uint64_t wall_ms() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count());
}

void ModelStats::record_execution(int64_t rows, uint64_t in_ns, uint64_t infer_ns, uint64_t out_ns) {
  std::lock_guard<std::mutex> lk(mu_);
  s_.execution_count++;
  s_.inference_count += static_cast<uint64_t>(rows);
  s_.last_inference_ms = wall_ms();
  auto& b = s_.batch_stats[rows];
  b.compute_input.add(in_ns);
  b.compute_infer.add(infer_ns);
  b.compute_output.add(out_ns);
  s_.batch_size.observe(static_cast<double>(rows));
  s_.compute_us.observe(static_cast<double>(in_ns + infer_ns + out_ns) / 1000.0);
}

void ModelStats::record_request(bool ok, uint64_t total_ns, uint64_t queue_ns, uint64_t in_ns, uint64_t infer_ns,
                                uint64_t out_ns, int64_t rows, FailReason reason) {
  std::lock_guard<std::mutex> lk(mu_);
  if (ok) {
    s_.success.add(total_ns);
    s_.queue.add(queue_ns);
    s_.compute_input.add(in_ns);
    s_.compute_infer.add(infer_ns);
    s_.compute_output.add(out_ns);
    s_.request_us.observe(static_cast<double>(total_ns) / 1000.0);
    s_.queue_us.observe(static_cast<double>(queue_ns) / 1000.0);
  } else {
    s_.fail.add(total_ns);
    s_.failures[static_cast<size_t>(reason)]++;
  }
  (void)rows;
}

StatsSnapshot ModelStats::snapshot() const {
  std::lock_guard<std::mutex> lk(mu_);
  return s_;
}

nlohmann::json ModelStats::json(const std::string& name, const std::string& version) const {
  StatsSnapshot s = snapshot();
  auto d = [](const Duration& x) { return nlohmann::json{{"count", x.count}, {"ns", x.ns}}; };
  nlohmann::json batches = nlohmann::json::array();
  for (auto& [size, b] : s.batch_stats)
    batches.push_back({{"batch_size", size},
                       {"compute_input", d(b.compute_input)},
                       {"compute_infer", d(b.compute_infer)},
                       {"compute_output", d(b.compute_output)}});
  return {{"name", name},
          {"version", version},
          {"last_inference", s.last_inference_ms},
          {"inference_count", s.inference_count},
          {"execution_count", s.execution_count},
          {"inference_stats",
           {{"success", d(s.success)},
            {"fail", d(s.fail)},
            {"queue", d(s.queue)},
            {"compute_input", d(s.compute_input)},
            {"compute_infer", d(s.compute_infer)},
            {"compute_output", d(s.compute_output)},
            {"cache_hit", d({})},
            {"cache_miss", d({})}}},
          {"response_stats", nlohmann::json::object()},
          {"batch_stats", batches},
          {"memory_usage", nlohmann::json::array()}};
}

}  // namespace gpuopt::server
