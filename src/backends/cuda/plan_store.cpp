#include "backends/cuda/plan_store.h"

#include "ops/conv/cuda/cudnn_conv.h"

#include "core/log.h"
#include "gpuopt/build_info.h"

#include <cublasLt.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <map>
#include <memory>

namespace gpuopt::cuda {

PlanStore& PlanStore::of(int device) {
  static std::mutex mu;
  static std::map<int, std::unique_ptr<PlanStore>> stores;
  std::lock_guard<std::mutex> lock(mu);
  auto& s = stores[device];
  if (!s) s = std::make_unique<PlanStore>();
  return *s;
}

PlanStore& PlanStore::current() {
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) cudaGetLastError();
  return of(device);
}

std::optional<std::string> PlanStore::find(const std::string& key) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(key);
  if (it == entries_.end()) return std::nullopt;
  return it->second;
}

void PlanStore::put(const std::string& key, std::string value) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& v = entries_[key];
  if (v == value) return;
  v = std::move(value);
  ++version_;
}

void PlanStore::merge(const PlanEntries& entries) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [k, v] : entries) entries_.emplace(k, v);
}

PlanEntries PlanStore::snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  return entries_;
}

uint64_t PlanStore::version() const {
  std::lock_guard<std::mutex> lock(mu_);
  return version_;
}

std::unique_ptr<PlanCacheLink> PlanCacheLink::open(const std::string& dir, const std::string& model_hash, int device) {
  auto l = std::make_unique<PlanCacheLink>();
  l->dir_ = dir;
  l->device_ = device;
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, device) != cudaSuccess) cudaGetLastError();
  int driver = 0;
  if (cudaDriverGetVersion(&driver) != cudaSuccess) cudaGetLastError();
  l->key_ = PlanCacheKey{model_hash,
                         prop.name,
                         std::to_string(driver),
                         std::to_string(cudnnGetVersion()),
                         std::to_string(cublasLtGetVersion()),
                         fmt::format("{} {}", GPUOPT_VERSION_STRING, GPUOPT_GIT_HASH)};
  PlanCacheLoad load = load_plan_cache(dir, l->key_);
  PlanStore& store = PlanStore::of(device);
  store.merge(load.entries);
  l->status_ = PlanCacheStatus{load.state_name(), load.path, load.entries.size(), load.note};
  // A warm file is written again only when a choice changes; any other start writes it once.
  l->saved_ = load.state == PlanCacheLoad::State::kWarm ? store.version() : UINT64_MAX;
  GPUOPT_LOG(info, "plan cache {}: {} ({} entries){}", load.path, l->status_.state, load.entries.size(),
             load.note.empty() ? "" : ": " + load.note);
  return l;
}

void PlanCacheLink::save_if_changed() {
  PlanStore& store = PlanStore::of(device_);
  const uint64_t v = store.version();
  std::lock_guard<std::mutex> lock(mu_);
  if (v == saved_) return;
  const Status st = save_plan_cache(dir_, key_, store.snapshot());
  saved_ = v;  // a failed write is not retried on every run
  if (!st.ok() && !warned_) {
    warned_ = true;
    GPUOPT_LOG(warn, "{}: the choices of this run are not kept", st.message());
  }
}

std::string conv_key_text(const ConvKey& k) {
  // A 3-D key's depth extents, pad, stride and dilation follow (1-D and 2-D keys keep their text).
  if (k.d > 0)
    return fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},d{},{},{},{},{},{}", k.n, k.c, k.h, k.w,
                       k.m, k.kh, k.kw, k.oh, k.ow, k.group, k.ph, k.pw, k.sh, k.sw, k.dh, k.dw, dtype_name(k.dt),
                       k.nhwc ? "nhwc" : "nchw", k.d, k.kd, k.od, k.pd, k.sd, k.dd);
  return fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}", k.n, k.c, k.h, k.w, k.m, k.kh, k.kw, k.oh,
                     k.ow, k.group, k.ph, k.pw, k.sh, k.sw, k.dh, k.dw, dtype_name(k.dt), k.nhwc ? "nhwc" : "nchw");
}

std::optional<int64_t> plan_field(const std::string& value, const std::string& name) {
  const std::string tag = name + "=";
  size_t p = 0;
  while ((p = value.find(tag, p)) != std::string::npos) {
    if (p == 0 || value[p - 1] == ' ') {
      const char* b = value.data() + p + tag.size();
      const char* e = value.data() + value.size();
      const char* sp = std::find(b, e, ' ');
      int64_t v = 0;
      auto [end, ec] = std::from_chars(b, sp, v);
      if (ec != std::errc() || end != sp) return std::nullopt;
      return v;
    }
    p += tag.size();
  }
  return std::nullopt;
}

}  // namespace gpuopt::cuda
