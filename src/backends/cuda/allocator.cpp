#include "backends/cuda/allocator.h"

#include "core/cuda_check.h"
#include "core/log.h"
#include "core/table.h"

#include <cuda_runtime.h>

namespace gpuopt::cuda {

DeviceAllocator::DeviceAllocator(int device, size_t limit_bytes) : device_(device), limit_(limit_bytes) {}

DeviceAllocator::~DeviceAllocator() {
  trim();
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [p, sz] : live_) cudaFree(p);  // leaked by a caller; the process owns the device anyway
}

size_t DeviceAllocator::round_size(size_t bytes) {
  if (bytes == 0) bytes = 1;
  if (bytes <= (size_t{1} << 20)) return (bytes + 511) / 512 * 512;
  // Above 1 MiB: round up to 1/8 of the enclosing power of two (at most 12.5% waste).
  size_t p = 1;
  while (p < bytes) p <<= 1;
  const size_t step = p / 16;
  return (bytes + step - 1) / step * step;
}

Result<void*> DeviceAllocator::malloc_device(size_t bytes, size_t requested, const char* what) {
  if (limit_ && stats_.in_use + stats_.cached + bytes > limit_) {
    return Status::OutOfMemory("out of memory allocating '{}': {} requested, {} in use, limit {} (--memory-limit)",
                               what, format_bytes(static_cast<double>(requested)),
                               format_bytes(static_cast<double>(stats_.in_use)), format_bytes(static_cast<double>(limit_)));
  }
  void* p = nullptr;
  cudaError_t e = cudaMalloc(&p, bytes);
  if (e == cudaErrorMemoryAllocation) {
    cudaGetLastError();  // clear the sticky-free error so later calls are unaffected
    size_t free_b = 0, total_b = 0;
    cudaMemGetInfo(&free_b, &total_b);
    return Status::OutOfMemory("out of memory allocating '{}': {} requested, {} free of {} on cuda:{}", what,
                               format_bytes(static_cast<double>(requested)), format_bytes(static_cast<double>(free_b)),
                               format_bytes(static_cast<double>(total_b)), device_);
  }
  GPUOPT_RETURN_IF_ERROR(GPUOPT_CALL_STATUS(e).with_context(fmt::format("allocating '{}'", what)));
  ++stats_.device_mallocs;
  return p;
}

Result<void*> DeviceAllocator::allocate(size_t bytes, const char* what) {
  const size_t sz = round_size(bytes);
  std::lock_guard<std::mutex> lock(mu_);
  // Best fit: the smallest cached block of this class or up to 2x larger.
  auto it = free_.lower_bound(sz);
  if (it != free_.end() && it->first <= 2 * sz) {
    void* p = it->second;
    const size_t have = it->first;
    free_.erase(it);
    stats_.cached -= have;
    stats_.in_use += have;
    live_[p] = have;
    return p;
  }
  GPUOPT_RETURN_IF_ERROR(GPUOPT_CALL_STATUS(cudaSetDevice(device_)));
  Result<void*> r = malloc_device(sz, bytes, what);
  if (!r.ok() && r.status().code() == StatusCode::kOutOfMemory && !free_.empty()) {
    GPUOPT_LOG(info, "allocator: releasing {} of cached blocks and retrying", format_bytes(static_cast<double>(stats_.cached)));
    for (auto& [s, p] : free_) cudaFree(p);
    free_.clear();
    stats_.cached = 0;
    r = malloc_device(sz, bytes, what);
  }
  if (!r.ok()) return r.status();
  live_[*r] = sz;
  stats_.in_use += sz;
  stats_.peak = std::max(stats_.peak, stats_.in_use + stats_.cached);
  return *r;
}

void DeviceAllocator::release(void* ptr) {
  if (!ptr) return;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = live_.find(ptr);
  GPUOPT_ASSERT(it != live_.end(), "DeviceAllocator::release of a pointer it did not allocate");
  stats_.in_use -= it->second;
  stats_.cached += it->second;
  free_.emplace(it->second, ptr);
  live_.erase(it);
}

void DeviceAllocator::trim() {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [s, p] : free_) cudaFree(p);
  free_.clear();
  stats_.cached = 0;
}

AllocatorStats DeviceAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

}  // namespace gpuopt::cuda
