// Helpers for CUDA tests: skip without a device, device buffers with guard bytes around them.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

namespace gpuopt::testing {

inline bool have_cuda_device() {
  int n = 0;
  const bool ok = cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
  cudaGetLastError();
  return ok;
}

#define GPUOPT_REQUIRE_CUDA() \
  if (!::gpuopt::testing::have_cuda_device()) GTEST_SKIP() << "skipped: no CUDA device"

// A device buffer of `bytes` with kGuard bytes of a known pattern before and after it; check()
// reports whether a kernel wrote outside its output.
class GuardedBuffer {
 public:
  static constexpr size_t kGuard = 256;
  static constexpr unsigned char kPattern = 0xA5;
  explicit GuardedBuffer(size_t bytes) : bytes_(bytes) {
    cudaMalloc(&base_, bytes + 2 * kGuard);
    cudaMemset(base_, kPattern, bytes + 2 * kGuard);
  }
  ~GuardedBuffer() { cudaFree(base_); }
  void* data() { return static_cast<char*>(base_) + kGuard; }
  bool guards_intact() const {
    std::vector<unsigned char> h(bytes_ + 2 * kGuard);
    cudaMemcpy(h.data(), base_, h.size(), cudaMemcpyDeviceToHost);
    for (size_t i = 0; i < kGuard; ++i)
      if (h[i] != kPattern || h[kGuard + bytes_ + i] != kPattern) return false;
    return true;
  }
  template <typename T>
  std::vector<T> download(size_t n) const {
    std::vector<T> h(n);
    cudaMemcpy(h.data(), static_cast<char*>(base_) + kGuard, n * sizeof(T), cudaMemcpyDeviceToHost);
    return h;
  }
  template <typename T>
  void upload(const std::vector<T>& h) {
    cudaMemcpy(static_cast<char*>(base_) + kGuard, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice);
  }

 private:
  void* base_ = nullptr;
  size_t bytes_;
};

}  // namespace gpuopt::testing
