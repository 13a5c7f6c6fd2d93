// Run-path device memory: stream-ordered allocations (cudaMallocAsync) from one memory pool per
// device whose release threshold keeps freed memory cached, so after warm-up no run calls the
// driver's allocator. A byte budget (--memory-limit) caps what a session holds; exceeding it, or
// the device running out, is a Status naming the tensor and the bytes asked for.
#pragma once

#include "core/status.h"
#include "core/tensor.h"

#include <atomic>
#include <cstddef>

typedef struct CUstream_st* cudaStream_t;
typedef struct CUmemPoolHandle_st* cudaMemPool_t;

namespace gpuopt::cuda {

class DeviceMemory {
 public:
  static Result<std::unique_ptr<DeviceMemory>> create(int device, size_t limit_bytes);
  ~DeviceMemory();

  // A device tensor whose storage returns to the pool, ordered on `stream`, when released.
  Result<Tensor> alloc(DType dtype, const Shape& shape, cudaStream_t stream, const std::string& what);
  size_t in_use() const { return in_use_.load(); }
  size_t peak() const { return peak_.load(); }
  size_t limit() const { return limit_; }
  void set_limit(size_t bytes) { limit_ = bytes; }
  int device() const { return device_; }

 private:
  DeviceMemory(int device, size_t limit) : device_(device), limit_(limit) {}
  int device_;
  size_t limit_;
  cudaMemPool_t pool_ = nullptr;
  std::atomic<size_t> in_use_{0};
  std::atomic<size_t> peak_{0};
};

}  // namespace gpuopt::cuda
