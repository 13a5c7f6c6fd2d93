// The depthwise channels-last kernels' shared device code (depthwise.h): the parameters, vector
// loads and stores, the input activation (prologue), the epilogue, the two tiles (a row segment
// of OWT output columns with the kernel width and stride known at compile time; one output pixel
// for any kernel; each instantiated once per prologue activation), and the
// dispatch from runtime shape to template instance. depthwise.cu launches them one thread per
// tile; depthwise_mean.cu launches them a block per (image, channel slab, slice of rows) and also
// sums the outputs per channel (squeeze-excitation's spatial mean, se_mean pass); depthwise_smem.cu
// reuses the loads, prologue activation and epilogue with its shared-memory tiles.
#pragma once

#include "ops/conv/cuda/conv_act.cuh"
#include "ops/conv/cuda/depthwise.h"
#include "backends/cuda/kernels/float_convert.cuh"
#include "backends/cuda/kernels/kernel_common.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <type_traits>

namespace gpuopt::cuda::dw {

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
  ConvAct in_act;  // the prologue: act(x) of each in-bounds input value as it is read
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

// The prologue's activations (NhwcFusedConv's input_activation). Each input value is read by
// several threads (kh / sh output rows, and the overlap of the column segments), so the
// activation runs 2-8 times per input element: Swish takes one special-function instruction per
// value, sigmoid(x) = 0.5 * tanh(x / 2) + 0.5, for f16 two values per instruction (tanh.approx.f16x2;
// its error, about 2^-11 of the sigmoid, is that of the f16 value the unfused graph stored).
__device__ __forceinline__ float tanh_fast(float x) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 750
  float y;
  asm("tanh.approx.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
#else
  return tanhf(x);
#endif
}

__device__ __forceinline__ __half2 tanh_fast(__half2 x) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 750
  uint32_t in = *reinterpret_cast<const uint32_t*>(&x), out;
  asm("tanh.approx.f16x2 %0, %1;" : "=r"(out) : "r"(in));
  return *reinterpret_cast<const __half2*>(&out);
#else
  const float2 f = __half22float2(x);
  return __floats2half2_rn(tanhf(f.x), tanhf(f.y));
#endif
}

template <ConvAct A>
__device__ __forceinline__ float in_act(float x) {
  if constexpr (A == ConvAct::kSwish) {  // x * (0.5 tanh(x/2) + 0.5) = h tanh(h) + h, h = x/2: one rounding
    const float h = 0.5f * x;
    return fmaf(h, tanh_fast(h), h);
  }
  if constexpr (A == ConvAct::kHardSwish) return x * fminf(fmaxf(fmaf(x, 1.f / 6.f, 0.5f), 0.f), 1.f);
  if constexpr (A == ConvAct::kRelu) return fmaxf(x, 0.f);
  return x;
}

template <ConvAct A>
__device__ __forceinline__ __half2 in_act(__half2 x) {
  if constexpr (A == ConvAct::kSwish) {
    const __half2 h = __hmul2(__float2half2_rn(0.5f), x);  // exact (a power of two)
    return __hfma2(h, tanh_fast(h), h);
  }
  if constexpr (A == ConvAct::kHardSwish) {
    const __half2 g = __hfma2(x, __float2half2_rn(1.f / 6.f), __float2half2_rn(0.5f));
    return __hmul2(x, __hmin2(__hmax2(g, __float2half2_rn(0.f)), __float2half2_rn(1.f)));
  }
  if constexpr (A == ConvAct::kRelu) return __hmax2(x, __float2half2_rn(0.f));
  return x;
}

