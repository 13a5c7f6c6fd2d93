// Engine autotuning for cuDNN frontend graphs (the graph API). cuDNN's first heuristic plan is
// often far from its fastest for a shape (int8 convolutions on the H200: plan 0 ran at a fraction
// of the tensor-core rate), so a TunedGraph builds several candidate plans (heuristics A, B and
// the fallback list, deduplicated by engine tag, at most max_plans, none with a workspace over
// max_workspace, building stopped after build_budget_s), and on the first run outside a stream
// capture times each one on the run's own buffers (one warm-up, then `reps` runs between
// cudaEvents on the run's stream) and keeps the fastest. Plans that fail to execute are skipped.
// Inside a capture an untuned graph runs its first candidate (heuristics' plan 0) and tunes later.
// Without autotune it builds and runs plan 0 only: what `Graph::build(h, {A, FALLBACK})` does.
//
//   auto g = std::make_shared<fe::graph::Graph>(); ... tensors, ops ...
//   GPUOPT_ASSIGN_OR_RETURN(auto t, TunedGraph::build(g, handle, opts, "Int8Conv 256,64,..."));
//   void* ws = ... t->workspace() bytes ...;
//   GPUOPT_RETURN_IF_ERROR(t->execute(handle, stream, pack, ws));
//
// The timed runs write the graph's outputs several times; the chosen plan's run is the last, so
// the outputs are that run's. The caller's outputs must not alias its inputs (the memory plan
// never gives a node's output the bytes of its inputs).
#pragma once

#include "core/status.h"

// The frontend's symbols come from the libcudnn gpuopt links (sdpa.cpp defines its handle).
#ifndef NV_CUDNN_FRONTEND_USE_DYNAMIC_LOADING
#define NV_CUDNN_FRONTEND_USE_DYNAMIC_LOADING 1
#endif
#include <cudnn_frontend.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

typedef struct CUstream_st* cudaStream_t;

namespace gpuopt::cuda {

struct GraphTuneOptions {
  bool autotune = true;
  int max_plans = 16;
  int64_t max_workspace = int64_t{256} << 20;
  double build_budget_s = 1.0;  // no further candidate is built once this much time has gone
  int reps = 3;
  // An engine tag chosen before (the plan store): when heuristics list it, it is built alone and
  // used without timing; otherwise (another cuDNN, another GPU) the graph tunes as usual.
  std::string preferred;
};

class TunedGraph {
 public:
  // Validates and lowers g, queries heuristics and builds the candidates. `what` names the graph
  // in the log lines ("Int8Conv <shape>"). An error when no plan builds.
  static Result<std::unique_ptr<TunedGraph>> build(std::shared_ptr<cudnn_frontend::graph::Graph> g, cudnnHandle_t h,
                                                   const GraphTuneOptions& opts, std::string what);

  // Workspace bytes execute() needs now: the largest candidate's until tuned, then the chosen one's.
  int64_t workspace() const;
  // Runs the graph on `stream` (set on h here). Tunes first when needed and possible (see above).
  Status execute(cudnnHandle_t h, cudaStream_t stream, std::unordered_map<int64_t, void*>& pack, void* workspace);

  bool tuned() const { return tuned_.load(); }
  size_t candidates() const { return plans_.size(); }
  // The engine tag of the plan in use (the plan store's value) and, once tuned, its time and the
  // first candidate's (ms per run; < 0 when not measured).
  std::string chosen_tag() const;
  float chosen_ms() const { return chosen_ms_.load(); }
  float first_ms() const { return first_ms_.load(); }

 private:
  struct Candidate {
    int64_t index;  // in the graph's plan list
    std::string tag;
    int64_t workspace;
  };
  Status tune(cudnnHandle_t h, cudaStream_t stream, std::unordered_map<int64_t, void*>& pack, void* workspace);

  std::shared_ptr<cudnn_frontend::graph::Graph> g_;
  std::vector<Candidate> plans_;
  std::string what_;
  int reps_ = 3;
  double build_ms_ = 0;
  int64_t max_ws_ = 0;
  std::atomic<size_t> chosen_{0};
  std::atomic<bool> tuned_{false};
  std::atomic<float> chosen_ms_{-1.f}, first_ms_{-1.f};
  std::mutex tune_mu_;
};

}  // namespace gpuopt::cuda
