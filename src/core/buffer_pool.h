// Host buffers handed out as tensor storage and taken back for reuse when the last tensor over
// one goes: the GPU executor's page-locked output buffers. A batch's outputs are sent to the
// clients straight from its buffer (the server references slices of it until each reply is
// written), so the buffer's owner cannot simply refill it next batch; allocating a fresh one each
// time costs a cudaHostAlloc / cudaFreeHost pair (milliseconds for BERT's 50 MB batch output, and
// cudaFreeHost waits for the device), and a pageable one costs its page faults and a host copy.
//
//   auto pool = BufferPool::create([](size_t n) { void* p = nullptr; cudaHostAlloc(&p, n, 0); return p; },
//                                  [](void* p) { cudaFreeHost(p); });
//   GPUOPT_ASSIGN_OR_RETURN(std::shared_ptr<Storage> st, pool->acquire(bytes));
//   Tensor out = Tensor::wrap(DType::F32, shape, st);   // back to the pool when `out` and its slices go
#pragma once

#include "core/status.h"
#include "core/tensor.h"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

namespace gpuopt {

class BufferPool : public std::enable_shared_from_this<BufferPool> {
 public:
  using AllocFn = std::function<void*(size_t)>;  // nullptr when it fails
  using FreeFn = std::function<void(void*)>;

  // Idle buffers above `max_idle_bytes` in all are freed as they come back.
  static std::shared_ptr<BufferPool> create(AllocFn alloc, FreeFn free, size_t max_idle_bytes = size_t{1} << 30);
  ~BufferPool();
  BufferPool(const BufferPool&) = delete;
  BufferPool& operator=(const BufferPool&) = delete;

  // A buffer of at least `bytes` (the smallest idle one that fits, at most twice the size asked,
  // else a new one). Its Storage's deleter gives it back here, from whatever thread drops the
  // last reference; after the pool is gone it frees it. OutOfMemory when allocation fails.
  Result<std::shared_ptr<Storage>> acquire(size_t bytes, Device device = {});

  // Counters for tests and the metrics.
  uint64_t allocations() const;  // buffers allocated so far (acquire that found none idle)
  size_t idle_buffers() const;
  size_t idle_bytes() const;

 private:
  BufferPool(AllocFn alloc, FreeFn free, size_t max_idle_bytes);
  void give_back(void* p, size_t cap);

  struct Idle {
    void* p;
    size_t cap;
  };
  AllocFn alloc_;
  // Shared with the deleters, which may outlive the pool.
  std::shared_ptr<FreeFn> free_;
  size_t max_idle_;
  mutable std::mutex mu_;
  std::vector<Idle> idle_;
  size_t idle_bytes_ = 0;
  uint64_t allocations_ = 0;
};

}  // namespace gpuopt
