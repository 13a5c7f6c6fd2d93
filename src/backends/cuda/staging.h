// Host <-> device copies outside the kernels: the pinned staging buffer each execution context
// copies inputs and outputs through, and the pinned copies a captured CUDA graph keeps of the
// shape-derived host values it uploads on every replay.
#pragma once

#include "core/status.h"
#include "core/tensor.h"

#include <memory>
#include <vector>

typedef struct CUstream_st* cudaStream_t;

namespace gpuopt::cuda {

// One context's copies through a pinned buffer that grows as needed (an upload from host memory
// that is already pinned goes straight up). Both directions wait for the copy (the buffer is
// reused by the next one), so neither may run inside a capture.
class Staging {
 public:
  Staging() = default;
  Staging(const Staging&) = delete;
  Staging& operator=(const Staging&) = delete;
  ~Staging();
  Status upload(const Tensor& host, Tensor* dev, cudaStream_t s);
  Status download(const Tensor& dev, Tensor* host, cudaStream_t s);

 private:
  Status reserve(size_t n, cudaStream_t s);
  void* buf_ = nullptr;
  size_t cap_ = 0;
};

// Host values copied up inside a CUDA-graph capture: each gets a pinned buffer that lives as
// long as the graph, so the recorded copy reads the same bytes on every replay and nothing
// waits. Only for values that depend on the input shapes alone (the graph's key).
class PinnedUploads {
 public:
  PinnedUploads() = default;
  PinnedUploads(const PinnedUploads&) = delete;
  PinnedUploads& operator=(const PinnedUploads&) = delete;
  ~PinnedUploads() { clear(); }
  Status upload(const Tensor& host, Tensor* dev, cudaStream_t s);
  void clear();
  size_t bytes() const { return bytes_; }

 private:
  std::vector<void*> bufs_;
  size_t bytes_ = 0;
};

}  // namespace gpuopt::cuda
