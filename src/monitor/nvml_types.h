// gpuopt's own declarations of the NVML ABI (no nvml.h at build time). Layouts, enum values and
// version constants follow NVIDIA's nvml.h (CUDA 12/13, driver 525-580); sizes are pinned by
// static_asserts below so a mistake fails to compile instead of corrupting memory at run time.
#pragma once

#include "core/check.h"

#include <cstdint>
#include <optional>

namespace gpuopt::nvml {

// nvmlReturn_t.
enum Return : int {
  kSuccess = 0,
  kErrorUninitialized = 1,
  kErrorInvalidArgument = 2,
  kErrorNotSupported = 3,
  kErrorNoPermission = 4,
  kErrorAlreadyInitialized = 5,
  kErrorNotFound = 6,
  kErrorInsufficientSize = 7,
  kErrorInsufficientPower = 8,
  kErrorDriverNotLoaded = 9,
  kErrorTimeout = 10,
  kErrorIrqIssue = 11,
  kErrorLibraryNotFound = 12,
  kErrorFunctionNotFound = 13,
  kErrorCorruptedInforom = 14,
  kErrorGpuIsLost = 15,
  kErrorResetRequired = 16,
  kErrorOperatingSystem = 17,
  kErrorLibRmVersionMismatch = 18,
  kErrorInUse = 19,
  kErrorMemory = 20,
  kErrorNoData = 21,
  kErrorVgpuEccNotEnabled = 22,
  kErrorInsufficientResources = 23,
  kErrorFreqNotSupported = 24,
  kErrorArgumentVersionMismatch = 25,
  kErrorDeprecated = 26,
  kErrorNotReady = 27,
  kErrorGpuNotFound = 28,
  kErrorInvalidState = 29,
  kErrorUnknown = 999,
};

// "NVML_ERROR_NOT_SUPPORTED"; "NVML_ERROR_<code>" for values this table does not know.
const char* return_name(Return r);
// Short text as nvmlErrorString gives it ("Not Supported").
const char* return_text(Return r);
// Return <-> name for the fake library's scripts ("NOT_SUPPORTED" or "NVML_ERROR_NOT_SUPPORTED").
std::optional<Return> parse_return(const char* name);
// For GPUOPT_CHECK_CALL(api.device_get_power_usage(dev, &mw)) — found by ADL.
std::optional<detail::CallError> call_error(Return r);

// Opaque handles.
struct DeviceSt;
struct EventSetSt;
struct GpmSampleSt;
using Device = DeviceSt*;
using EventSet = EventSetSt*;
using GpmSample = GpmSampleSt*;

// NVML_STRUCT_VERSION(name, ver): sizeof(struct) | (ver << 24).
constexpr unsigned int struct_version(unsigned long size, unsigned int ver) {
  return static_cast<unsigned int>(size) | (ver << 24U);
}

// Buffer sizes (NVML_*_BUFFER_SIZE).
constexpr unsigned int kDeviceNameBufferSize = 96;          // NVML_DEVICE_NAME_V2_BUFFER_SIZE
constexpr unsigned int kDeviceUuidBufferSize = 96;          // NVML_DEVICE_UUID_V2_BUFFER_SIZE
constexpr unsigned int kSystemDriverVersionBufferSize = 80;  // NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE
constexpr unsigned int kSystemNvmlVersionBufferSize = 80;
constexpr unsigned int kPciBusIdBufferSize = 32;            // NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE
constexpr unsigned int kPciBusIdLegacyBufferSize = 16;

enum EnableState : int { kFeatureDisabled = 0, kFeatureEnabled = 1 };

enum ClockType : int { kClockGraphics = 0, kClockSm = 1, kClockMem = 2, kClockVideo = 3 };

enum TemperatureSensor : int { kTemperatureGpu = 0 };

enum PcieUtilCounter : int { kPcieUtilTxBytes = 0, kPcieUtilRxBytes = 1 };

enum MemoryErrorType : int { kMemoryErrorCorrected = 0, kMemoryErrorUncorrected = 1 };

enum EccCounterType : int { kVolatileEcc = 0, kAggregateEcc = 1 };

enum ComputeMode : int {
  kComputeModeDefault = 0,
  kComputeModeExclusiveThread = 1,  // deprecated by NVIDIA, still reported by old drivers
  kComputeModeProhibited = 2,
  kComputeModeExclusiveProcess = 3,
};

enum ValueType : int {
  kValueDouble = 0,
  kValueUnsignedInt = 1,
  kValueUnsignedLong = 2,
  kValueUnsignedLongLong = 3,
  kValueSignedLongLong = 4,
  kValueSignedInt = 5,
  kValueUnsignedShort = 6,
};

// Field ids for nvmlDeviceGetFieldValues (NVML_FI_DEV_*).
constexpr unsigned int kFieldMemoryTemp = 82;                // NVML_FI_DEV_MEMORY_TEMP
constexpr unsigned int kFieldTotalEnergyConsumption = 83;    // NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION

// Event types (nvmlEventType*).
constexpr unsigned long long kEventSingleBitEccError = 0x1ULL;
constexpr unsigned long long kEventDoubleBitEccError = 0x2ULL;
constexpr unsigned long long kEventPState = 0x4ULL;
constexpr unsigned long long kEventXidCriticalError = 0x8ULL;
constexpr unsigned long long kEventClock = 0x10ULL;
constexpr unsigned long long kEventPowerSourceChange = 0x80ULL;
constexpr unsigned long long kEventMigConfigChange = 0x100ULL;

// Clock-event (formerly "throttle") reasons, nvmlClocksEventReason* bit masks.
constexpr unsigned long long kClocksEventGpuIdle = 0x1ULL;
constexpr unsigned long long kClocksEventApplicationsClocksSetting = 0x2ULL;
constexpr unsigned long long kClocksEventSwPowerCap = 0x4ULL;
constexpr unsigned long long kClocksEventHwSlowdown = 0x8ULL;
constexpr unsigned long long kClocksEventSyncBoost = 0x10ULL;
constexpr unsigned long long kClocksEventSwThermalSlowdown = 0x20ULL;
constexpr unsigned long long kClocksEventHwThermalSlowdown = 0x40ULL;
constexpr unsigned long long kClocksEventHwPowerBrakeSlowdown = 0x80ULL;
constexpr unsigned long long kClocksEventDisplayClockSetting = 0x100ULL;

// GPM metric ids (nvmlGpmMetricId_t).
enum GpmMetricId : unsigned int {
  kGpmGraphicsUtil = 1,
  kGpmSmUtil = 2,          // % of SMs busy (DCGM_FI_PROF_SM_ACTIVE)
  kGpmSmOccupancy = 3,     // % of warps resident vs max (DCGM_FI_PROF_SM_OCCUPANCY)
  kGpmIntegerUtil = 4,
  kGpmAnyTensorUtil = 5,   // % of time any tensor pipe active (DCGM_FI_PROF_PIPE_TENSOR_ACTIVE)
  kGpmDfmaTensorUtil = 6,
  kGpmHmmaTensorUtil = 7,
  kGpmImmaTensorUtil = 9,
  kGpmDramBwUtil = 10,     // % of peak DRAM bandwidth (DCGM_FI_PROF_DRAM_ACTIVE)
  kGpmFp64Util = 11,
  kGpmFp32Util = 12,
  kGpmFp16Util = 13,
  kGpmPcieTxPerSec = 20,   // MiB/s
  kGpmPcieRxPerSec = 21,
};
// NVML_GPM_METRIC_MAX in CUDA 13's header; only numMetrics entries are read, so a larger array
// than an older driver knows is harmless.
constexpr unsigned int kGpmMetricMax = 333;
constexpr unsigned int kGpmMetricsGetVersion = 1;  // NVML_GPM_METRICS_GET_VERSION
constexpr unsigned int kGpmSupportVersion = 1;     // NVML_GPM_SUPPORT_VERSION

// ---- structs ------------------------------------------------------------------------------------

struct Memory {  // nvmlMemory_t (v1): used includes reserved
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};

struct MemoryV2 {  // nvmlMemory_v2_t
  unsigned int version;
  unsigned long long total;
  unsigned long long reserved;
  unsigned long long free;
  unsigned long long used;
};
constexpr unsigned int kMemoryV2Version = struct_version(sizeof(MemoryV2), 2);  // nvmlMemory_v2

struct Utilization {  // nvmlUtilization_t, percent over the last sample period
  unsigned int gpu;
  unsigned int memory;
};

// nvmlPciInfo_t as _v2/_v3 fill it. The plain (v1) function wrote a 16-byte busId at the same
// offset as busIdLegacy and the same five integers after it, so one layout reads all three.
struct PciInfo {
  char bus_id_legacy[kPciBusIdLegacyBufferSize];
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pci_device_id;
  unsigned int pci_subsystem_id;
  char bus_id[kPciBusIdBufferSize];
};

struct ProcessInfoV1 {  // nvmlProcessInfo_v1_t, for the unversioned *RunningProcesses
  unsigned int pid;
  unsigned long long used_gpu_memory;
};

struct ProcessInfo {  // nvmlProcessInfo_t == nvmlProcessInfo_v2_t, for _v2 and _v3
  unsigned int pid;
  unsigned long long used_gpu_memory;  // kValueNotAvailable when the driver cannot tell
  unsigned int gpu_instance_id;
  unsigned int compute_instance_id;
};
constexpr unsigned long long kValueNotAvailable = ~0ULL;  // NVML_VALUE_NOT_AVAILABLE

struct ProcessUtilizationSample {  // nvmlProcessUtilizationSample_t
  unsigned int pid;
  unsigned long long time_stamp;  // CPU timestamp, microseconds
  unsigned int sm_util;
  unsigned int mem_util;
  unsigned int enc_util;
  unsigned int dec_util;
};

union Value {  // nvmlValue_t
  double d_val;
  int si_val;
  unsigned int ui_val;
  unsigned long ul_val;
  unsigned long long ull_val;
  long long sll_val;
  unsigned short us_val;
};

struct FieldValue {  // nvmlFieldValue_t
  unsigned int field_id;
  unsigned int scope_id;
  long long timestamp;
  long long latency_usec;
  ValueType value_type;
  Return nvml_return;
  Value value;
};

struct EventData {  // nvmlEventData_t (the plain nvmlEventSetWait fills only the first three)
  Device device;
  unsigned long long event_type;
  unsigned long long event_data;  // the XID for kEventXidCriticalError
  unsigned int gpu_instance_id;
  unsigned int compute_instance_id;
};

struct GpmSupport {  // nvmlGpmSupport_t
  unsigned int version;
  unsigned int is_supported_device;
};

struct GpmMetric {  // nvmlGpmMetric_t
  unsigned int metric_id;
  Return nvml_return;
  double value;
  struct {
    char* short_name;
    char* long_name;
    char* unit;
  } metric_info;
};

struct GpmMetricsGet {  // nvmlGpmMetricsGet_t
  unsigned int version;
  unsigned int num_metrics;
  GpmSample sample1;
  GpmSample sample2;
  GpmMetric metrics[kGpmMetricMax];
};

// The ABI, pinned (x86-64 / aarch64 LP64).
static_assert(sizeof(Memory) == 24);
static_assert(sizeof(MemoryV2) == 40 && kMemoryV2Version == 0x02000028U);
static_assert(sizeof(Utilization) == 8);
static_assert(sizeof(PciInfo) == 68);
static_assert(sizeof(ProcessInfoV1) == 16);
static_assert(sizeof(ProcessInfo) == 24);
static_assert(sizeof(ProcessUtilizationSample) == 32);
static_assert(sizeof(Value) == 8);
static_assert(sizeof(FieldValue) == 40);
static_assert(sizeof(EventData) == 32);
static_assert(sizeof(GpmMetric) == 40);
static_assert(sizeof(GpmMetricsGet) == 24 + 40 * kGpmMetricMax);

}  // namespace gpuopt::nvml
