// upload_inline: host bytes carried to the device as kernel parameters (upload.h).
#include "backends/cuda/upload.h"
#include "core/cuda_check.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace gpuopt::cuda {
namespace {

// Kernel parameters may take 32,764 bytes on Volta and later with CUDA 12.1 and newer (4 KiB
// before): one launch carries 32,704 bytes (a multiple of 16) beside the pointer and the count, so
// BERT-base's shape-derived ids at batch 32 (token types and positions, 128 KiB) take 4 launches
// instead of 64 (2 KiB each), each ~2 us in a CUDA graph.
constexpr size_t kChunk = 32704;
constexpr unsigned kThreads = 256;

struct Chunk {
  uint4 words[kChunk / 16];
};
static_assert(sizeof(Chunk) + sizeof(void*) + sizeof(unsigned) <= 32764, "kernel parameters exceed 32,764 bytes");

// Each thread copies one 16-byte word: as one store where dst is 16-byte aligned (the pool's and
// the plan's blocks are 256-aligned, chunks start at multiples of 16), else (and for the last
// word of an odd-sized chunk) byte by byte.
__global__ void write_chunk(unsigned char* dst, Chunk c, unsigned n) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  const unsigned begin = i * 16;
  if (begin >= n) return;
  if (begin + 16 <= n && reinterpret_cast<uintptr_t>(dst) % 16 == 0) {
    reinterpret_cast<uint4*>(dst)[i] = c.words[i];
    return;
  }
  const auto* bytes = reinterpret_cast<const unsigned char*>(&c.words[i]);
  for (unsigned b = begin; b < n; ++b) dst[b] = bytes[b - begin];
}

}  // namespace

Status upload_inline(const void* host, void* dev, size_t bytes, cudaStream_t stream) {
  const auto* src = static_cast<const unsigned char*>(host);
  auto* dst = static_cast<unsigned char*>(dev);
  for (size_t done = 0; done < bytes; done += kChunk) {
    const size_t n = std::min(kChunk, bytes - done);
    Chunk c;
    std::memcpy(c.words, src + done, n);
    const unsigned blocks = static_cast<unsigned>((n + 16 * kThreads - 1) / (16 * kThreads));
    write_chunk<<<blocks, kThreads, 0, stream>>>(dst + done, c, static_cast<unsigned>(n));
  }
  GPUOPT_CHECK_CALL(cudaGetLastError());
  return Status::Ok();
}

}  // namespace gpuopt::cuda