// load() with the prologue activation A applied: f16 pairs as __half2, else in f32.
template <typename T, int VEC, ConvAct A>
__device__ __forceinline__ void load_act(const T* p, float (&v)[VEC]) {
  if constexpr (A == ConvAct::kNone) {
    load<T, VEC>(p, v);
  } else if constexpr (std::is_same_v<T, __half> && VEC % 2 == 0) {
    __half2 h[VEC / 2];
    if constexpr (VEC == 8) {
      *reinterpret_cast<uint4*>(h) = *reinterpret_cast<const uint4*>(p);
    } else if constexpr (VEC == 4) {
      *reinterpret_cast<uint2*>(h) = *reinterpret_cast<const uint2*>(p);
    } else {
      *reinterpret_cast<uint32_t*>(h) = *reinterpret_cast<const uint32_t*>(p);
    }
#pragma unroll
    for (int i = 0; i < VEC / 2; ++i) {
      const float2 f = __half22float2(in_act<A>(h[i]));
      v[2 * i] = f.x;
      v[2 * i + 1] = f.y;
    }
  } else {
    load<T, VEC>(p, v);
#pragma unroll
    for (int i = 0; i < VEC; ++i) v[i] = in_act<A>(v[i]);
  }
}

// Calls f(std::integral_constant<ConvAct, A>{}) for the prologue activation a, on the host: each
// kernel is instantiated once per activation, so the tiles' loops hold no branch for it and a
// kernel without a prologue keeps the registers it had.
template <class F>
void with_in_act(ConvAct a, F&& f) {
  switch (a) {
    case ConvAct::kSwish: return f(std::integral_constant<ConvAct, ConvAct::kSwish>{});
    case ConvAct::kHardSwish: return f(std::integral_constant<ConvAct, ConvAct::kHardSwish>{});
    case ConvAct::kRelu: return f(std::integral_constant<ConvAct, ConvAct::kRelu>{});
    case ConvAct::kNone: break;
  }
  f(std::integral_constant<ConvAct, ConvAct::kNone>{});
}

// Stores v rounded to T, and leaves in v the values stored (what a reader of y sees).
template <typename T, int VEC>
__device__ __forceinline__ void store(T* p, float (&v)[VEC]) {
  if constexpr (VEC == 8) {
    uint4 u;
    T* e = reinterpret_cast<T*>(&u);
#pragma unroll
    for (int i = 0; i < 8; ++i) e[i] = from_f<T>(v[i]), v[i] = to_f(e[i]);
    *reinterpret_cast<uint4*>(p) = u;
  } else if constexpr (VEC == 4) {
    uint2 u;
    T* e = reinterpret_cast<T*>(&u);
#pragma unroll
    for (int i = 0; i < 4; ++i) e[i] = from_f<T>(v[i]), v[i] = to_f(e[i]);
    *reinterpret_cast<uint2*>(p) = u;
  } else if constexpr (VEC == 2) {
    uint32_t u;
    T* e = reinterpret_cast<T*>(&u);
    e[0] = from_f<T>(v[0]);
    e[1] = from_f<T>(v[1]);
    v[0] = to_f(e[0]);
    v[1] = to_f(e[1]);
    *reinterpret_cast<uint32_t*>(p) = u;
  } else {
    p[0] = from_f<T>(v[0]);
    v[0] = to_f(p[0]);
  }
}

// act(acc + bias + z), stored at output pixel pix, channels c0..c0+VEC; acc becomes the stored values.
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

// mean [n, c] of the per-(image, slice, channel) f32 partial sums [n, slices, c] over `count`
// pixels, the slices added in order (depthwise_mean.cu; also the smem kernel's, depthwise_smem.cu).
Status finish_mean(DType dt, const float* partial, void* mean, int64_t n, int64_t c, int64_t slices, int64_t count,
                   cudaStream_t s);

