// Memory kernels: 16-byte vector accesses, grid-stride over a full-occupancy grid, four
// independent vectors in flight per thread (enough bytes in flight to cover DRAM latency).
#include "bench/cuda/common.h"

#include <cuda_runtime.h>

namespace gpuopt::bench::cuda {
namespace {

// kStreaming: evict-first cache hints (ld/st.global.cs), since each byte is touched once.
template <bool kStreaming>
__device__ __forceinline__ uint4 load(const uint4* p) {
  if constexpr (kStreaming) return __ldcs(p);
  else return *p;
}
template <bool kStreaming>
__device__ __forceinline__ void store(uint4* p, uint4 v) {
  if constexpr (kStreaming) __stcs(p, v);
  else *p = v;
}

template <bool kStreaming>
__global__ void __launch_bounds__(kMemThreads) copy_kernel(const uint4* __restrict__ src, uint4* __restrict__ dst,
                                                           size_t n) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  for (; i + 3 * stride < n; i += 4 * stride) {
    const uint4 a = load<kStreaming>(src + i), b = load<kStreaming>(src + i + stride),
                c = load<kStreaming>(src + i + 2 * stride), d = load<kStreaming>(src + i + 3 * stride);
    store<kStreaming>(dst + i, a);
    store<kStreaming>(dst + i + stride, b);
    store<kStreaming>(dst + i + 2 * stride, c);
    store<kStreaming>(dst + i + 3 * stride, d);
  }
  for (; i < n; i += stride) store<kStreaming>(dst + i, load<kStreaming>(src + i));
}

__device__ __forceinline__ uint32_t fold(uint4 v) { return v.x ^ v.y ^ v.z ^ v.w; }

// XOR of every 32-bit word: order-independent, so the CPU can check it exactly. One word
// written per block (negligible next to the bytes read).
__global__ void __launch_bounds__(kMemThreads) read_kernel(const uint4* __restrict__ src, size_t n,
                                                           uint32_t* __restrict__ block_xor) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  uint32_t acc0 = 0, acc1 = 0, acc2 = 0, acc3 = 0;
  for (; i + 3 * stride < n; i += 4 * stride) {
    acc0 ^= fold(src[i]);
    acc1 ^= fold(src[i + stride]);
    acc2 ^= fold(src[i + 2 * stride]);
    acc3 ^= fold(src[i + 3 * stride]);
  }
  for (; i < n; i += stride) acc0 ^= fold(src[i]);
  uint32_t acc = acc0 ^ acc1 ^ acc2 ^ acc3;
  for (int o = 16; o > 0; o >>= 1) acc ^= __shfl_xor_sync(0xffffffffu, acc, o);
  __shared__ uint32_t warp_acc[kMemThreads / 32];
  if ((threadIdx.x & 31) == 0) warp_acc[threadIdx.x >> 5] = acc;
  __syncthreads();
  if (threadIdx.x == 0) {
    uint32_t b = 0;
    for (int w = 0; w < kMemThreads / 32; ++w) b ^= warp_acc[w];
    block_xor[blockIdx.x] = b;
  }
}

// Word j of the buffer gets (j * 2654435761) ^ seed: a pattern the CPU can recompute.
__device__ __forceinline__ uint4 pattern(size_t v, uint32_t seed) {
  const uint32_t w = static_cast<uint32_t>(v * 4);
  return make_uint4(w * 2654435761u ^ seed, (w + 1) * 2654435761u ^ seed, (w + 2) * 2654435761u ^ seed,
                    (w + 3) * 2654435761u ^ seed);
}

__global__ void __launch_bounds__(kMemThreads) write_kernel(uint4* __restrict__ dst, size_t n, uint32_t seed) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  for (; i + 3 * stride < n; i += 4 * stride) {
    dst[i] = pattern(i, seed);
    dst[i + stride] = pattern(i + stride, seed);
    dst[i + 2 * stride] = pattern(i + 2 * stride, seed);
    dst[i + 3 * stride] = pattern(i + 3 * stride, seed);
  }
  for (; i < n; i += stride) dst[i] = pattern(i, seed);
}

}  // namespace

int max_resident_blocks(const void* kernel, int threads, int device) {
  int per_sm = 0, sms = 0;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, 0) != cudaSuccess) per_sm = 1;
  if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess) sms = 1;
  return std::max(1, per_sm) * std::max(1, sms);
}

int memory_grid(size_t vectors, int device) {
  const size_t needed = (vectors + kMemThreads - 1) / kMemThreads;
  const int full = max_resident_blocks(reinterpret_cast<const void*>(copy_kernel<false>), kMemThreads, device);
  return static_cast<int>(std::max<size_t>(1, std::min<size_t>(needed, full)));
}

void launch_copy(const void* src, void* dst, size_t vectors, int grid, cudaStream_t s, bool streaming) {
  if (streaming)
    copy_kernel<true><<<grid, kMemThreads, 0, s>>>(static_cast<const uint4*>(src), static_cast<uint4*>(dst), vectors);
  else
    copy_kernel<false><<<grid, kMemThreads, 0, s>>>(static_cast<const uint4*>(src), static_cast<uint4*>(dst), vectors);
}
void launch_read(const void* src, size_t vectors, uint32_t* block_xor, int grid, cudaStream_t s) {
  read_kernel<<<grid, kMemThreads, 0, s>>>(static_cast<const uint4*>(src), vectors, block_xor);
}
void launch_write(void* dst, size_t vectors, uint32_t seed, int grid, cudaStream_t s) {
  write_kernel<<<grid, kMemThreads, 0, s>>>(static_cast<uint4*>(dst), vectors, seed);
}

}  // namespace gpuopt::bench::cuda
