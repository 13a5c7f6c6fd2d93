// The small interface the batcher runs models through. The real one wraps gpuopt::Session
// (session_instance.cpp); tests plug in their own.
//
//   struct Doubler : ModelInstance {
//     Result<std::vector<Tensor>> run(const std::vector<Tensor>& in) override { ... }
//   };
//   ModelSource src{.inputs = {...}, .outputs = {...},
//                   .create = [](const InstanceSpec&) -> Result<std::unique_ptr<ModelInstance>> { ... }};
#pragma once

#include "core/status.h"
#include "core/tensor.h"
#include "gpuopt/session.h"
#include "server/model_config.h"

#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace gpuopt::server {

// One execution context: its own session/stream/buffers. run() is called by one thread at a time.
class ModelInstance {
 public:
  virtual ~ModelInstance() = default;
  // Inputs in the model's input order, batch dim included when the model batches; outputs in
  // the model's output order.
  virtual Result<std::vector<Tensor>> run(const std::vector<Tensor>& inputs) = 0;
  // What its start found in the plan cache (Session::plan_cache); "off" without one.
  virtual PlanCacheStatus plan_cache() const { return {}; }
  // Start work deferred past `ready` (the plan cache's CUDA-graph shapes captured again, one per
  // call: Session::capture_deferred_shape): the batcher calls it on the instance's thread while
  // the instance is idle, until it returns false (nothing left).
  virtual bool background_step() { return false; }

  // Overlapped batches (parameters gpuopt.pipeline on): begin() starts a batch, finish() returns
  // the oldest begun batch's outputs; at most kMaxBegun begun and not finished. The batcher
  // begins the next batch before it finishes the current one only when overlaps() is true. The
  // defaults run the batch inside begin().
  static constexpr int kMaxBegun = 2;
  virtual bool overlaps() const { return false; }
  virtual Status begin(const std::vector<Tensor>& inputs) {
    begun_.push_back(run(inputs));
    return Status::Ok();
  }
  virtual Result<std::vector<Tensor>> finish() {
    if (begun_.empty()) return Status::FailedPrecondition("finish: no batch was begun");
    Result<std::vector<Tensor>> r = std::move(begun_.front());
    begun_.pop_front();
    return r;
  }

 private:
  std::deque<Result<std::vector<Tensor>>> begun_;
};

struct InstanceSpec {
  std::string name;                        // "simple_0_1"
  Device device;                           // where it runs: cpu, or cuda:N (KIND_GPU on GPU N)
  std::string precision = "fp32";          // compute precision (SessionOptions::precision)
  bool cuda_graphs = true;                 // SessionOptions::cuda_graphs
  std::string cache_dir;                   // SessionOptions::cache_dir
  bool defer_graph_capture = true;         // SessionOptions::defer_graph_capture (background_step)
  bool pipeline = false;                   // ModelConfig::pipeline: batches overlap (Session::begin_ordered)
  std::optional<KernelSettings> kernels;   // SessionOptions::kernels (unset: the environment's)
};

// A loaded model file: what it declares, and how to make an execution context for it.
struct ModelSource {
  std::vector<IoSpec> inputs;
  std::vector<IoSpec> outputs;
  std::function<Result<std::unique_ptr<ModelInstance>>(const InstanceSpec&)> create;
};

// Opens a model file (path to model.onnx); the server calls it off the request threads.
using ModelLoader = std::function<Result<ModelSource>(const std::string& path)>;

// The loader over gpuopt::Session (Device cpu, or cuda:N for KIND_GPU instances).
ModelLoader session_model_loader();
// Number of CUDA devices usable by the engine (0 without CUDA).
int cuda_device_count();

}  // namespace gpuopt::server