// finish() for OWT adjacent output pixels of one row from column ox0 (pixel pix0), the ones past
// the row's end skipped, adding the stored values to sum (squeeze-excitation's mean).
template <typename T, int VEC, int OWT>
__device__ __forceinline__ void finish_sum(const Params& p, float (&acc)[OWT][VEC], int64_t pix0, int ox0, int c0,
                                           float (&sum)[VEC]) {
#pragma unroll
  for (int t = 0; t < OWT; ++t) {
    if (ox0 + t >= p.ow) break;
    finish<T, VEC>(p, acc[t], pix0 + t, c0);
#pragma unroll
    for (int v = 0; v < VEC; ++v) sum[v] += acc[t][v];
  }
}

// Kernel width KW and stride SW known at compile time, dilation 1: the COLS input columns that
// OWT outputs share are read once per kernel row into registers.
template <typename T, int VEC, int KW, int SW, int OWT_>
struct RowTile {
  static constexpr int OWT = OWT_;
  template <ConvAct A>  // the prologue activation
  __device__ __forceinline__ static void compute(const Params& p, int64_t img, int oy, int ox0, int c0,
                                                 float (&acc)[OWT][VEC]) {
    constexpr int COLS = (OWT - 1) * SW + KW;
    const T* x = static_cast<const T*>(p.x);
    const T* w = static_cast<const T*>(p.w);
    const int ix0 = ox0 * SW - p.pw;
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
          load_act<T, VEC, A>(row + int64_t(ix) * p.c, xr[j]);
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
  }
};

// Any kernel size, stride and dilation: one output pixel, taps read directly.
template <typename T, int VEC>
struct PixelTile {
  static constexpr int OWT = 1;
  template <ConvAct A>  // the prologue activation
  __device__ __forceinline__ static void compute(const Params& p, int64_t img, int oy, int ox, int c0,
                                                 float (&acc)[1][VEC]) {
    const T* x = static_cast<const T*>(p.x);
    const T* w = static_cast<const T*>(p.w);
#pragma unroll
    for (int v = 0; v < VEC; ++v) acc[0][v] = 0.f;
    for (int ky = 0; ky < p.kh; ++ky) {
      const int iy = oy * p.sh - p.ph + ky * p.dh;
      if (iy < 0 || iy >= p.h) continue;
      const T* row = x + ((img * p.h + iy) * p.w_) * p.c + c0;
      for (int kx = 0; kx < p.kw; ++kx) {
        const int ix = ox * p.sw - p.pw + kx * p.dw;
        if (ix < 0 || ix >= p.w_) continue;
        float xv[VEC], wv[VEC];
        load_act<T, VEC, A>(row + int64_t(ix) * p.c, xv);
        load<T, VEC>(w + int64_t(ky * p.kw + kx) * p.c + c0, wv);
#pragma unroll
        for (int v = 0; v < VEC; ++v) acc[0][v] = fmaf(xv[v], wv[v], acc[0][v]);
      }
    }
  }
};

// Output columns per thread of the row tile. Stride 1: 8 at 4 channels (the wide tile), 4 at 8
// or 2. Stride 2: 4 at 4 channels for the wide tile, else 2 (the narrow tile: 8 x 2). At stride
// 2 a thread's input segment is twice as long, so 8 columns would take 136-151 registers (k3-k7,
// ptxas -v for sm_90) where 4 take 80-84 and the narrow tile 84-136; 4 x 4 also converts each
// loaded input for more multiply-adds than 8 x 2 (k5: 20 per 11 columns against 10 per 7).
constexpr int row_owt(int vec, int sw, bool wide) {
  return sw == 1 ? (vec == 4 ? 8 : 4) : (wide && vec == 4 ? 4 : 2);
}

