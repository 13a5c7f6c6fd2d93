// Per-op timing of eager steps (GPUOPT_LLM_PROFILE=1): an event after each launch, the
// differences summed by op name and printed to stderr when the runner goes away, with the bytes
// each op must read (weights) as GB/s. Launch gaps of an eager step land on the op after them, so
// the small kernels read high; the GEMMs, tens of microseconds each, read true.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace gpuopt::llm::cuda {

class OpProfiler {
 public:
  ~OpProfiler();
  void init_from_env();
  bool enabled() const { return enabled_; }
  void begin(cudaStream_t s);
  void mark(const char* op, cudaStream_t s, int64_t bytes = 0);
  void end();  // synchronizes and accumulates
  void print() const;

 private:
  struct Total {
    double ms = 0;
    int64_t calls = 0;
    int64_t bytes = 0;
  };
  bool enabled_ = false;
  bool skipped_first_ = false;
  std::vector<cudaEvent_t> events_;
  std::vector<std::pair<const char*, int64_t>> ops_;
  size_t used_ = 0;
  int64_t steps_ = 0;
  std::map<std::string, Total> totals_;
};

}  // namespace gpuopt::llm::cuda
