// KernelCapture on CUPTI's activity API, libcupti loaded with dlopen (kernels.h). CUPTI hands
// full record buffers to C callbacks without a user pointer, so the one capture in progress is
// a global behind a mutex.
#include "profile/kernels.h"

#include <dlfcn.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <type_traits>
#include <vector>

#if __has_include(<cupti.h>)
#include <cuda_runtime_api.h>
#include <cupti.h>
#define GPUOPT_HAVE_CUPTI_H 1
#endif

namespace gpuopt::profile {

#ifndef GPUOPT_HAVE_CUPTI_H
Result<std::unique_ptr<KernelCapture>> KernelCapture::start(const std::string&) {
  return Status::Unavailable("kernel names need CUPTI's headers at build time (cupti.h was not found)");
}
#else
namespace {

constexpr size_t kBufferBytes = size_t{8} << 20;
constexpr size_t kMaxRecords = 2'000'000;  // ~200 MB of records at most; the rest are counted

struct Api {
  void* handle = nullptr;
  std::string path;
  decltype(&cuptiActivityRegisterCallbacks) register_callbacks = nullptr;
  decltype(&cuptiActivityEnable) enable = nullptr;
  decltype(&cuptiActivityDisable) disable = nullptr;
  decltype(&cuptiActivityFlushAll) flush_all = nullptr;
  decltype(&cuptiActivityGetNextRecord) next_record = nullptr;
  decltype(&cuptiActivityGetNumDroppedRecords) dropped = nullptr;
  decltype(&cuptiGetResultString) result_string = nullptr;
  decltype(&cuptiActivityRegisterTimestampCallback) timestamp_callback = nullptr;  // optional (CUDA 12.x+)
  decltype(&cuptiGetTimestamp) get_timestamp = nullptr;
};

// Where libcupti lives: the loader's path first, then the toolkit's usual folders.
std::vector<std::string> candidates() {
  std::vector<std::string> c = {"libcupti.so", "libcupti.so.13", "libcupti.so.12"};
  std::vector<std::string> roots;
  for (const char* env : {"CUDA_HOME", "CUDA_PATH"})
    if (const char* v = std::getenv(env); v && *v) roots.push_back(v);
  roots.push_back("/usr/local/cuda");
  for (const std::string& root : roots)
    for (const char* sub : {"extras/CUPTI/lib64", "lib64", "lib", "targets/x86_64-linux/lib", "targets/sbsa-linux/lib"})
      for (const char* so : {"libcupti.so", "libcupti.so.13", "libcupti.so.12"}) c.push_back(root + "/" + sub + "/" + so);
  return c;
}

// The library loaded from `library` ("" = the search of candidates()), once per process.
Result<const Api*> load_api(const std::string& library) {
  static std::mutex mu;
  static std::map<std::string, std::pair<Api, std::string>> loaded;  // library -> API, or why not
  std::lock_guard<std::mutex> lock(mu);
  auto [it, fresh] = loaded.try_emplace(library);
  Api& api = it->second.first;
  std::string& error = it->second.second;
  if (api.handle) return &api;
  if (!fresh) return Status::Unavailable("{}", error);
  const std::vector<std::string> tried = library.empty() ? candidates() : std::vector<std::string>{library};
  for (const std::string& p : tried) {
    api.handle = dlopen(p.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (api.handle) {
      api.path = p;
      break;
    }
  }
  if (!api.handle) {
    error = tried.size() == 1
                ? fmt::format("CUPTI not loaded from {}: {}", tried.front(), dlerror())
                : fmt::format("CUPTI not found (tried {} and {} more; put the toolkit's extras/CUPTI/lib64 on "
                              "LD_LIBRARY_PATH)", tried.front(), tried.size() - 1);
    return Status::Unavailable("{}", error);
  }
  auto sym = [&](auto* fn, const char* name) {
    *fn = reinterpret_cast<std::remove_reference_t<decltype(*fn)>>(dlsym(api.handle, name));
    return *fn != nullptr;
  };
  bool ok = sym(&api.register_callbacks, "cuptiActivityRegisterCallbacks") && sym(&api.enable, "cuptiActivityEnable") &&
            sym(&api.disable, "cuptiActivityDisable") && sym(&api.flush_all, "cuptiActivityFlushAll") &&
            sym(&api.next_record, "cuptiActivityGetNextRecord") && sym(&api.dropped, "cuptiActivityGetNumDroppedRecords") &&
            sym(&api.result_string, "cuptiGetResultString") && sym(&api.get_timestamp, "cuptiGetTimestamp");
  sym(&api.timestamp_callback, "cuptiActivityRegisterTimestampCallback");
  if (!ok) {
    error = fmt::format("{}: a CUPTI function is missing (too old a CUPTI)", api.path);
    dlclose(api.handle);
    api.handle = nullptr;
    return Status::Unavailable("{}", error);
  }
  return &api;
}

// The capture in progress (the buffer callbacks write into it).
struct Sink {
  std::mutex mu;
  const Api* api = nullptr;
  std::vector<KernelRecord>* out = nullptr;
  size_t dropped = 0, capped = 0;
  int64_t offset_ns = 0;  // added to CUPTI's timestamps to reach the steady clock (0 with our own)
  bool moved = false;     // records came on the realtime clock although CUPTI took ours
  int64_t real_minus_steady_ns = 0;  // the realtime clock against the steady one, at the start
} g_sink;

uint64_t CUPTIAPI steady_ns() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count());
}

// A record's timestamp on the steady clock, in integers (doubles of realtime ns lose 0.25 us).
// A check on the clock as well: a timestamp nearer the realtime clock's now than the steady one's
// was left on CUPTI's default clock although CUPTI took ours; it is moved (called under g_sink.mu).
int64_t to_steady_ns(uint64_t t) {
  const int64_t v = static_cast<int64_t>(t) + g_sink.offset_ns;
  const int64_t steady = static_cast<int64_t>(steady_ns());
  if (std::llabs(v - (steady + g_sink.real_minus_steady_ns)) < std::llabs(v - steady)) {
    g_sink.moved = true;
    return v - g_sink.real_minus_steady_ns;
  }
  return v;
}

int64_t realtime_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(ACTIVITY_RECORD_ALIGNMENT, kBufferBytes));
  *size = *buffer ? kBufferBytes : 0;
  *max_records = 0;  // as many as fit
}

