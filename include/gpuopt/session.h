// gpuopt::Session — load an ONNX model, inspect its inputs/outputs, run it with named tensors.
//
//   #include "gpuopt/gpuopt.h"
//
//   auto s = gpuopt::Session::load("resnet.onnx", gpuopt::SessionOptions{});  // fast CPU backend, fp32
//   if (!s.ok()) { fmt::print(stderr, "{}\n", s.status().to_string()); return 1; }
//   gpuopt::Session& session = **s;
//   for (const auto& in : session.inputs())          // name, dtype, shape (-1 = dynamic dim)
//     fmt::print("{} {} {}\n", in.name, gpuopt::dtype_name(in.dtype), in.shape_string());
//   gpuopt::Tensor x = gpuopt::Tensor::zeros(gpuopt::DType::F32, {1, 3, 64, 64});
//   auto out = session.run({{"input", x}});          // Result<NamedTensors>
//   if (!out.ok()) { ... out.status().to_string() ... }
//   const gpuopt::Tensor& logits = out->at(0).second; // outputs in model order
//
// Errors are gpuopt::Status values with one clear line (missing/extra inputs, wrong dtype or
// rank, shape mismatches, unknown ops at load). Session::run is thread-safe: concurrent calls
// keep separate intermediates.
#pragma once

#include "core/dtype.h"
#include "core/status.h"
#include "core/tensor.h"
#include "gpuopt/kernel_settings.h"
#include "gpuopt/plan_cache_status.h"
#include "gpuopt/run_profile.h"

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace gpuopt {

class Graph;
class Backend;
class Executable;

struct SessionOptions {
  // Device::cpu() (the fast CPU backend), kCpuReference (core/device.h: the reference kernels) or
  // a CUDA device ("cuda" = cuda:0, "cuda:N") when built in; user
  // text goes through parse_device (core/device.h). A device that does not exist fails the load.
  Device device = Device::cpu();
  bool optimize = true;        // run the graph passes (dead nodes, Identity/Dropout, constant folding)
  // "fp32", "fp16" or "bf16": compute precision; the model's f32 inputs/outputs stay f32.
  // "int8": a QDQ model (gpuopt quantize) with its float rest in fp16 on the GPU, f32 on the CPU;
  // a model without QuantizeLinear/DequantizeLinear is refused (docs/quantization.md).
  std::string precision = "fp32";
  size_t memory_limit = 0;     // bytes the backend may hold for a run's tensors; 0 = no limit
  // CUDA: capture each input shape's run as a CUDA graph and replay it (docs/cuda.md). Off
  // when a memory limit is set (a graph keeps its intermediates' memory while it lives).
  bool cuda_graphs = true;
  // CUDA: the plan cache directory (--cache-dir, GPUOPT_CACHE_DIR; docs/engine.md): each shape's
  // algorithm and fusion choices are read from DIR/<model hash>.plans and written back. "" = none.
  // Only Session::load caches (the model file's bytes are part of the key).
  std::string cache_dir;
  // CUDA with a plan cache: the input shapes it lists as captured are captured again by
  // capture_deferred_shape() calls instead of inside load() (the server does them after `ready`).
  bool defer_graph_capture = false;
  // The kernel and pass choices (gpuopt/kernel_settings.h); unset: KernelSettings::from_env() at
  // load, so the GPUOPT_* variables supply the defaults. Part of the plan cache's key.
  std::optional<KernelSettings> kernels;
};

// One model input or output as the model declares it (after load-time shape inference).
struct TensorInfo {
  std::string name;
  DType dtype = DType::Undefined;
  bool rank_known = false;
  Shape shape;                     // -1 where the dim is dynamic (symbolic or unknown)
  std::vector<std::string> dims;   // per dim: "3", a symbol such as "batch"/"N", or "?"
  // True when dim 0 is dynamic: the input takes any batch size.
  bool dynamic_batch() const { return rank_known && !shape.empty() && shape[0] < 0; }
  std::string shape_string() const;  // "[batch,3,64,64]"
};

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

struct RunStats {
  double run_ms = 0.0;
};

class Session {
 public:
  static Result<std::unique_ptr<Session>> load(const std::string& model_path, const SessionOptions& options = {});
  // Takes an already built graph (tests, generators).
  static Result<std::unique_ptr<Session>> from_graph(Graph graph, const SessionOptions& options = {});
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  const std::vector<TensorInfo>& inputs() const { return inputs_; }
  const std::vector<TensorInfo>& outputs() const { return outputs_; }
  int opset() const;
  const Device& device() const { return options_.device; }
  // The optimized graph the backend runs (for inspect and tests).
  const Graph& graph() const { return *graph_; }
  // What the start found in the plan cache (SessionOptions::cache_dir).
  PlanCacheStatus plan_cache() const;

  // Every model input must be given exactly once by name (host tensors); outputs come back in
  // model order. Wrong names, dtypes, ranks or fixed dims fail with a Status naming the input.
  Result<NamedTensors> run(const NamedTensors& inputs) const;
  // Same, inputs in model order.
  Result<std::vector<Tensor>> run_ordered(const std::vector<Tensor>& inputs) const;
  // Same as run(), and fills `profile` (per-node times when profile->per_node).
  Result<NamedTensors> run(const NamedTensors& inputs, RunProfile* profile) const;

  // Consecutive runs overlapped (the server's instances): begin_ordered() checks the inputs (as
  // run_ordered) and starts a run without waiting for it; finish_ordered() waits for the oldest
  // begun run and returns its outputs (or its error). At most 2 begun and not finished
  // (FailedPrecondition above that); one thread at a time, apart from run() calls. On the CUDA
  // backend a captured shape's second run uploads while the first computes, and the first
  // downloads while the second computes (docs/server.md); elsewhere begin_ordered runs at once.
  Status begin_ordered(const std::vector<Tensor>& inputs);
  Result<std::vector<Tensor>> finish_ordered();
  // SessionOptions::defer_graph_capture: captures the next shape the plan cache listed; false
  // when none is left (or nothing was deferred). Call it between runs, on the thread that runs.
  bool capture_deferred_shape();

 private:
  Session();
  Status init(Graph graph, const SessionOptions& options, const std::string& model_hash = "");
  Status validate(const std::vector<Tensor>& inputs) const;

  SessionOptions options_;
  std::unique_ptr<Graph> graph_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Executable> exe_;
  std::vector<TensorInfo> inputs_;
  std::vector<TensorInfo> outputs_;
  // begin_ordered on a backend that does not overlap runs: the results, oldest first.
  std::vector<Result<std::vector<Tensor>>> done_;
  int begun_ = 0;  // begun and not finished
};

}  // namespace gpuopt
