// Library versions from the headers this binary was compiled against (CUDA builds only).
#include "monitor/lib_versions.h"

#include <cuda_runtime_api.h>
#if __has_include(<cublas_api.h>)
#include <cublas_api.h>
#endif
#if __has_include(<cudnn_version.h>)
#include <cudnn_version.h>
#endif

namespace gpuopt {

void fill_built_versions(LibraryVersions* out) {
  out->cuda_runtime_built = cuda_version_text(CUDART_VERSION);
#ifdef CUBLAS_VERSION
  out->cublas_built = cublas_version_text(CUBLAS_VERSION);
#endif
#ifdef CUDNN_VERSION
  out->cudnn_built = cudnn_version_text(CUDNN_VERSION);
#endif
}

}  // namespace gpuopt
