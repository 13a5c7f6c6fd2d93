// `gpuopt perf` load shapes: requests from perf_analyzer's --input-data JSON (with optional
// validation_data checked against every response), and the arrival times of an open-loop run
// (constant intervals, or a Poisson process: exponential intervals, seeded).
//
//   {"data": [{"INPUT0": [1, 2, 3, 4]},                                  // one request per entry
//             {"INPUT0": {"content": [5, 6, 7, 8], "shape": [4]}}],      // shape without the batch dim
//    "validation_data": [{"OUTPUT0": [2, 4, 6, 8]}, {"OUTPUT0": [10, 12, 14, 16]}]}
//
// Each entry is one sample; a request of batch size b repeats it b times, as perf_analyzer does.
#pragma once

#include "core/status.h"
#include "core/tensor.h"

#include <nlohmann/json.hpp>

#include <chrono>
#include <mutex>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace gpuopt::cli {

// One request of the load (perf_client.h sends it over HTTP or gRPC, in shared memory or not).
struct PerfRequest {
  std::string body;  // the HTTP body: JSON, or JSON then binary tensors (header_length bytes of JSON)
  size_t header_length = 0;
  // Outputs every response must carry (validation_data), compared within 1e-5 relative + 1e-6.
  std::vector<std::pair<std::string, Tensor>> expected;
};

// `meta` is GET /v2/models/NAME (its inputs: name, datatype, shape with -1 for the batch dim).
Result<std::vector<PerfRequest>> load_input_data(const std::string& path, const nlohmann::json& meta, int64_t batch,
                                                 bool binary);

// perf_analyzer's --concurrency-range / --request-rate-range: start[:end[:step]], inclusive.
Result<std::vector<double>> parse_range(const std::string& s);

// Checks a response's outputs (PerfClient::infer decodes them) against r.expected; the error
// names the output and the first element that differs.
Status check_outputs(const PerfRequest& r, const std::vector<std::pair<std::string, Tensor>>& outputs);

// Arrival times of an open-loop run at `rate` requests/s, from `start`: constant intervals or
// a Poisson process. Thread-safe: each call hands out the next arrival.
class ArrivalSchedule {
 public:
  using Clock = std::chrono::steady_clock;
  ArrivalSchedule(double rate, bool poisson, Clock::time_point start, uint64_t seed = 42);
  Clock::time_point next();

 private:
  std::mutex mu_;
  double rate_;
  bool poisson_;
  Clock::time_point start_;
  double t_ = 0;  // seconds after start of the next arrival
  uint64_t k_ = 0;
  std::mt19937_64 rng_;
};

}  // namespace gpuopt::cli
