// One checking macro for every library call (CUDA runtime, cuBLAS(Lt), cuDNN, NVML):
//
//   GPUOPT_CHECK_CALL(cudaMalloc(&p, n));     // returns Status "cudaMalloc(&p, n) failed: out of memory (cudaErrorMemoryAllocation)"
//
// Each library adds an overload `std::optional<gpuopt::detail::CallError> call_error(ResultType)`
// (nullopt on success) in the namespace of ResultType, so argument-dependent lookup finds it:
// the global namespace for cudaError_t / cublasStatus_t / cudnnStatus_t, gpuopt::nvml for NVML.
// The overloads live beside the library's own code (e.g. src/core/cuda_check.h, src/monitor/nvml.h),
// so this header pulls in none of them.
#pragma once

#include "core/status.h"

#include <optional>
#include <string>

namespace gpuopt::detail {

struct CallError {
  std::string text;           // library's error string and code name
  StatusCode code = StatusCode::kInternal;
};

template <typename R>
Status check_call(const R& r, const char* expr, const char* file, int line) {
  std::optional<CallError> e = call_error(r);  // found by ADL
  if (!e) return Status::Ok();
  return Status(e->code, fmt::format("{} failed: {} [{}:{}]", expr, e->text, file, line));
}

}  // namespace gpuopt::detail

#define GPUOPT_CHECK_CALL(call) \
  GPUOPT_RETURN_IF_ERROR(::gpuopt::detail::check_call((call), #call, __FILE__, __LINE__))

// As GPUOPT_CHECK_CALL but evaluates to the Status instead of returning it.
#define GPUOPT_CALL_STATUS(call) ::gpuopt::detail::check_call((call), #call, __FILE__, __LINE__)
