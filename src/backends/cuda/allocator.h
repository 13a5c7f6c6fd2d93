// Pooled device allocator: blocks are cached by size class and reused, so steady-state runs make
// no cudaMalloc calls. A session-wide limit (--memory-limit) caps what it may hold; running out
// gives a Status naming the tensor and the bytes asked for, after cached blocks were released
// and the allocation retried once.
//
//   DeviceAllocator alloc(/*device=*/0, /*limit_bytes=*/0 /* no limit */);
//   GPUOPT_ASSIGN_OR_RETURN(void* p, alloc.allocate(bytes, "conv1:0"));
//   alloc.release(p);
#pragma once

#include "core/status.h"

#include <cstddef>
#include <map>
#include <mutex>
#include <unordered_map>

namespace gpuopt::cuda {

struct AllocatorStats {
  size_t in_use = 0;        // bytes handed out
  size_t cached = 0;        // bytes held in the free lists
  size_t peak = 0;          // high-water mark of in_use + cached
  size_t device_mallocs = 0;  // cudaMalloc calls made (0 growth after warm-up = no malloc on the run path)
};

class DeviceAllocator {
 public:
  DeviceAllocator(int device, size_t limit_bytes);
  ~DeviceAllocator();
  DeviceAllocator(const DeviceAllocator&) = delete;
  DeviceAllocator& operator=(const DeviceAllocator&) = delete;

  // `what` names the tensor in errors ("out of memory allocating 'conv1:0' (1.50 GiB) ...").
  Result<void*> allocate(size_t bytes, const char* what);
  void release(void* ptr);
  // Returns every cached block to the driver.
  void trim();
  AllocatorStats stats() const;
  size_t limit() const { return limit_; }
  // Size class a request is rounded up to (512-byte granularity, then 1/8-octave steps above 1 MiB).
  static size_t round_size(size_t bytes);

 private:
  // `bytes` is the size class; `requested` what the caller asked for (named in errors).
  Result<void*> malloc_device(size_t bytes, size_t requested, const char* what);
  int device_;
  size_t limit_;
  mutable std::mutex mu_;
  std::multimap<size_t, void*> free_;           // size class -> block
  std::unordered_map<void*, size_t> live_;      // block -> size class
  AllocatorStats stats_;
};

}  // namespace gpuopt::cuda
