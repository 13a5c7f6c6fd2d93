// Helpers for the LLM kernel tests: device buffers with guard bytes, dtype encoding on the host,
// random data (never zeros) and the dtype tolerances of docs/dev/CONVENTIONS.md.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "core/dtype.h"

namespace gpuopt::llm::test {

inline bool have_device() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}
#define LLM_REQUIRE_DEVICE() \
  if (!::gpuopt::llm::test::have_device()) GTEST_SKIP() << "skipped: no CUDA device"

#define CUDA_OK(x) ASSERT_EQ((x), cudaSuccess) << cudaGetErrorString(x)

// Device allocation of `bytes` with kGuard bytes of a known pattern before and after; guards_ok()
// says whether a kernel wrote outside its output.
class DevBuf {
 public:
  static constexpr size_t kGuard = 256;
  static constexpr uint8_t kPattern = 0xA5;
  DevBuf() = default;
  explicit DevBuf(size_t bytes) { alloc(bytes); }
  ~DevBuf() {
    if (base_) cudaFree(base_);
  }
  DevBuf(const DevBuf&) = delete;
  DevBuf& operator=(const DevBuf&) = delete;
  void alloc(size_t bytes) {
    bytes_ = bytes;
    cudaMalloc(&base_, bytes + 2 * kGuard);
    cudaMemset(base_, kPattern, bytes + 2 * kGuard);
  }
  void* get() const { return static_cast<char*>(base_) + kGuard; }
  template <class T>
  T* as() const {
    return static_cast<T*>(get());
  }
  size_t bytes() const { return bytes_; }
  void upload(const void* src, size_t n) const { cudaMemcpy(get(), src, n, cudaMemcpyHostToDevice); }
  template <class T>
  void upload(const std::vector<T>& v) const {
    upload(v.data(), v.size() * sizeof(T));
  }
  template <class T>
  std::vector<T> download(size_t n) const {
    std::vector<T> v(n);
    cudaMemcpy(v.data(), get(), n * sizeof(T), cudaMemcpyDeviceToHost);
    return v;
  }
  bool guards_ok() const {
    std::vector<uint8_t> g(kGuard);
    for (size_t off : {size_t{0}, kGuard + bytes_}) {
      cudaMemcpy(g.data(), static_cast<char*>(base_) + off, kGuard, cudaMemcpyDeviceToHost);
      for (uint8_t b : g)
        if (b != kPattern) return false;
    }
    return true;
  }

 private:
  void* base_ = nullptr;
  size_t bytes_ = 0;
};

// Host values stored in dtype dt (f32/f16/bf16) as raw bytes; decode gives back what the device
// sees, so references are computed from the rounded inputs.
inline std::vector<uint8_t> encode(const std::vector<float>& v, DType dt) {
  std::vector<uint8_t> out(v.size() * dtype_size(dt));
  for (size_t i = 0; i < v.size(); ++i) {
    if (dt == DType::F32) {
      std::memcpy(out.data() + 4 * i, &v[i], 4);
    } else {
      uint16_t b = dt == DType::F16 ? Half::from_float(v[i]) : BFloat16::from_float(v[i]);
      std::memcpy(out.data() + 2 * i, &b, 2);
    }
  }
  return out;
}
inline std::vector<float> decode(const std::vector<uint8_t>& raw, DType dt) {
  const size_t es = dtype_size(dt), n = raw.size() / es;
  std::vector<float> out(n);
  for (size_t i = 0; i < n; ++i) {
    if (dt == DType::F32) {
      std::memcpy(&out[i], raw.data() + 4 * i, 4);
    } else {
      uint16_t b;
      std::memcpy(&b, raw.data() + 2 * i, 2);
      out[i] = dt == DType::F16 ? Half::to_float(b) : BFloat16::to_float(b);
    }
  }
  return out;
}
inline std::vector<float> round_to(const std::vector<float>& v, DType dt) {
  return decode(encode(v, dt), dt);
}

// Uniform in [lo, hi], never exactly zero.
inline std::vector<float> random_vec(size_t n, std::mt19937& rng, float lo = -1.0f, float hi = 1.0f) {
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) {
    do x = u(rng);
    while (x == 0.0f);
  }
  return v;
}

struct Tol {
  double abs, rel;
};
inline Tol tol_for(DType dt) {
  switch (dt) {
    case DType::F32:
      return {1e-5, 1e-4};
    case DType::F16:
      return {2.5e-3, 1e-3};
    default:
      return {2e-2, 1e-2};
  }
}

// Counts elements outside |got - ref| <= abs + rel * |ref| (NaN counts as outside); reports the
// first few.
inline size_t count_bad(const std::vector<float>& got, const std::vector<double>& ref, Tol tol, const char* what) {
  size_t bad = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double err = std::fabs(static_cast<double>(got[i]) - ref[i]);
    if (!(err <= tol.abs + tol.rel * std::fabs(ref[i]))) {
      if (bad < 5) ADD_FAILURE() << what << "[" << i << "]: got " << got[i] << " want " << ref[i];
      ++bad;
    }
  }
  return bad;
}

inline const char* dt_name(DType dt) {
  return dt == DType::F32 ? "f32" : dt == DType::F16 ? "f16" : "bf16";
}

}  // namespace gpuopt::llm::test
