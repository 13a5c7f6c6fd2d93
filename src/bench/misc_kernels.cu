// Random fill (benchmarks never run on zeros) and the tiny kernels of the latency tests.
#include "bench/cuda/common.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

namespace gpuopt::bench::cuda {
namespace {

__device__ __forceinline__ uint32_t hash(uint64_t x) {  // splitmix64 finaliser
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return static_cast<uint32_t>((x ^ (x >> 31)) >> 32);
}

__device__ __forceinline__ float uniform(uint64_t i, uint64_t seed) {
  return static_cast<float>(hash(i * 0x2545f4914f6cdd1dull + seed)) * (2.0f / 4294967296.0f) - 1.0f;
}

__global__ void fill_kernel(int kind, void* p, size_t n, uint64_t seed) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const float u = uniform(i, seed);
    switch (static_cast<FillKind>(kind)) {
      case FillKind::F32: static_cast<float*>(p)[i] = u; break;
      case FillKind::F16: static_cast<__half*>(p)[i] = __float2half_rn(u); break;
      case FillKind::BF16: static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(u); break;
      case FillKind::FP8E4M3: static_cast<__nv_fp8_e4m3*>(p)[i] = __nv_fp8_e4m3(u); break;
      case FillKind::I8: static_cast<int8_t*>(p)[i] = static_cast<int8_t>(static_cast<int>((u + 1.0f) * 63.99f) - 64); break;
      case FillKind::U32: static_cast<uint32_t*>(p)[i] = hash(i + seed); break;
    }
  }
}

__global__ void empty_kernel() {}

__global__ void add_one_kernel(float* p, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] += 1.0f;
}

}  // namespace

void launch_fill(FillKind k, void* p, size_t elements, uint64_t seed, cudaStream_t st) {
  const int threads = 256;
  const int blocks = static_cast<int>(std::min<size_t>((elements + threads - 1) / threads, 65536));
  fill_kernel<<<std::max(blocks, 1), threads, 0, st>>>(static_cast<int>(k), p, elements, seed);
}

void launch_empty(cudaStream_t st) { empty_kernel<<<1, 32, 0, st>>>(); }

void launch_add_one(float* p, int n, cudaStream_t st) { add_one_kernel<<<(n + 255) / 256, 256, 0, st>>>(p, n); }

}  // namespace gpuopt::bench::cuda
