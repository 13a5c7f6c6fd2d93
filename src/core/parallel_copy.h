// Large host-to-host copies split across a few threads. One core copies ~5-10 GB/s, so staging a
// ResNet-50 batch of 32 (19 MB of f32) into pinned memory took ~3 ms, ten times the DMA that
// follows it; a few threads bring it under a millisecond on a many-core host.
//
//   parallel_memcpy(pinned, host_tensor.raw(), host_tensor.nbytes());
#pragma once

#include <cstddef>

namespace gpuopt {

// Below kParallelCopyMin bytes, or on a host with fewer than 4 hardware threads, a plain memcpy.
inline constexpr size_t kParallelCopyMin = size_t{4} << 20;

// dst and src must not overlap. `max_threads` 0 = half the hardware threads, at most 8.
void parallel_memcpy(void* dst, const void* src, size_t n, unsigned max_threads = 0);

}  // namespace gpuopt
