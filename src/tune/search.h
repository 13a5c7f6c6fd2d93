// Internals of `gpuopt tune` shared by its files (tune.h is the interface).
#pragma once

#include "gpuopt/session.h"
#include "tune/tune.h"

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>

namespace gpuopt::tune {

// Mean NVML GPU utilisation of device 0 between start() and stop(), sampled every 50 ms; -1
// where there is no NVML or no GPU.
class GpuUtil {
 public:
  static std::unique_ptr<GpuUtil> open();  // nullptr without NVML or a GPU
  ~GpuUtil();
  void start();
  double stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The state of one search: the points so far, progress and the time budget.
struct Searcher {
  const TuneOptions& options;
  TuneResult& result;
  ProgressFn progress;
  GpuUtil* util = nullptr;
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
  int expected = 0;  // points expected in all (grows as the search learns)
  // Set when the search cannot go on for a reason outside the model (a serve that cannot bind
  // its port or start at all, a server that died): the command fails with it.
  std::string fatal{};
  bool out_of_time();
  void begin(const std::string& what);  // reports progress before a point
  void add(Point p);
};

Result<std::unique_ptr<Session>> load_session(const TuneOptions& o, const std::string& precision);
// What the model file holds that a precision needs (read once per path).
struct ModelKinds {
  bool qdq = false;            // QuantizeLinear/DequantizeLinear
  bool quantized_ops = false;  // QLinear*, *Integer
  bool fp8 = false;            // Fp8Gemm (ai.gpuopt)
  std::string error;           // the model could not be read
};
ModelKinds model_kinds(const std::string& model);
// The session precision a tune precision runs at (and the config's gpuopt.precision): "int8" on a
// Q/DQ model is the session's int8; on a model of QLinear*/*Integer nodes only, "fp32" (those
// nodes are its int8). The others are themselves.
std::string session_precision(const std::string& model, const std::string& precision);
// Why the model cannot be searched at `precision` ("" when it can): int8 needs quantized nodes,
// fp8 Fp8Gemm nodes.
std::string precision_unavailable(const TuneOptions& o, const std::string& precision);
Point measure_offline(Session& s, const TuneOptions& o, const std::string& precision, int64_t batch, GpuUtil* util);
void search_offline(const TuneOptions& o, const std::string& precision, Searcher& sr);
// Online points for one precision, at max_batch_size candidates from the offline search.
void search_online(const TuneOptions& o, const std::string& precision, Searcher& sr);

}  // namespace gpuopt::tune
