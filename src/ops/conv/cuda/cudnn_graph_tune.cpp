// TunedGraph (cudnn_graph_tune.h): candidate plans of a cuDNN frontend graph, timed once.
#include "ops/conv/cuda/cudnn_graph_tune.h"

#include "core/cuda_check.h"
#include "core/log.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <set>

namespace gpuopt::cuda {
namespace {

namespace fe = cudnn_frontend;

// cudaEvents for one tuning, destroyed on every path.
struct Events {
  cudaEvent_t start = nullptr, stop = nullptr;
  ~Events() {
    if (start) cudaEventDestroy(start);
    if (stop) cudaEventDestroy(stop);
  }
};

}  // namespace

Result<std::unique_ptr<TunedGraph>> TunedGraph::build(std::shared_ptr<fe::graph::Graph> g, cudnnHandle_t h,
                                                      const GraphTuneOptions& opts, std::string what) {
  auto fail = [&](const char* step, fe::error_t st) {
    return Status::Unimplemented("cuDNN {}: {}", step, st.get_message());
  };
  fe::error_t st = g->validate();
  if (!st.is_good()) return fail("validate", st);
  st = g->build_operation_graph(h);
  if (!st.is_good()) return fail("operation graph", st);
  const std::vector<fe::HeurMode_t> modes = opts.autotune
                                                ? std::vector<fe::HeurMode_t>{fe::HeurMode_t::A, fe::HeurMode_t::B,
                                                                              fe::HeurMode_t::FALLBACK}
                                                : std::vector<fe::HeurMode_t>{fe::HeurMode_t::A, fe::HeurMode_t::FALLBACK};
  st = g->create_execution_plans(modes);
  if (!st.is_good()) return fail("heuristics", st);
  if (opts.autotune) g->deselect_workspace_greater_than(opts.max_workspace);

  auto t = std::unique_ptr<TunedGraph>(new TunedGraph());
  t->g_ = g;
  t->what_ = std::move(what);
  t->reps_ = std::max(1, opts.reps);
  const int64_t count = g->get_execution_plan_count();
  std::vector<std::pair<int64_t, std::string>> order;  // (index, tag), heuristics' order, no duplicates
  std::set<std::string> seen;
  for (int64_t i = 0; i < count; ++i) {
    std::string tag;
    if (!g->get_plan_name_at_index(i, tag).is_good()) tag = "plan" + std::to_string(i);
    if (seen.insert(tag).second) order.emplace_back(i, std::move(tag));
  }
  // A choice made before: that plan alone, when heuristics still list it and it builds.
  if (opts.autotune && !opts.preferred.empty()) {
    for (const auto& [i, tag] : order) {
      if (tag != opts.preferred || !g->build_plan_at_index(i).is_good()) continue;
      int64_t ws = 0;
      if (!g->get_workspace_size_plan_at_index(i, ws).is_good()) break;
      t->plans_.push_back({i, tag, ws});
      t->max_ws_ = ws;
      t->tuned_ = true;
      GPUOPT_LOG(info, "{}: plan {} (the plan cache's choice; not timed again)", t->what_, tag);
      return t;
    }
  }
  const auto t0 = std::chrono::steady_clock::now();
  std::string failures;
  for (const auto& [i, tag] : order) {
    if (static_cast<int>(t->plans_.size()) >= (opts.autotune ? opts.max_plans : 1)) break;
    if (!t->plans_.empty() &&
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() > opts.build_budget_s)
      break;
    st = g->build_plan_at_index(i);
    int64_t ws = 0;
    if (st.is_good()) st = g->get_workspace_size_plan_at_index(i, ws);
    if (!st.is_good()) {
      if (failures.size() < 400) failures += " [" + tag + ": " + st.get_message() + "]";
      continue;
    }
    t->plans_.push_back({i, tag, ws});
    t->max_ws_ = std::max(t->max_ws_, ws);
  }
  if (t->plans_.empty())
    return Status::Unimplemented("cuDNN: no plan of {} heuristic candidates builds{}", order.size(), failures);
  if (t->plans_.size() == 1) t->tuned_ = true;  // nothing to choose between
  t->build_ms_ = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  GPUOPT_LOG(debug, "{}: {} candidate plans of {} built in {:.0f} ms", t->what_, t->plans_.size(), order.size(),
             t->build_ms_);
  return t;
}

int64_t TunedGraph::workspace() const {
  return tuned_.load() ? plans_[chosen_.load()].workspace : max_ws_;
}

std::string TunedGraph::chosen_tag() const {
  return plans_[chosen_.load()].tag;
}

Status TunedGraph::execute(cudnnHandle_t h, cudaStream_t stream, std::unordered_map<int64_t, void*>& pack,
                           void* workspace) {
  GPUOPT_CHECK_CALL(cudnnSetStream(h, stream));
  if (!tuned_.load()) {
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    GPUOPT_CHECK_CALL(cudaStreamIsCapturing(stream, &capture));
    if (capture == cudaStreamCaptureStatusNone) {
      std::lock_guard<std::mutex> lock(tune_mu_);
      if (!tuned_.load()) return tune(h, stream, pack, workspace);  // its last run is the chosen plan's
    }
  }
  fe::error_t st = g_->execute_plan_at_index(h, pack, workspace, plans_[chosen_.load()].index);
  if (!st.is_good()) return Status::Internal("cuDNN execute ({}): {}", plans_[chosen_.load()].tag, st.get_message());
  return Status::Ok();
}

// Every candidate: one warm-up, then reps runs between two events; the fastest is kept and run
// once more last, so the outputs are its own.
Status TunedGraph::tune(cudnnHandle_t h, cudaStream_t stream, std::unordered_map<int64_t, void*>& pack,
                        void* workspace) {
  Events ev;
  GPUOPT_CHECK_CALL(cudaEventCreate(&ev.start));
  GPUOPT_CHECK_CALL(cudaEventCreate(&ev.stop));
  float best = std::numeric_limits<float>::infinity(), first = -1.f;
  size_t best_i = 0;
  int failed = 0;
  for (size_t c = 0; c < plans_.size(); ++c) {
    const int64_t idx = plans_[c].index;
    if (!g_->execute_plan_at_index(h, pack, workspace, idx).is_good()) {
      cudaGetLastError();  // a launch error of that plan only (a sticky one fails the sync below)
      ++failed;
      GPUOPT_LOG(debug, "{}: plan {} does not execute; skipped", what_, plans_[c].tag);
      continue;
    }
    GPUOPT_CHECK_CALL(cudaEventRecord(ev.start, stream));
    bool ok = true;
    for (int r = 0; r < reps_ && ok; ++r) ok = g_->execute_plan_at_index(h, pack, workspace, idx).is_good();
    GPUOPT_CHECK_CALL(cudaEventRecord(ev.stop, stream));
    GPUOPT_CHECK_CALL(cudaEventSynchronize(ev.stop));
    if (!ok) {
      cudaGetLastError();
      ++failed;
      continue;
    }
    float ms = 0;
    GPUOPT_CHECK_CALL(cudaEventElapsedTime(&ms, ev.start, ev.stop));
    ms /= static_cast<float>(reps_);
    if (c == 0) first = ms;
    if (ms < best) {
      best = ms;
      best_i = c;
    }
  }
  if (!std::isfinite(best))
    return Status::Internal("cuDNN: none of {} plans of {} executes", plans_.size(), what_);
  chosen_ = best_i;
  chosen_ms_ = best;
  first_ms_ = first;
  tuned_ = true;
  GPUOPT_LOG(info, "{}: plan {} of {} ({}) {:.1f} us; the first plan {}{} (built in {:.0f} ms)", what_, best_i,
             plans_.size(), plans_[best_i].tag, best * 1e3f,
             first < 0 ? std::string("did not execute") : fmt::format("{:.1f} us", first * 1e3f),
             failed ? fmt::format(" ({} plans skipped: execute failed)", failed) : std::string(), build_ms_);
  fe::error_t st = g_->execute_plan_at_index(h, pack, workspace, plans_[best_i].index);
  if (!st.is_good()) return Status::Internal("cuDNN execute ({}): {}", plans_[best_i].tag, st.get_message());
  return Status::Ok();
}

}  // namespace gpuopt::cuda
