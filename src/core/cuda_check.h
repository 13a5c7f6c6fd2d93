// GPUOPT_CHECK_CALL support for the CUDA runtime, cuBLAS(Lt) and cuDNN (include only in CUDA
// builds). The overloads are in the global namespace, where the libraries' result types live,
// so argument-dependent lookup finds them from core/check.h.
//
//   GPUOPT_CHECK_CALL(cudaMallocAsync(&p, bytes, stream));
//   GPUOPT_CHECK_CALL(cublasLtMatmul(...));
#pragma once

#include "core/check.h"

#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <optional>
#include <string>

namespace gpuopt {

// The CUDA runtime answers cudaErrorInsufficientDriver both when the driver is too old and when
// there is no driver at all ("CUDA driver version is insufficient for CUDA runtime version" on a
// machine without one); this says which, and what to do.
inline std::string cuda_error_text(cudaError_t e) {
  if (e == cudaErrorInsufficientDriver) {
    void* lib = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
    if (!lib) return "no NVIDIA driver installed (libcuda.so.1 not found)";
    int have = 0, need = 0;
    using GetVersion = int (*)(int*);
    auto get = reinterpret_cast<GetVersion>(dlsym(lib, "cuDriverGetVersion"));
    const bool known = get && get(&have) == 0 && cudaRuntimeGetVersion(&need) == cudaSuccess;
    dlclose(lib);
    if (known)
      return fmt::format("the NVIDIA driver supports CUDA {}.{} but this build needs CUDA {}.{}: update the driver",
                         have / 1000, have % 1000 / 10, need / 1000, need % 1000 / 10);
    return "the NVIDIA driver is older than this build's CUDA runtime: update the driver";
  }
  if (e == cudaErrorNoDevice) return "the NVIDIA driver found no CUDA device";
  return fmt::format("{} ({})", cudaGetErrorString(e), cudaGetErrorName(e));
}

}  // namespace gpuopt

inline std::optional<gpuopt::detail::CallError> call_error(cudaError_t e) {
  if (e == cudaSuccess) return std::nullopt;
  const gpuopt::StatusCode code =
      e == cudaErrorMemoryAllocation ? gpuopt::StatusCode::kOutOfMemory
      : (e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver) ? gpuopt::StatusCode::kUnavailable
                                                                       : gpuopt::StatusCode::kInternal;
  return gpuopt::detail::CallError{gpuopt::cuda_error_text(e), code};
}

#if defined(CUBLAS_VER_MAJOR) || defined(CUBLASLT_H_) || __has_include(<cublasLt.h>)
#include <cublasLt.h>
inline std::optional<gpuopt::detail::CallError> call_error(cublasStatus_t s) {
  if (s == CUBLAS_STATUS_SUCCESS) return std::nullopt;
  const char* name = "CUBLAS_STATUS_UNKNOWN";
  switch (s) {
    case CUBLAS_STATUS_NOT_INITIALIZED: name = "CUBLAS_STATUS_NOT_INITIALIZED"; break;
    case CUBLAS_STATUS_ALLOC_FAILED: name = "CUBLAS_STATUS_ALLOC_FAILED"; break;
    case CUBLAS_STATUS_INVALID_VALUE: name = "CUBLAS_STATUS_INVALID_VALUE"; break;
    case CUBLAS_STATUS_ARCH_MISMATCH: name = "CUBLAS_STATUS_ARCH_MISMATCH"; break;
    case CUBLAS_STATUS_MAPPING_ERROR: name = "CUBLAS_STATUS_MAPPING_ERROR"; break;
    case CUBLAS_STATUS_EXECUTION_FAILED: name = "CUBLAS_STATUS_EXECUTION_FAILED"; break;
    case CUBLAS_STATUS_INTERNAL_ERROR: name = "CUBLAS_STATUS_INTERNAL_ERROR"; break;
    case CUBLAS_STATUS_NOT_SUPPORTED: name = "CUBLAS_STATUS_NOT_SUPPORTED"; break;
    default: break;
  }
  return gpuopt::detail::CallError{
      name, s == CUBLAS_STATUS_ALLOC_FAILED ? gpuopt::StatusCode::kOutOfMemory
            : s == CUBLAS_STATUS_NOT_SUPPORTED ? gpuopt::StatusCode::kUnimplemented
                                               : gpuopt::StatusCode::kInternal};
}
#endif

#if __has_include(<cudnn.h>)
#include <cudnn.h>
inline std::optional<gpuopt::detail::CallError> call_error(cudnnStatus_t s) {
  if (s == CUDNN_STATUS_SUCCESS) return std::nullopt;
  return gpuopt::detail::CallError{cudnnGetErrorString(s), s == CUDNN_STATUS_ALLOC_FAILED
                                                                ? gpuopt::StatusCode::kOutOfMemory
                                                                : gpuopt::StatusCode::kInternal};
}
#endif