void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t* buffer, size_t, size_t valid) {
  std::lock_guard<std::mutex> lock(g_sink.mu);
  if (g_sink.out && g_sink.api) {
    CUpti_Activity* rec = nullptr;
    while (g_sink.api->next_record(buffer, valid, &rec) == CUPTI_SUCCESS) {
      if (rec->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL && rec->kind != CUPTI_ACTIVITY_KIND_KERNEL) continue;
      if (g_sink.out->size() >= kMaxRecords) {
        ++g_sink.capped;
        continue;
      }
      // The fields read here sit at the same offsets in every CUpti_ActivityKernel version.
      const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(rec);
      KernelRecord r;
      r.name = demangle(k->name);
      r.start_us = static_cast<double>(to_steady_ns(k->start)) / 1e3;
      r.dur_us = k->end > k->start ? static_cast<double>(k->end - k->start) / 1e3 : 0;
      r.device = k->deviceId;
      r.stream = k->streamId;
      r.correlation = k->correlationId;
      r.grid = {k->gridX, k->gridY, k->gridZ};
      r.block = {k->blockX, k->blockY, k->blockZ};
      g_sink.out->push_back(std::move(r));
    }
    size_t dropped = 0;
    if (g_sink.api->dropped(ctx, stream, &dropped) == CUPTI_SUCCESS) g_sink.dropped += dropped;
  }
  std::free(buffer);
}

std::string cupti_error(const Api& api, CUptiResult r) {
  const char* s = nullptr;
  api.result_string(r, &s);
  return s ? s : fmt::format("CUPTI error {}", static_cast<int>(r));
}

