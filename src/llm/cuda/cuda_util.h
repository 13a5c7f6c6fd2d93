// Small CUDA helpers of the LLM runner: runtime/cuBLAS errors as Status, and owning device and
// pinned-host buffers.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <utility>

#include "core/status.h"

namespace gpuopt::llm::cuda {

inline Status cuda_status(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return Status::Ok();
  if (e == cudaErrorMemoryAllocation) return Status::OutOfMemory("{}: {}", what, cudaGetErrorString(e));
  return Status::Internal("{}: {}", what, cudaGetErrorString(e));
}
inline Status cublas_status(cublasStatus_t s, const char* what) {
  if (s == CUBLAS_STATUS_SUCCESS) return Status::Ok();
  return Status::Internal("{}: cuBLAS status {}", what, static_cast<int>(s));
}

#define GPUOPT_CUDA_RETURN(expr) GPUOPT_RETURN_IF_ERROR(::gpuopt::llm::cuda::cuda_status((expr), #expr))
#define GPUOPT_CUBLAS_RETURN(expr) GPUOPT_RETURN_IF_ERROR(::gpuopt::llm::cuda::cublas_status((expr), #expr))

// cudaMalloc'ed bytes, freed on destruction.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept : p_(std::exchange(o.p_, nullptr)), n_(std::exchange(o.n_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    std::swap(p_, o.p_);
    std::swap(n_, o.n_);
    return *this;
  }
  ~DeviceBuffer() {
    if (p_) cudaFree(p_);
  }
  Status allocate(size_t bytes, const char* what) {
    if (p_) cudaFree(p_);
    p_ = nullptr;
    n_ = 0;
    if (bytes == 0) return Status::Ok();
    cudaError_t e = cudaMalloc(&p_, bytes);
    if (e != cudaSuccess) {
      (void)cudaGetLastError();  // clear the sticky-free allocation error
      p_ = nullptr;
      return Status::OutOfMemory("allocating {} bytes of GPU memory for {}: {}", bytes, what, cudaGetErrorString(e));
    }
    n_ = bytes;
    return Status::Ok();
  }
  void* get() const { return p_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(p_);
  }
  size_t bytes() const { return n_; }

 private:
  void* p_ = nullptr;
  size_t n_ = 0;
};

// cudaHostAlloc'ed (pinned) bytes: the only host memory an async copy overlaps with.
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  PinnedBuffer(PinnedBuffer&& o) noexcept : p_(std::exchange(o.p_, nullptr)), n_(std::exchange(o.n_, 0)) {}
  PinnedBuffer& operator=(PinnedBuffer&& o) noexcept {
    std::swap(p_, o.p_);
    std::swap(n_, o.n_);
    return *this;
  }
  ~PinnedBuffer() {
    if (p_) cudaFreeHost(p_);
  }
  Status allocate(size_t bytes, const char* what) {
    if (p_) cudaFreeHost(p_);
    p_ = nullptr;
    n_ = 0;
    if (bytes == 0) return Status::Ok();
    cudaError_t e = cudaHostAlloc(&p_, bytes, cudaHostAllocDefault);
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      p_ = nullptr;
      return Status::OutOfMemory("allocating {} bytes of pinned host memory for {}: {}", bytes, what,
                                 cudaGetErrorString(e));
    }
    n_ = bytes;
    return Status::Ok();
  }
  void* get() const { return p_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(p_);
  }
  size_t bytes() const { return n_; }

 private:
  void* p_ = nullptr;
  size_t n_ = 0;
};

}  // namespace gpuopt::llm::cuda
