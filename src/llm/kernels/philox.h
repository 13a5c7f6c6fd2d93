// Philox-4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11), the one
// generator of sampling.h, shared by the CPU sampler (philox_uniform) and the GPU's sample_rows so
// both draw the same u for the same (seed, counter). Plain C++ (no CUDA needed on the host).
//
// Convention (curand's: key = seed, counter = {offset, subsequence}):
//   key     = {lo32(seed), hi32(seed)}
//   counter = {lo32(counter_lo), hi32(counter_lo), lo32(counter_hi), hi32(counter_hi)}
//   u       = (first output word >> 8) * 2^-24, exactly representable, in [0, 1).
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define GPUOPT_PHILOX_HD __host__ __device__ __forceinline__
#else
#define GPUOPT_PHILOX_HD inline
#endif

namespace gpuopt::llm::philox {

struct U32x4 {
  uint32_t v[4];
};

GPUOPT_PHILOX_HD void mulhilo(uint32_t a, uint32_t b, uint32_t& hi, uint32_t& lo) {
  uint64_t p = static_cast<uint64_t>(a) * b;
  hi = static_cast<uint32_t>(p >> 32);
  lo = static_cast<uint32_t>(p);
}

// The 10-round block function on counter c with key (k0, k1).
GPUOPT_PHILOX_HD U32x4 philox4x32_10(U32x4 c, uint32_t k0, uint32_t k1) {
  for (int r = 0; r < 10; ++r) {
    if (r > 0) {
      k0 += 0x9E3779B9u;
      k1 += 0xBB67AE85u;
    }
    uint32_t hi0, lo0, hi1, lo1;
    mulhilo(0xD2511F53u, c.v[0], hi0, lo0);
    mulhilo(0xCD9E8D57u, c.v[2], hi1, lo1);
    c = U32x4{{hi1 ^ c.v[1] ^ k0, lo1, hi0 ^ c.v[3] ^ k1, lo0}};
  }
  return c;
}

GPUOPT_PHILOX_HD float uniform(uint64_t seed, uint64_t counter_hi, uint64_t counter_lo) {
  U32x4 c{{static_cast<uint32_t>(counter_lo), static_cast<uint32_t>(counter_lo >> 32),
           static_cast<uint32_t>(counter_hi), static_cast<uint32_t>(counter_hi >> 32)}};
  U32x4 r = philox4x32_10(c, static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
  return static_cast<float>(r.v[0] >> 8) * (1.0f / 16777216.0f);
}

}  // namespace gpuopt::llm::philox
