#include "llm/cuda/profile.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace gpuopt::llm::cuda {

OpProfiler::~OpProfiler() {
  print();
  for (cudaEvent_t e : events_) cudaEventDestroy(e);
}

void OpProfiler::init_from_env() {
  const char* v = std::getenv("GPUOPT_LLM_PROFILE");
  enabled_ = v && std::strcmp(v, "0") != 0;
}

void OpProfiler::begin(cudaStream_t s) {
  used_ = 0;
  ops_.clear();
  mark(nullptr, s);
}

void OpProfiler::mark(const char* op, cudaStream_t s, int64_t bytes) {
  if (used_ == events_.size()) {
    cudaEvent_t e = nullptr;
    if (cudaEventCreate(&e) != cudaSuccess) return;
    events_.push_back(e);
  }
  cudaEventRecord(events_[used_++], s);
  ops_.push_back({op, bytes});
}

void OpProfiler::end() {
  if (used_ == 0) return;
  cudaEventSynchronize(events_[used_ - 1]);
  // The first step also times the GEMM candidates (gemm.h): left out.
  if (!skipped_first_) {
    skipped_first_ = true;
    used_ = 0;
    return;
  }
  for (size_t i = 1; i < used_; ++i) {
    float ms = 0;
    cudaEventElapsedTime(&ms, events_[i - 1], events_[i]);
    Total& t = totals_[ops_[i].first];
    t.ms += ms;
    t.calls += 1;
    t.bytes += ops_[i].second;
  }
  ++steps_;
  used_ = 0;
}

void OpProfiler::print() const {
  if (!enabled_ || steps_ == 0) return;
  std::vector<std::pair<std::string, Total>> v(totals_.begin(), totals_.end());
  std::sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.second.ms > b.second.ms; });
  double all = 0;
  for (const auto& [n, t] : v) all += t.ms;
  std::string out =
      fmt::format("llm profile: {} eager steps, {:.3f} ms per step\n", steps_, all / static_cast<double>(steps_));
  for (const auto& [n, t] : v) {
    out += fmt::format("  {:14} {:8.3f} ms/step {:5.1f}%  {:6} calls/step  {:7.2f} us/call", n,
                       t.ms / static_cast<double>(steps_), 100.0 * t.ms / all, t.calls / steps_,
                       1e3 * t.ms / static_cast<double>(t.calls));
    if (t.bytes > 0) out += fmt::format("  {:7.0f} GB/s", static_cast<double>(t.bytes) / (t.ms * 1e-3) / 1e9);
    out += "\n";
  }
  std::fputs(out.c_str(), stderr);
}

}  // namespace gpuopt::llm::cuda
