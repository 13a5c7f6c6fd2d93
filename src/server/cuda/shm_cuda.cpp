// CUDA shared memory (Triton's extension): the client's cudaIpcMemHandle_t opened on its device,
// and copies between it and host tensors. Compiled in CUDA builds only.
#include <cuda_runtime.h>

#include <cstring>

#include "server/shared_memory.h"

namespace gpuopt::server::cuda_ipc {
namespace {

Status check(cudaError_t e, const char* call) {
  if (e == cudaSuccess) return Status::Ok();
  cudaGetLastError();  // clears this thread's last error so later calls do not report it
  return Status::Unavailable("{} failed: {}", call, cudaGetErrorString(e));
}

}  // namespace

Result<void*> open(const std::string& raw_handle, int device_id) {
  cudaIpcMemHandle_t h;
  if (raw_handle.size() != sizeof(h))
    return Status::InvalidArgument("raw_handle is {} bytes, a cudaIpcMemHandle_t is {}", raw_handle.size(),
                                   sizeof(h));
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    cudaGetLastError();
    return Status::Unavailable("no CUDA device on this host");
  }
  if (device_id >= n) return Status::InvalidArgument("device_id {} does not exist ({} CUDA device(s))", device_id, n);
  std::memcpy(&h, raw_handle.data(), sizeof(h));
  GPUOPT_RETURN_IF_ERROR(check(cudaSetDevice(device_id), "cudaSetDevice"));
  void* p = nullptr;
  GPUOPT_RETURN_IF_ERROR(check(cudaIpcOpenMemHandle(&p, h, cudaIpcMemLazyEnablePeerAccess), "cudaIpcOpenMemHandle"));
  return p;
}

void close(void* ptr, int device_id) {
  if (cudaSetDevice(device_id) == cudaSuccess) cudaIpcCloseMemHandle(ptr);
  cudaGetLastError();
}

Status copy_to_host(void* dst, const void* src, size_t bytes, int device_id) {
  GPUOPT_RETURN_IF_ERROR(check(cudaSetDevice(device_id), "cudaSetDevice"));
  return check(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy (shared memory to host)");
}

Status copy_to_device(void* dst, const void* src, size_t bytes, int device_id) {
  GPUOPT_RETURN_IF_ERROR(check(cudaSetDevice(device_id), "cudaSetDevice"));
  return check(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice), "cudaMemcpy (host to shared memory)");
}

Result<void*> alloc_exportable(size_t bytes, int device_id, std::string* raw_handle) {
  GPUOPT_RETURN_IF_ERROR(check(cudaSetDevice(device_id), "cudaSetDevice"));
  void* p = nullptr;
  GPUOPT_RETURN_IF_ERROR(check(cudaMalloc(&p, bytes), "cudaMalloc"));
  cudaIpcMemHandle_t h;
  if (Status s = check(cudaIpcGetMemHandle(&h, p), "cudaIpcGetMemHandle"); !s.ok()) {
    cudaFree(p);
    return s;
  }
  raw_handle->assign(reinterpret_cast<const char*>(&h), sizeof(h));
  return p;
}

void free_exportable(void* ptr, int device_id) {
  if (cudaSetDevice(device_id) == cudaSuccess) cudaFree(ptr);
  cudaGetLastError();
}

bool pin(void* p, size_t bytes) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0 ||
      cudaHostRegister(p, bytes, cudaHostRegisterPortable) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return true;
}

void unpin(void* p) {
  cudaHostUnregister(p);
  cudaGetLastError();
}

}  // namespace gpuopt::server::cuda_ipc
