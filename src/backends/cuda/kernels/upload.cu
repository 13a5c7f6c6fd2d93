// upload_inline: host bytes carried to the device as kernel parameters (upload.h).
#include "backends/cuda/upload.h"
#include "core/cuda_check.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>

namespace gpuopt::cuda {
namespace {

constexpr size_t kChunk = 2048;  // well inside the 4 KiB kernel-parameter limit of every arch

struct Chunk {
  unsigned char bytes[kChunk];
};

__global__ void write_chunk(unsigned char* dst, Chunk c, unsigned n) {
  for (unsigned i = threadIdx.x; i < n; i += blockDim.x) dst[i] = c.bytes[i];
}

}  // namespace

Status upload_inline(const void* host, void* dev, size_t bytes, cudaStream_t stream) {
  const auto* src = static_cast<const unsigned char*>(host);
  auto* dst = static_cast<unsigned char*>(dev);
  for (size_t done = 0; done < bytes; done += kChunk) {
    const size_t n = std::min(kChunk, bytes - done);
    Chunk c;
    std::memcpy(c.bytes, src + done, n);
    write_chunk<<<1, 256, 0, stream>>>(dst + done, c, static_cast<unsigned>(n));
  }
  GPUOPT_CHECK_CALL(cudaGetLastError());
  return Status::Ok();
}

}  // namespace gpuopt::cuda