// Calls l.template run<T, VEC, Tile>(p, s) with the tile for p's kernel width, stride and
// dilation: the row tile for widths 3, 5, 7 at strides 1 and 2 (dilation 1, VEC > 1), else the
// pixel tile. p.cg must be set; p.owb is set here.
template <class L, typename T, int VEC>
void dispatch_vec(const L& l, Params p, bool wide, cudaStream_t s) {
  p.cg = p.c / VEC;
  if constexpr (VEC > 1) {
    if (p.dw == 1 && (p.sw == 1 || p.sw == 2)) {
      auto row = [&](auto kw, auto sw, auto owt) {
        using Tile = RowTile<T, VEC, decltype(kw)::value, decltype(sw)::value, decltype(owt)::value>;
        p.owb = (p.ow + Tile::OWT - 1) / Tile::OWT;
        l.template run<T, VEC, Tile>(p, s);
      };
      using I1 = std::integral_constant<int, 1>;
      using I2 = std::integral_constant<int, 2>;
      using S1 = std::integral_constant<int, row_owt(VEC, 1, false)>;
      using S2N = std::integral_constant<int, row_owt(VEC, 2, false)>;
      using S2W = std::integral_constant<int, row_owt(VEC, 2, true)>;
      auto by_stride = [&](auto kw) {
        if (p.sw == 1) return row(kw, I1{}, S1{});
        if (wide && S2W::value != S2N::value) return row(kw, I2{}, S2W{});
        return row(kw, I2{}, S2N{});
      };
      switch (p.kw) {
        case 3: return by_stride(std::integral_constant<int, 3>{});
        case 5: return by_stride(std::integral_constant<int, 5>{});
        case 7: return by_stride(std::integral_constant<int, 7>{});
        default: break;
      }
    }
  }
  p.owb = p.ow;
  l.template run<T, VEC, PixelTile<T, VEC>>(p, s);
}

template <class L, typename T>
void dispatch_type(const L& l, const Params& p, int vec, bool wide, cudaStream_t s) {
  if (vec == 8) return dispatch_vec<L, T, 8>(l, p, wide, s);
  if (vec == 4) return dispatch_vec<L, T, 4>(l, p, wide, s);
  if (vec == 2) return dispatch_vec<L, T, 2>(l, p, wide, s);
  dispatch_vec<L, T, 1>(l, p, wide, s);
}

// Checks the extents, picks the channels per access and the tile, and dispatches (f16 or bf16).
// The wide tile (4 channels per access) applies to widths 3, 5, 7 at strides 1 and 2 unless the
// narrow one is asked for (or `wide1`: at stride 1 only, the tile choice before stride 2 had it); 8 channels per access otherwise, 2 or 1 where C or alignment forbids.
template <class L>
Status dispatch(const DepthwiseArgs& a, const L& l, cudaStream_t s) {
  if (a.dt != DType::F16 && a.dt != DType::BF16)
    return Status::Unimplemented("depthwise conv kernel: dtype {}", dtype_name(a.dt));
  // Pixel and row indices are 32-bit; element offsets are 64-bit.
  const int64_t lim = int64_t{1} << 30;
  for (int64_t v : {a.n, a.h, a.w, a.c, a.oh, a.ow, a.kh, a.kw, a.h * a.w, a.oh * a.ow})
    if (v <= 0 || v >= lim) return Status::Unimplemented("depthwise conv kernel: extent {} out of range", v);
  const bool row_kernel = a.dw == 1 && (a.sw == 1 || a.sw == 2) && (a.kw == 3 || a.kw == 5 || a.kw == 7);
  const bool wide = row_kernel && a.tile != DepthwiseTile::kNarrow && !(a.tile == DepthwiseTile::kWideS1 && a.sw == 2);
  auto aligned = [](const void* ptr, size_t bytes) { return reinterpret_cast<uintptr_t>(ptr) % bytes == 0; };
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
                 i(a.kh), i(a.kw), i(a.sh), i(a.sw), i(a.ph), i(a.pw), i(a.dh), i(a.dw), 0,       0,       a.act,
                 a.in_act};
  if (a.dt == DType::F16)
    dispatch_type<L, __half>(l, p, vec, wide, s);
  else
    dispatch_type<L, __nv_bfloat16>(l, p, vec, wide, s);
  return Status::Ok();
}

}  // namespace gpuopt::cuda::dw
