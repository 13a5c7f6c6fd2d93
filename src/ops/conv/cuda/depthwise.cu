// launch_depthwise_nhwc (depthwise.h). Thread = (image, output row, OWT adjacent output
// columns, VEC adjacent channels); consecutive threads take consecutive channel groups, so a
// warp's loads of one input pixel are contiguous. Accumulation in f32.
#include "ops/conv/cuda/depthwise.h"
#include "ops/conv/cuda/conv_act.cuh"
#include "backends/cuda/kernels/float_convert.cuh"
#include "backends/cuda/kernels/kernel_common.cuh"
#include "core/cuda_check.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

namespace gpuopt::cuda {
namespace {

using kern::from_f;
using kern::to_f;

constexpr int kThreads = 128;

struct Params {
  const void* x;
  const void* w;
  const void* bias;
  const void* z;
  void* y;
  int n, h, w_, c, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw;
  int cg;   // channel groups: c / VEC
  int owb;  // output column blocks: ceil(ow / OWT)
  ConvAct act;
};

// VEC consecutive elements of T at p (aligned to VEC * sizeof(T)) as floats.
template <typename T, int VEC>
__device__ __forceinline__ void load(const T* p, float (&v)[VEC]) {
  if constexpr (VEC == 8) {
    const uint4 u = *reinterpret_cast<const uint4*>(p);
    const T* e = reinterpret_cast<const T*>(&u);
#pragma unroll
    for (int i = 0; i < 8; ++i) v[i] = to_f(e[i]);
  } else if constexpr (VEC == 4) {
    const uint2 u = *reinterpret_cast<const uint2*>(p);
    const T* e = reinterpret_cast<const T*>(&u);
#pragma unroll
    for (int i = 0; i < 4; ++i) v[i] = to_f(e[i]);
  } else if constexpr (VEC == 2) {
    const uint32_t u = *reinterpret_cast<const uint32_t*>(p);
    const T* e = reinterpret_cast<const T*>(&u);
    v[0] = to_f(e[0]);
    v[1] = to_f(e[1]);
  } else {
    v[0] = to_f(p[0]);
  }
}

template <typename T, int VEC>
__device__ __forceinline__ void store(T* p, const float (&v)[VEC]) {
  if constexpr (VEC == 8) {
    uint4 u;
    T* e = reinterpret_cast<T*>(&u);
#pragma unroll
    for (int i = 0; i < 8; ++i) e[i] = from_f<T>(v[i]);
    *reinterpret_cast<uint4*>(p) = u;
  } else if constexpr (VEC == 4) {
    uint2 u;
    T* e = reinterpret_cast<T*>(&u);
#pragma unroll
    for (int i = 0; i < 4; ++i) e[i] = from_f<T>(v[i]);
    *reinterpret_cast<uint2*>(p) = u;
  } else if constexpr (VEC == 2) {
    uint32_t u;
    T* e = reinterpret_cast<T*>(&u);
    e[0] = from_f<T>(v[0]);
    e[1] = from_f<T>(v[1]);
    *reinterpret_cast<uint32_t*>(p) = u;
  } else {
    p[0] = from_f<T>(v[0]);
  }
}

// act(acc + bias + z), stored at output pixel (n, oy, ox), channels c0..c0+VEC.
template <typename T, int VEC>
__device__ __forceinline__ void finish(const Params& p, float (&acc)[VEC], int64_t pix, int c0) {
  const int64_t off = pix * p.c + c0;
  float t[VEC];
  if (p.bias) {
    load<T, VEC>(static_cast<const T*>(p.bias) + c0, t);
#pragma unroll
    for (int v = 0; v < VEC; ++v) acc[v] += t[v];
  }
  if (p.z) {
    load<T, VEC>(static_cast<const T*>(p.z) + off, t);
#pragma unroll
    for (int v = 0; v < VEC; ++v) acc[v] += t[v];
  }
  if (p.act != ConvAct::kNone) {
#pragma unroll
    for (int v = 0; v < VEC; ++v) acc[v] = apply_conv_act(p.act, acc[v]);
  }
  store<T, VEC>(static_cast<T*>(p.y) + off, acc);
}

// Kernel width KW and stride SW known at compile time, dilation 1: the COLS input columns that
// OWT outputs share are read once per kernel row into registers.
template <typename T, int VEC, int KW, int SW, int OWT>
__global__ void __launch_bounds__(kThreads) depthwise_row(Params p, int64_t total) {
  constexpr int COLS = (OWT - 1) * SW + KW;
  const T* x = static_cast<const T*>(p.x);
  const T* w = static_cast<const T*>(p.w);
  for (int64_t idx = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; idx < total;
       idx += int64_t(gridDim.x) * blockDim.x) {
    const int cg = static_cast<int>(idx % p.cg);
    int64_t r = idx / p.cg;
    const int ob = static_cast<int>(r % p.owb);
    r /= p.owb;
    const int oy = static_cast<int>(r % p.oh);
    const int64_t img = r / p.oh;
    const int c0 = cg * VEC, ox0 = ob * OWT, ix0 = ox0 * SW - p.pw;
    float acc[OWT][VEC];
#pragma unroll
    for (int t = 0; t < OWT; ++t)
#pragma unroll
      for (int v = 0; v < VEC; ++v) acc[t][v] = 0.f;
    for (int ky = 0; ky < p.kh; ++ky) {
      const int iy = oy * p.sh - p.ph + ky * p.dh;
      if (iy < 0 || iy >= p.h) continue;
      const T* row = x + ((img * p.h + iy) * p.w_) * p.c + c0;
      float xr[COLS][VEC];
#pragma unroll
      for (int j = 0; j < COLS; ++j) {
        const int ix = ix0 + j;
        if (ix >= 0 && ix < p.w_) {
          load<T, VEC>(row + int64_t(ix) * p.c, xr[j]);
        } else {
#pragma unroll
          for (int v = 0; v < VEC; ++v) xr[j][v] = 0.f;
        }
      }
#pragma unroll
      for (int kx = 0; kx < KW; ++kx) {
        float wv[VEC];
        load<T, VEC>(w + int64_t(ky * KW + kx) * p.c + c0, wv);
#pragma unroll
        for (int t = 0; t < OWT; ++t)
#pragma unroll
          for (int v = 0; v < VEC; ++v) acc[t][v] = fmaf(xr[t * SW + kx][v], wv[v], acc[t][v]);
      }
    }
    const int64_t pix0 = (img * p.oh + oy) * p.ow + ox0;
#pragma unroll
    for (int t = 0; t < OWT; ++t)
      if (ox0 + t < p.ow) finish<T, VEC>(p, acc[t], pix0 + t, c0);
  }
}

// Any kernel size, stride and dilation: one output pixel per thread, taps read directly.
template <typename T, int VEC>
__global__ void __launch_bounds__(kThreads) depthwise_any(Params p, int64_t total) {
  const T* x = static_cast<const T*>(p.x);
  const T* w = static_cast<const T*>(p.w);
  for (int64_t idx = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; idx < total;
       idx += int64_t(gridDim.x) * blockDim.x) {
    const int cg = static_cast<int>(idx % p.cg);
    int64_t r = idx / p.cg;
    const int ox = static_cast<int>(r % p.ow);
    r /= p.ow;
    const int oy = static_cast<int>(r % p.oh);
    const int64_t img = r / p.oh;
    const int c0 = cg * VEC;
    float acc[VEC];
#pragma unroll
    for (int v = 0; v < VEC; ++v) acc[v] = 0.f;
    for (int ky = 0; ky < p.kh; ++ky) {
      const int iy = oy * p.sh - p.ph + ky * p.dh;
      if (iy < 0 || iy >= p.h) continue;
      const T* row = x + ((img * p.h + iy) * p.w_) * p.c + c0;
      for (int kx = 0; kx < p.kw; ++kx) {
        const int ix = ox * p.sw - p.pw + kx * p.dw;
        if (ix < 0 || ix >= p.w_) continue;
        float xv[VEC], wv[VEC];
        load<T, VEC>(row + int64_t(ix) * p.c, xv);
        load<T, VEC>(w + int64_t(ky * p.kw + kx) * p.c + c0, wv);
#pragma unroll
        for (int v = 0; v < VEC; ++v) acc[v] = fmaf(xv[v], wv[v], acc[v]);
      }
    }
    finish<T, VEC>(p, acc, (img * p.oh + oy) * p.ow + ox, c0);
  }
}

// The wide tile (4 channels x 8 columns at stride 1) converts each loaded input to f32 for twice
// as many multiply-adds as the narrow one (8 channels x 4 columns), in 109 registers instead of
// 160: at 7x7 the narrow tile ran at 19% occupancy with the FMA pipe 25% busy (ncu), the wide one
// at 25% occupancy, 1.9x faster (docs/perf-notes.md).
template <typename T, int VEC, int KW, int SW>
void launch_row(Params p, cudaStream_t s) {
  constexpr int OWT = SW == 1 ? (VEC == 4 ? 8 : 4) : 2;
  p.owb = (p.ow + OWT - 1) / OWT;
  const int64_t total = int64_t(p.n) * p.oh * p.owb * p.cg;
  depthwise_row<T, VEC, KW, SW, OWT><<<kern::grid_for(total, kThreads), kThreads, 0, s>>>(p, total);
}

template <typename T, int VEC>
void launch_vec(Params p, cudaStream_t s) {
  p.cg = p.c / VEC;
  if constexpr (VEC > 1) {
    if (p.dw == 1 && (p.sw == 1 || p.sw == 2)) {
      const bool s1 = p.sw == 1;
      switch (p.kw) {
        case 3: return s1 ? launch_row<T, VEC, 3, 1>(p, s) : launch_row<T, VEC, 3, 2>(p, s);
        case 5: return s1 ? launch_row<T, VEC, 5, 1>(p, s) : launch_row<T, VEC, 5, 2>(p, s);
        case 7: return s1 ? launch_row<T, VEC, 7, 1>(p, s) : launch_row<T, VEC, 7, 2>(p, s);
        default: break;
      }
    }
  }
  p.owb = p.ow;
  const int64_t total = int64_t(p.n) * p.oh * p.ow * p.cg;
  depthwise_any<T, VEC><<<kern::grid_for(total, kThreads), kThreads, 0, s>>>(p, total);
}

template <typename T>
void launch_type(const Params& p, int vec, cudaStream_t s) {
  if (vec == 8) return launch_vec<T, 8>(p, s);
  if (vec == 4) return launch_vec<T, 4>(p, s);
  if (vec == 2) return launch_vec<T, 2>(p, s);
  launch_vec<T, 1>(p, s);
}

bool aligned(const void* ptr, size_t bytes) {
  return reinterpret_cast<uintptr_t>(ptr) % bytes == 0;
}

}  // namespace

Status launch_depthwise_nhwc(const DepthwiseArgs& a, cudaStream_t s) {
  if (a.dt != DType::F16 && a.dt != DType::BF16)
    return Status::Unimplemented("depthwise conv kernel: dtype {}", dtype_name(a.dt));
  if (a.n == 0 || a.oh == 0 || a.ow == 0 || a.c == 0) return Status::Ok();
  // Pixel and row indices are 32-bit; element offsets are 64-bit.
  const int64_t lim = int64_t{1} << 30;
  for (int64_t v : {a.n, a.h, a.w, a.c, a.oh, a.ow, a.kh, a.kw, a.h * a.w, a.oh * a.ow})
    if (v <= 0 || v >= lim) return Status::Unimplemented("depthwise conv kernel: extent {} out of range", v);
  // The wide tile at stride 1 unless narrow is asked for (H200, b256: ConvNeXt-T 15.4 -> 12.3 ms,
  // EfficientNet-B0 11.26 -> 11.08, MobileNetV3-L level; docs/perf-notes.md).
  const bool row_kernel = a.dw == 1 && a.sw == 1 && (a.kw == 3 || a.kw == 5 || a.kw == 7);
  const bool wide = row_kernel && a.tile != DepthwiseTile::kNarrow;
  int vec = 1;
  const int candidates[] = {wide ? 4 : 8, 2};
  for (int cand : candidates) {
    const size_t bytes = size_t(cand) * 2;
    if (a.c % cand == 0 && aligned(a.x, bytes) && aligned(a.w_t, bytes) && aligned(a.y, bytes) &&
        (!a.bias || aligned(a.bias, bytes)) && (!a.z || aligned(a.z, bytes))) {
      vec = cand;
      break;
    }
  }
  auto i = [](int64_t v) { return static_cast<int>(v); };
  const Params p{a.x,    a.w_t,  a.bias, a.z,    a.y,    i(a.n),  i(a.h),  i(a.w),  i(a.c),  i(a.oh), i(a.ow),
                 i(a.kh), i(a.kw), i(a.sh), i(a.sw), i(a.ph), i(a.pw), i(a.dh), i(a.dw), 0,       0,       a.act};
  if (a.dt == DType::F16)
    launch_type<__half>(p, vec, s);
  else
    launch_type<__nv_bfloat16>(p, vec, s);
  GPUOPT_CHECK_CALL(cudaGetLastError());
  return Status::Ok();
}

}  // namespace gpuopt::cuda
