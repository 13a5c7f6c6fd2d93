// One thread's work of the channels-last max pool (maxpool_nhwc.cu), host and device code: the
// kernel calls it once per thread index, tests/cuda/pool_layout_plan_test.cpp replays every index
// on the host (f32) against a plain loop, without a GPU.
#pragma once

#include "ops/elementwise/cuda/elementwise_plan.h"  // GPUOPT_EW_HD

#include <cmath>
#include <cstdint>
#include <limits>

namespace gpuopt::cuda {

// The sizes as 32-bit values (plan_maxpool_nhwc checked that they fit); pointer offsets 64-bit.
struct MaxPoolDims {
  int h, w, c, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw;
  uint32_t vecs, groups, threads;
};

// N elements of T moved as one access of sizeof(T) * N bytes.
template <typename T, int N>
struct alignas(sizeof(T) * N) PoolPack {
  T v[N];
};

// Thread i: channel vector i % vecs of the `OUTS` output pixels (grp * OUTS ...) of output row
// i / vecs / groups (image * oh + oy). KW > 0: the window is KW wide at stride SW along W,
// dilation 1, and each input column of the group's span is loaded once per window row. KW == 0:
// d.kw, d.sw and d.dw at run time, OUTS == 1. Padded taps are skipped; no tap gives -inf.
template <typename T, int N, int KW, int SW, int OUTS>
GPUOPT_EW_HD void maxpool_nhwc_thread(const T* __restrict__ x, T* __restrict__ y, const MaxPoolDims& d, uint32_t i) {
  using V = PoolPack<T, N>;
  const uint32_t cv = i % d.vecs, g = i / d.vecs;
  const uint32_t grp = g % d.groups, row = g / d.groups;
  const int oy = static_cast<int>(row % static_cast<uint32_t>(d.oh));
  const int64_t img = row / static_cast<uint32_t>(d.oh);
  const int ox0 = static_cast<int>(grp) * OUTS;
  const T* xi = x + img * d.h * d.w * d.c + cv * N;
  float acc[OUTS][N];
  GPUOPT_EW_UNROLL
  for (int t = 0; t < OUTS; ++t) {
    GPUOPT_EW_UNROLL
    for (int e = 0; e < N; ++e) acc[t][e] = -std::numeric_limits<float>::infinity();
  }
  const int iy0 = oy * d.sh - d.ph;
  for (int ky = 0; ky < d.kh; ++ky) {
    const int iy = iy0 + ky * d.dh;
    if (iy < 0 || iy >= d.h) continue;  // a padded row: no taps
    const T* xr = xi + static_cast<int64_t>(iy) * d.w * d.c;
    if constexpr (KW > 0) {
      const int ix0 = ox0 * SW - d.pw;
      GPUOPT_EW_UNROLL
      for (int j = 0; j < (OUTS - 1) * SW + KW; ++j) {
        const int ix = ix0 + j;
        if (ix < 0 || ix >= d.w) continue;
        const V v = *reinterpret_cast<const V*>(xr + static_cast<int64_t>(ix) * d.c);
        GPUOPT_EW_UNROLL
        for (int t = 0; t < OUTS; ++t) {
          const int kx = j - t * SW;
          if (kx < 0 || kx >= KW) continue;
          GPUOPT_EW_UNROLL
          for (int e = 0; e < N; ++e) acc[t][e] = fmaxf(acc[t][e], static_cast<float>(v.v[e]));
        }
      }
    } else {
      const int ix0 = ox0 * d.sw - d.pw;
      for (int kx = 0; kx < d.kw; ++kx) {
        const int ix = ix0 + kx * d.dw;
        if (ix < 0 || ix >= d.w) continue;
        const V v = *reinterpret_cast<const V*>(xr + static_cast<int64_t>(ix) * d.c);
        GPUOPT_EW_UNROLL
        for (int e = 0; e < N; ++e) acc[0][e] = fmaxf(acc[0][e], static_cast<float>(v.v[e]));
      }
    }
  }
  T* yr = y + (img * d.oh + oy) * static_cast<int64_t>(d.ow) * d.c + cv * N;
  GPUOPT_EW_UNROLL
  for (int t = 0; t < OUTS; ++t) {
    if (ox0 + t >= d.ow) break;
    V out;
    GPUOPT_EW_UNROLL
    for (int e = 0; e < N; ++e) out.v[e] = static_cast<T>(acc[t][e]);
    *reinterpret_cast<V*>(yr + static_cast<int64_t>(ox0 + t) * d.c) = out;
  }
}

}  // namespace gpuopt::cuda
