// Versions of the CUDA libraries: those this binary was built against (header macros, CUDA builds
// only) and those found at run time (dlopen + the library's own version call), for `gpuopt version`.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace gpuopt {

struct FoundLibrary {
  std::string name;                    // "cuDNN"
  std::optional<std::string> version;  // "9.19.0"; nullopt: not found
  std::string path;                    // file the loader picked ("" when not found)
  std::string detail;                  // why not found, or extra text
};

struct LibraryVersions {
  // Built with (header macros); nullopt in builds without CUDA or without the header.
  std::optional<std::string> cuda_runtime_built, cublas_built, cudnn_built;
  // cudaRuntimeGetVersion of the runtime linked into the binary (statically).
  std::optional<std::string> cuda_runtime_linked;
  // Found at run time.
  FoundLibrary cuda_driver;   // libcuda.so.1, cuDriverGetVersion
  FoundLibrary cuda_runtime;  // libcudart.so.*, cudaRuntimeGetVersion (a shared copy, if any)
  FoundLibrary cublaslt;      // libcublasLt.so.*, cublasLtGetVersion
  FoundLibrary cudnn;         // libcudnn.so.*, cudnnGetVersion
};

LibraryVersions library_versions();

// 13000 -> "13.0"; 130102 (cuBLAS) -> "13.1.2"; cuDNN 91900 -> "9.19.0", 8907 -> "8.9.7".
std::string cuda_version_text(int v);
std::string cublas_version_text(long v);
std::string cudnn_version_text(long v);

// Header macros, from src/monitor/cuda/build_versions.cpp (CUDA builds) or the no-CUDA fallback.
void fill_built_versions(LibraryVersions* out);

}  // namespace gpuopt
