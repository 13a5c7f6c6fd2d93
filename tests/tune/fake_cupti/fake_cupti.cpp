// A fake libcupti (the functions profile's KernelCapture loads, same names and signatures as
// cupti.h declares), so the loader, the buffer callbacks, the record parsing and the clocks run
// without a GPU (tests/tune/cupti_test.cpp). A flush delivers, once per enable, three kernel
// records "run" right after the enable (two of one mangled kernel on stream 7, one on stream 9)
// and a memcpy record, and reports two dropped records. Timestamps come from the registered
// timestamp callback, else from the realtime clock, as the real CUPTI's default on Linux.
//
// Test controls (extern "C", found with dlsym): fake_cupti_fail_enable(code) makes enable return
// `code`; fake_cupti_recording() says whether kernels are being recorded (enabled, nothing
// delivered or disabled yet); fake_cupti_timestamp_callback(mode): 0 as CUPTI, 1 its registration
// fails, 2 it succeeds but the records stay on the realtime clock.
#include <cupti.h>

#include <chrono>
#include <cstdlib>
#include <cstring>

namespace {

CUpti_BuffersCallbackRequestFunc g_request = nullptr;
CUpti_BuffersCallbackCompleteFunc g_complete = nullptr;
CUpti_TimestampCallbackFunc g_timestamp = nullptr;
int g_enable_error = 0;
int g_timestamp_mode = 0;
uint64_t g_enabled_at = 0;  // 0: nothing to deliver

uint64_t realtime_ns() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch()).count());
}
uint64_t now_ns() { return g_timestamp ? g_timestamp() : realtime_ns(); }

const char* const kNames[] = {"_Z6squarePfi", "_Z6squarePfi", "gemm_kernel_plain"};

}  // namespace

extern "C" {

void fake_cupti_fail_enable(int code) { g_enable_error = code; }
int fake_cupti_recording() { return g_enabled_at != 0; }  // enabled, nothing delivered or disabled yet
void fake_cupti_timestamp_callback(int mode) {
  g_timestamp_mode = mode;
  if (mode) g_timestamp = nullptr;
}

CUptiResult CUPTIAPI cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc request,
                                                    CUpti_BuffersCallbackCompleteFunc complete) {
  if (!request || !complete) return CUPTI_ERROR_INVALID_PARAMETER;
  g_request = request;
  g_complete = complete;
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityRegisterTimestampCallback(CUpti_TimestampCallbackFunc f) {
  if (g_timestamp_mode == 1) return CUPTI_ERROR_NOT_INITIALIZED;
  if (!f) return CUPTI_ERROR_INVALID_PARAMETER;
  if (g_timestamp_mode == 0) g_timestamp = f;
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityEnable(CUpti_ActivityKind kind) {
  if (g_enable_error) return static_cast<CUptiResult>(g_enable_error);
  if (kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) g_enabled_at = now_ns();
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityDisable(CUpti_ActivityKind kind) {
  if (kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) g_enabled_at = 0;  // what ran so far is lost
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityFlushAll(uint32_t) {
  if (!g_enabled_at || !g_request || !g_complete) return CUPTI_SUCCESS;
  uint8_t* buffer = nullptr;
  size_t size = 0, max_records = 0;
  g_request(&buffer, &size, &max_records);
  const size_t record = sizeof(CUpti_ActivityKernel10);
  if (!buffer || size < 4 * record) return CUPTI_ERROR_INVALID_PARAMETER;
  std::memset(buffer, 0, 4 * record);
  const uint32_t streams[] = {7, 7, 9};
  for (int i = 0; i < 3; ++i) {  // kernel i: [enable + 10 us + 20 us * i, + 5 us)
    auto* k = reinterpret_cast<CUpti_ActivityKernel10*>(buffer + static_cast<size_t>(i) * record);
    k->kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
    k->start = g_enabled_at + 10'000 + 20'000 * static_cast<uint64_t>(i);
    k->end = k->start + 5'000;
    k->streamId = streams[i];
    k->deviceId = 0;
    k->correlationId = 100 + static_cast<uint32_t>(i);
    k->gridX = 64;
    k->gridY = k->gridZ = 1;
    k->blockX = 256;
    k->blockY = k->blockZ = 1;
    k->name = kNames[i];
  }
  // A record of another kind in between: not a kernel.
  reinterpret_cast<CUpti_Activity*>(buffer + 3 * record)->kind = CUPTI_ACTIVITY_KIND_MEMCPY;
  g_enabled_at = 0;
  g_complete(nullptr, 0, buffer, size, 4 * record);
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityGetNextRecord(uint8_t* buffer, size_t valid, CUpti_Activity** rec) {
  const size_t record = sizeof(CUpti_ActivityKernel10);
  uint8_t* next = *rec ? reinterpret_cast<uint8_t*>(*rec) + record : buffer;
  if (next + record > buffer + valid) return CUPTI_ERROR_MAX_LIMIT_REACHED;
  *rec = reinterpret_cast<CUpti_Activity*>(next);
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityGetNumDroppedRecords(CUcontext, uint32_t, size_t* dropped) {
  *dropped = 2;
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiGetResultString(CUptiResult result, const char** str) {
  *str = result == CUPTI_ERROR_INSUFFICIENT_PRIVILEGES ? "CUPTI_ERROR_INSUFFICIENT_PRIVILEGES" : "CUPTI_ERROR_UNKNOWN";
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiGetTimestamp(uint64_t* timestamp) {
  *timestamp = realtime_ns();  // CUPTI's own clock, not the callback's
  return CUPTI_SUCCESS;
}

}  // extern "C"
