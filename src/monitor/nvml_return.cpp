// nvmlReturn_t names and texts, and the StatusCode each maps to.
#include "monitor/nvml_types.h"

#include <cstring>
#include <string>

namespace gpuopt::nvml {
namespace {

struct ReturnRow {
  Return code;
  const char* name;  // without the NVML_ERROR_ prefix
  const char* text;  // as nvmlErrorString words it
  StatusCode status;
};

constexpr ReturnRow kReturns[] = {
    {kSuccess, "SUCCESS", "Success", StatusCode::kOk},
    {kErrorUninitialized, "UNINITIALIZED", "Uninitialized", StatusCode::kFailedPrecondition},
    {kErrorInvalidArgument, "INVALID_ARGUMENT", "Invalid Argument", StatusCode::kInvalidArgument},
    {kErrorNotSupported, "NOT_SUPPORTED", "Not Supported", StatusCode::kUnimplemented},
    {kErrorNoPermission, "NO_PERMISSION", "Insufficient Permissions", StatusCode::kFailedPrecondition},
    {kErrorAlreadyInitialized, "ALREADY_INITIALIZED", "Already Initialized", StatusCode::kAlreadyExists},
    {kErrorNotFound, "NOT_FOUND", "Not Found", StatusCode::kNotFound},
    {kErrorInsufficientSize, "INSUFFICIENT_SIZE", "Insufficient Size", StatusCode::kInvalidArgument},
    {kErrorInsufficientPower, "INSUFFICIENT_POWER", "Insufficient External Power", StatusCode::kUnavailable},
    {kErrorDriverNotLoaded, "DRIVER_NOT_LOADED", "Driver Not Loaded", StatusCode::kUnavailable},
    {kErrorTimeout, "TIMEOUT", "Timeout", StatusCode::kDeadlineExceeded},
    {kErrorIrqIssue, "IRQ_ISSUE", "Interrupt request issue", StatusCode::kInternal},
    {kErrorLibraryNotFound, "LIBRARY_NOT_FOUND", "NVML Shared Library Not Found", StatusCode::kUnavailable},
    {kErrorFunctionNotFound, "FUNCTION_NOT_FOUND", "Function Not Found", StatusCode::kUnimplemented},
    {kErrorCorruptedInforom, "CORRUPTED_INFOROM", "Corrupted infoROM", StatusCode::kInternal},
    {kErrorGpuIsLost, "GPU_IS_LOST", "GPU is lost", StatusCode::kUnavailable},
    {kErrorResetRequired, "RESET_REQUIRED", "GPU requires restart", StatusCode::kUnavailable},
    {kErrorOperatingSystem, "OPERATING_SYSTEM", "The operating system has blocked the request",
     StatusCode::kFailedPrecondition},
    {kErrorLibRmVersionMismatch, "LIB_RM_VERSION_MISMATCH", "RM has detected an NVML/RM version mismatch",
     StatusCode::kUnavailable},
    {kErrorInUse, "IN_USE", "In use by another client", StatusCode::kUnavailable},
    {kErrorMemory, "MEMORY", "Insufficient Memory", StatusCode::kOutOfMemory},
    {kErrorNoData, "NO_DATA", "No data", StatusCode::kNotFound},
    {kErrorVgpuEccNotEnabled, "VGPU_ECC_NOT_ENABLED", "ECC is not enabled", StatusCode::kFailedPrecondition},
    {kErrorInsufficientResources, "INSUFFICIENT_RESOURCES", "Insufficient resources", StatusCode::kUnavailable},
    {kErrorFreqNotSupported, "FREQ_NOT_SUPPORTED", "Frequency not supported", StatusCode::kUnimplemented},
    {kErrorArgumentVersionMismatch, "ARGUMENT_VERSION_MISMATCH", "Argument version mismatch",
     StatusCode::kInvalidArgument},
    {kErrorDeprecated, "DEPRECATED", "Deprecated", StatusCode::kUnimplemented},
    {kErrorNotReady, "NOT_READY", "Not ready", StatusCode::kUnavailable},
    {kErrorGpuNotFound, "GPU_NOT_FOUND", "GPU not found", StatusCode::kNotFound},
    {kErrorInvalidState, "INVALID_STATE", "Invalid state", StatusCode::kFailedPrecondition},
    {kErrorUnknown, "UNKNOWN", "Unknown Error", StatusCode::kInternal},
};

const ReturnRow* find(Return r) {
  for (const auto& row : kReturns)
    if (row.code == r) return &row;
  return nullptr;
}

}  // namespace

const char* return_name(Return r) {
  static thread_local std::string buf;
  if (r == kSuccess) return "NVML_SUCCESS";
  const ReturnRow* row = find(r);
  buf = std::string("NVML_ERROR_") + (row ? row->name : std::to_string(static_cast<int>(r)).c_str());
  return buf.c_str();
}

const char* return_text(Return r) {
  const ReturnRow* row = find(r);
  return row ? row->text : "Unknown Error";
}

std::optional<Return> parse_return(const char* name) {
  if (std::strncmp(name, "NVML_ERROR_", 11) == 0) name += 11;
  if (std::strcmp(name, "NVML_SUCCESS") == 0) return kSuccess;
  for (const auto& row : kReturns)
    if (std::strcmp(row.name, name) == 0) return row.code;
  return std::nullopt;
}

std::optional<detail::CallError> call_error(Return r) {
  if (r == kSuccess) return std::nullopt;
  const ReturnRow* row = find(r);
  detail::CallError e;
  e.text = fmt::format("{} ({})", return_text(r), return_name(r));
  e.code = row ? row->status : StatusCode::kInternal;
  return e;
}

}  // namespace gpuopt::nvml
