// Helpers shared by the fake's exported functions. FAKE_NVML_OLD builds the variant without the
// newer symbols (_v2/_v3, memory v2, GPM, clock-event reasons) to test the loader's fallback.
#pragma once

#include "fake_state.h"

#include <cstring>
#include <string>

#define FAKE_EXPORT extern "C" __attribute__((visibility("default")))

namespace fake_nvml {

using namespace gpuopt::nvml;  // NOLINT: the types of the ABI we imitate

// Start of every device function: initialised, a handle we made, no scripted failure.
#define FAKE_DEVICE_PROLOGUE(fn_name)                                         \
  State& s = state();                                                         \
  std::lock_guard<std::mutex> lock(s.mu);                                     \
  if (s.init_count == 0) return kErrorUninitialized;                          \
  FakeDevice* d = as_device(device);                                          \
  if (!d) return kErrorInvalidArgument;                                       \
  delay(s, d, fn_name);                                                       \
  if (Return f = failure(s, d, fn_name); f != kSuccess) return f;

#define FAKE_SYSTEM_PROLOGUE(fn_name)                                         \
  State& s = state();                                                         \
  std::lock_guard<std::mutex> lock(s.mu);                                     \
  if (s.init_count == 0) return kErrorUninitialized;                          \
  delay(s, nullptr, fn_name);                                                 \
  if (Return f = failure(s, nullptr, fn_name); f != kSuccess) return f;

inline bool to_ull(const json& v, unsigned long long* out) {
  if (v.is_boolean()) {
    *out = v.get<bool>() ? 1 : 0;
    return true;
  }
  if (!v.is_number()) return false;
  *out = v.is_number_float() ? static_cast<unsigned long long>(v.get<double>()) : v.get<unsigned long long>();
  return true;
}

// Reads a numeric field into *out; NOT_SUPPORTED when the script does not give it.
template <typename T>
Return read_num(FakeDevice& d, const std::string& path, T* out, const std::string& counter = {}) {
  if (!out) return kErrorInvalidArgument;
  auto v = field(d, path, counter);
  unsigned long long x = 0;
  if (!v || !to_ull(*v, &x)) return kErrorNotSupported;
  *out = static_cast<T>(x);
  return kSuccess;
}

inline Return copy_string(const std::string& v, char* buf, unsigned int length) {
  if (!buf) return kErrorInvalidArgument;
  if (v.size() + 1 > length) return kErrorInsufficientSize;
  std::memcpy(buf, v.c_str(), v.size() + 1);
  return kSuccess;
}

}  // namespace fake_nvml
