// Shared pieces of the CUDA benchmarks: RAII buffers, the event timer every primitive uses,
// and the kernel launchers (defined in src/bench/*.cu). CUDA builds only.
#pragma once

#include "bench/stats.h"
#include "core/cuda_check.h"
#include "core/status.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <new>
#include <utility>
#include <vector>

namespace gpuopt::bench::cuda {

// Device memory owned by this object (cudaFree on destruction).
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  ~DeviceBuffer() { reset(); }
  DeviceBuffer(DeviceBuffer&& o) noexcept : p_(std::exchange(o.p_, nullptr)), n_(std::exchange(o.n_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    reset();
    p_ = std::exchange(o.p_, nullptr);
    n_ = std::exchange(o.n_, 0);
    return *this;
  }
  Status alloc(size_t bytes) {
    reset();
    GPUOPT_CHECK_CALL(cudaMalloc(&p_, bytes));
    n_ = bytes;
    return Status::Ok();
  }
  void reset() {
    if (p_) cudaFree(p_);
    p_ = nullptr;
    n_ = 0;
  }
  template <typename T = void>
  T* get() const {
    return static_cast<T*>(p_);
  }
  size_t size() const { return n_; }

 private:
  void* p_ = nullptr;
  size_t n_ = 0;
};

// Page-locked host memory (cudaHostAlloc), or plain pageable memory when `pinned` is false.
class HostBuffer {
 public:
  ~HostBuffer() { reset(); }
  Status alloc(size_t bytes, bool pinned) {
    reset();
    pinned_ = pinned;
    if (pinned) {
      GPUOPT_CHECK_CALL(cudaHostAlloc(&p_, bytes, cudaHostAllocDefault));
    } else {
      p_ = ::operator new(bytes, std::nothrow);
      if (!p_) return Status::OutOfMemory("cannot allocate {} bytes of host memory", bytes);
    }
    n_ = bytes;
    return Status::Ok();
  }
  void reset() {
    if (p_) pinned_ ? (void)cudaFreeHost(p_) : ::operator delete(p_);
    p_ = nullptr;
  }
  template <typename T = void>
  T* get() const {
    return static_cast<T*>(p_);
  }

 private:
  void* p_ = nullptr;
  size_t n_ = 0;
  bool pinned_ = false;
};

class Stream {
 public:
  ~Stream() {
    if (s_) cudaStreamDestroy(s_);
  }
  Status create() {
    GPUOPT_CHECK_CALL(cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking));
    return Status::Ok();
  }
  cudaStream_t get() const { return s_; }

 private:
  cudaStream_t s_ = nullptr;
};

class EventPair {
 public:
  ~EventPair() {
    if (a_) cudaEventDestroy(a_);
    if (b_) cudaEventDestroy(b_);
  }
  Status create() {
    GPUOPT_CHECK_CALL(cudaEventCreate(&a_));
    GPUOPT_CHECK_CALL(cudaEventCreate(&b_));
    return Status::Ok();
  }
  cudaEvent_t start() const { return a_; }
  cudaEvent_t stop() const { return b_; }

 private:
  cudaEvent_t a_ = nullptr, b_ = nullptr;
};

// Times `op(i)` (enqueues one operation on `stream`; i counts up, for rotating buffers).
// Warm-up, then a calibration run picks a batch so each timed sample spans at least
// `min_sample_s` (back-to-back operations amortise the launch gap, as a busy GPU would see);
// `repeat` samples between two events, each divided by the batch. Median of the samples.
template <typename Op>
Result<TimingStats> time_on_stream(cudaStream_t stream, int repeat, Op&& op, double min_sample_s = 2e-4,
                                   int max_batch = 1000, int warmup = 3) {
  EventPair ev;
  GPUOPT_RETURN_IF_ERROR(ev.create());
  uint64_t i = 0;
  for (int w = 0; w < warmup; ++w) GPUOPT_RETURN_IF_ERROR(op(i++));
  GPUOPT_CHECK_CALL(cudaStreamSynchronize(stream));
  GPUOPT_CHECK_CALL(cudaGetLastError());
  auto sample = [&](int batch, double* seconds) -> Status {
    GPUOPT_CHECK_CALL(cudaEventRecord(ev.start(), stream));
    for (int b = 0; b < batch; ++b) GPUOPT_RETURN_IF_ERROR(op(i++));
    GPUOPT_CHECK_CALL(cudaEventRecord(ev.stop(), stream));
    GPUOPT_CHECK_CALL(cudaEventSynchronize(ev.stop()));
    GPUOPT_CHECK_CALL(cudaGetLastError());
    float ms = 0;
    GPUOPT_CHECK_CALL(cudaEventElapsedTime(&ms, ev.start(), ev.stop()));
    *seconds = ms * 1e-3 / batch;
    return Status::Ok();
  };
  double one = 0;
  GPUOPT_RETURN_IF_ERROR(sample(1, &one));
  const int batch = one > 0 ? std::clamp(static_cast<int>(min_sample_s / one) + 1, 1, max_batch) : max_batch;
  std::vector<double> samples;
  for (int r = 0; r < std::max(1, repeat); ++r) {
    double s = 0;
    GPUOPT_RETURN_IF_ERROR(sample(batch, &s));
    samples.push_back(s);
  }
  return summarize(samples);
}

// ---- kernel launchers (src/bench/*.cu) -------------------------------------------------------
int max_resident_blocks(const void* kernel, int threads, int device);
// Memory kernels over 16-byte vectors; `grid` 0 picks a full-occupancy grid.
void launch_copy(const void* src, void* dst, size_t vectors, int grid, cudaStream_t s, bool streaming = false);
void launch_read(const void* src, size_t vectors, uint32_t* block_xor, int grid, cudaStream_t s);
void launch_write(void* dst, size_t vectors, uint32_t seed, int grid, cudaStream_t s);
int memory_grid(size_t vectors, int device);  // blocks for the kernels above (256 threads)
constexpr int kMemThreads = 256;

// FMA peak: out has one element per thread (f32 / half2 / f64); s, t given as double.
void launch_fma(int kind, void* out, int blocks, int iterations, double s, double t, cudaStream_t st);
int fma_blocks(int kind, int device);

// Roofline: src/dst of `words` 4-byte words (a multiple of 4), ops per word as in counts.h.
void launch_roofline(int type, const void* src, void* dst, size_t words, int scalar_muls, int vector_muls, int fmas,
                     double s, double t, int device, cudaStream_t st);

// Random fill, never zero-heavy: uniform in [-1, 1) for float kinds, [-64, 63] for int8.
enum class FillKind { F32, F16, BF16, FP8E4M3, I8, U32 };
void launch_fill(FillKind k, void* p, size_t elements, uint64_t seed, cudaStream_t st);

// Latency helpers.
void launch_empty(cudaStream_t st);
void launch_add_one(float* p, int n, cudaStream_t st);  // p[i] += 1, one small block

}  // namespace gpuopt::bench::cuda