class CuptiCapture final : public KernelCapture {
 public:
  explicit CuptiCapture(const Api* api) : api_(api) {}
  ~CuptiCapture() override {
    if (!finished_) {
      std::string ignored;
      (void)finish(&ignored);
    }
  }

  Status begin() {
    {
      std::lock_guard<std::mutex> lock(g_sink.mu);
      if (g_sink.out) {
        finished_ = true;  // nothing of ours to stop: the other capture goes on
        return Status::Unavailable("another kernel capture is in progress");
      }
      g_sink.dropped = g_sink.capped = 0;
      g_sink.offset_ns = 0;
      g_sink.moved = false;
      const int64_t a = static_cast<int64_t>(steady_ns()), r = realtime_ns(), b = static_cast<int64_t>(steady_ns());
      g_sink.real_minus_steady_ns = r - (a / 2 + b / 2);
      g_sink.api = api_;
      g_sink.out = &records_;
    }
    // Our clock for every record (before any kind is enabled, as CUPTI asks); without the
    // callback, CUPTI's own clock and an offset measured now.
    if (!api_->timestamp_callback || api_->timestamp_callback(&steady_ns) != CUPTI_SUCCESS) {
      uint64_t cupti_ns = 0;
      const uint64_t a = steady_ns();
      api_->get_timestamp(&cupti_ns);
      const uint64_t b = steady_ns();
      std::lock_guard<std::mutex> lock(g_sink.mu);
      g_sink.offset_ns = static_cast<int64_t>(a / 2 + b / 2) - static_cast<int64_t>(cupti_ns);
    }
    CUptiResult r = api_->register_callbacks(&buffer_requested, &buffer_completed);
    if (r == CUPTI_SUCCESS) r = api_->enable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    if (r != CUPTI_SUCCESS) {
      finished_ = true;
      release();
      return Status::Unavailable("CUPTI ({}) refused kernel activity records: {}", api_->path, cupti_error(*api_, r));
    }
    return Status::Ok();
  }

  Result<std::vector<KernelRecord>> finish(std::string* note) override {
    if (finished_) return Status::Internal("kernel capture finished twice");
    finished_ = true;
    (void)cudaDeviceSynchronize();  // the last kernels' records complete
    api_->flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    api_->disable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    api_->flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    size_t dropped = 0, capped = 0;
    bool moved = false;
    {
      std::lock_guard<std::mutex> lock(g_sink.mu);
      dropped = g_sink.dropped;
      capped = g_sink.capped;
      moved = g_sink.moved;
    }
    release();
    if (note) {
      note->clear();
      if (dropped) *note = fmt::format("CUPTI dropped {} kernel record(s) (its buffers ran full)", dropped);
      if (capped) *note += fmt::format("{}{} kernel record(s) past the first {} not kept", note->empty() ? "" : "; ", capped, kMaxRecords);
    }
    std::sort(records_.begin(), records_.end(), [](const KernelRecord& a, const KernelRecord& b) { return a.start_us < b.start_us; });
    if (moved && note) *note += std::string(note->empty() ? "" : "; ") + "CUPTI kept the realtime clock: kernel times moved onto the steady clock";
    return std::move(records_);
  }

 private:
  void release() {
    std::lock_guard<std::mutex> lock(g_sink.mu);
    g_sink.out = nullptr;
    g_sink.api = nullptr;
  }
  const Api* api_;
  std::vector<KernelRecord> records_;
  bool finished_ = false;
};

}  // namespace

Result<std::unique_ptr<KernelCapture>> KernelCapture::start(const std::string& library) {
  GPUOPT_ASSIGN_OR_RETURN(const Api* api, load_api(library));
  auto c = std::make_unique<CuptiCapture>(api);
  GPUOPT_RETURN_IF_ERROR(c->begin());
  return std::unique_ptr<KernelCapture>(std::move(c));
}
#endif

}  // namespace gpuopt::profile
