// Staging and PinnedUploads (staging.h).
#include "backends/cuda/staging.h"

#include "core/cuda_check.h"
#include "core/parallel_copy.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>

namespace gpuopt::cuda {

Staging::~Staging() {
  if (buf_) cudaFreeHost(buf_);
}

Status Staging::upload(const Tensor& host, Tensor* dev, cudaStream_t s) {
  const size_t n = host.nbytes();
  if (!n) return Status::Ok();
  // Already page-locked (the server reads large request bodies into pinned memory): copied up
  // from where it is, without the staging copy.
  cudaPointerAttributes attr{};
  if (cudaPointerGetAttributes(&attr, host.raw()) == cudaSuccess && attr.type == cudaMemoryTypeHost) {
    GPUOPT_CHECK_CALL(cudaMemcpyAsync(dev->raw(), host.raw(), n, cudaMemcpyHostToDevice, s));
    GPUOPT_CHECK_CALL(cudaStreamSynchronize(s));  // the caller's tensor may go once this returns
    return Status::Ok();
  }
  cudaGetLastError();
  GPUOPT_RETURN_IF_ERROR(reserve(n, s));
  parallel_memcpy(buf_, host.raw(), n);
  GPUOPT_CHECK_CALL(cudaMemcpyAsync(dev->raw(), buf_, n, cudaMemcpyHostToDevice, s));
  // The staging buffer is reused by the next copy: wait until this one has read it.
  GPUOPT_CHECK_CALL(cudaStreamSynchronize(s));
  return Status::Ok();
}

Status Staging::download(const Tensor& dev, Tensor* host, cudaStream_t s) {
  const size_t n = dev.nbytes();
  if (!n) return Status::Ok();
  GPUOPT_RETURN_IF_ERROR(reserve(n, s));
  GPUOPT_CHECK_CALL(cudaMemcpyAsync(buf_, dev.raw(), n, cudaMemcpyDeviceToHost, s));
  GPUOPT_CHECK_CALL(cudaStreamSynchronize(s));
  parallel_memcpy(host->raw(), buf_, n);
  return Status::Ok();
}

Status Staging::reserve(size_t n, cudaStream_t s) {
  if (n <= cap_) return Status::Ok();
  if (buf_) {
    GPUOPT_CHECK_CALL(cudaStreamSynchronize(s));
    cudaFreeHost(buf_);
    buf_ = nullptr;
  }
  cap_ = std::max(n, cap_ * 2);
  GPUOPT_CHECK_CALL(cudaHostAlloc(&buf_, cap_, cudaHostAllocPortable));
  return Status::Ok();
}

Status PinnedUploads::upload(const Tensor& host, Tensor* dev, cudaStream_t s) {
  const size_t n = host.nbytes();
  if (!n) return Status::Ok();
  // cudaHostAlloc is not a stream operation, but a thread-local capture forbids it as
  // "potentially unsafe"; it is safe here (nothing on the capturing stream depends on it).
  cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  GPUOPT_CHECK_CALL(cudaThreadExchangeStreamCaptureMode(&mode));
  void* p = nullptr;
  const cudaError_t e = cudaHostAlloc(&p, n, cudaHostAllocPortable);
  cudaThreadExchangeStreamCaptureMode(&mode);
  GPUOPT_CHECK_CALL(e);
  bufs_.push_back(p);
  bytes_ += n;
  std::memcpy(p, host.raw(), n);
  GPUOPT_CHECK_CALL(cudaMemcpyAsync(dev->raw(), p, n, cudaMemcpyHostToDevice, s));
  return Status::Ok();
}

void PinnedUploads::clear() {
  for (void* p : bufs_) cudaFreeHost(p);
  bufs_.clear();
  bytes_ = 0;
}

}  // namespace gpuopt::cuda
