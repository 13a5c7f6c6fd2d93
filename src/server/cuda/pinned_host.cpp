// pinned_host_alloc / pinned_host_free (request_body.h): page-locked host memory for request
// bodies. Compiled in CUDA builds only.
#include <cuda_runtime.h>

#include "server/request_body.h"

namespace gpuopt::server {

void* pinned_host_alloc(size_t bytes) {
  void* p = nullptr;
  if (cudaHostAlloc(&p, bytes, cudaHostAllocPortable) != cudaSuccess) {
    cudaGetLastError();  // no device, or no page-locked memory left: the caller uses malloc
    return nullptr;
  }
  return p;
}

void pinned_host_free(void* p) {
  if (p) cudaFreeHost(p);
}

}  // namespace gpuopt::server
