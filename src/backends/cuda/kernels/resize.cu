// Resize kernel (see resize.h): one thread per output element.
#include "backends/cuda/resize.h"
#include "core/cuda_check.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

namespace gpuopt::cuda {
namespace {

constexpr int kThreads = 256;
unsigned grid_for(int64_t n) {
  const int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(b < 65535 * 8 ? (b > 0 ? b : 1) : 65535 * 8);
}

__device__ __forceinline__ double to_d(float v) { return v; }
__device__ __forceinline__ double to_d(__half v) { return __half2float(v); }
__device__ __forceinline__ double to_d(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ double to_d(uint8_t v) { return v; }
__device__ __forceinline__ double to_d(int8_t v) { return v; }

template <typename T> __device__ __forceinline__ T from_d(double v);
template <> __device__ __forceinline__ float from_d<float>(double v) { return __double2float_rn(v); }
template <> __device__ __forceinline__ __half from_d<__half>(double v) { return __double2half(v); }
template <> __device__ __forceinline__ __nv_bfloat16 from_d<__nv_bfloat16>(double v) { return __double2bfloat16(v); }
// Integers: round half to even, NaN to 0, saturate (the reference's saturate_cast).
template <> __device__ __forceinline__ uint8_t from_d<uint8_t>(double v) {
  v = rint(v);
  return isnan(v) ? 0 : static_cast<uint8_t>(fmin(fmax(v, 0.0), 255.0));
}
template <> __device__ __forceinline__ int8_t from_d<int8_t>(double v) {
  v = rint(v);
  return isnan(v) ? 0 : static_cast<int8_t>(fmin(fmax(v, -128.0), 127.0));
}

// Input coordinate of output index y along one axis (the CPU reference's formulas).
__device__ double source_coord(const ResizeDesc& d, int a, int64_t y, bool* extrapolate) {
  const double yd = static_cast<double>(y), scale = d.scale[a];
  const double in_w = static_cast<double>(d.in_dims[a]);
  const double out_w = __dmul_rn(scale, in_w);
  switch (d.ctm) {
    case ResizeCtm::kAlignCorners: return out_w == 1 ? 0.0 : __dmul_rn(yd, in_w - 1) / (out_w - 1);
    case ResizeCtm::kAsymmetric: return yd / scale;
    case ResizeCtm::kTfHalfPixelForNn: return (yd + 0.5) / scale;
    case ResizeCtm::kPytorchHalfPixel: return out_w == 1 ? -0.5 : (yd + 0.5) / scale - 0.5;
    case ResizeCtm::kHalfPixelSymmetric: {
      const double adjustment = static_cast<double>(d.out_dims[a]) / out_w;
      return __dadd_rn(__dmul_rn(in_w / 2, 1 - adjustment), (yd + 0.5) / scale) - 0.5;
    }
    case ResizeCtm::kTfCropAndResize: {
      const double rs = d.roi_start[a], re = d.roi_end[a];
      double x = out_w == 1 ? __dmul_rn(re - rs, in_w - 1) / 2 : __dmul_rn(__dmul_rn(yd, re - rs), in_w - 1) / (out_w - 1);
      x = __dadd_rn(x, __dmul_rn(rs, in_w - 1));
      *extrapolate = x < 0 || x > in_w - 1;
      return x;
    }
    default: return (yd + 0.5) / scale - 0.5;
  }
}

// Up to two taps (index clamped into the input, weight) for output index y along axis a.
__device__ int axis_taps(const ResizeDesc& d, int a, int64_t y, int64_t* idx, double* w, bool* extrapolate) {
  const int64_t in_len = d.in_dims[a];
  const double x = source_coord(d, a, y, extrapolate);
  const double p = floor(x);
  const bool on_pixel = x == p;
  const int64_t ip = static_cast<int64_t>(p);
  auto clamp = [in_len](int64_t i) { return i < 0 ? int64_t{0} : (i >= in_len ? in_len - 1 : i); };
  // As the reference: ratio 1 on a pixel; the taps start at p-1 on a pixel, else at p, and the
  // second tap is taken for ratio 1 or when rounding goes up.
  const double ratio = on_pixel ? 1.0 : x - p;
  const int64_t start = ip - 1 + (on_pixel ? 0 : 1);
  if (!d.linear) {
    bool up = true;
    if (ratio != 1.0) {
      switch (d.nearest) {
        case ResizeNearest::kRoundPreferFloor: up = ratio > 0.5; break;
        case ResizeNearest::kRoundPreferCeil: up = ratio >= 0.5; break;
        case ResizeNearest::kFloor: up = false; break;
        case ResizeNearest::kCeil: up = true; break;
      }
    }
    idx[0] = clamp(start + (up ? 1 : 0));
    w[0] = 1.0;
    return 1;
  }
  // Linear: on a pixel the taps are (p-1, p) with weights (0, 1), else (p, p+1) with (1-r, r).
  double c0 = 1.0 - ratio, c1 = ratio;
  if (d.exclude_outside) {
    if (start < 0 || start >= in_len) c0 = 0;
    if (start + 1 < 0 || start + 1 >= in_len) c1 = 0;
    const double sum = c0 + c1;
    if (sum != 0) {
      c0 /= sum;
      c1 /= sum;
    }
  }
  idx[0] = clamp(start);
  idx[1] = clamp(start + 1);
  w[0] = c0;
  w[1] = c1;
  return 2;
}

template <typename T>
__global__ void resize_kernel(const T* __restrict__ x, T* __restrict__ y, ResizeDesc d) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < d.numel; i += int64_t(gridDim.x) * blockDim.x) {
    int64_t idx[kMaxRank][2];
    double w[kMaxRank][2];
    int n[kMaxRank];
    int64_t in_stride[kMaxRank];
    bool extrapolate = false;
    int64_t rem = i, st = 1;
    for (int a = d.rank - 1; a >= 0; --a) {
      const int64_t c = rem % d.out_dims[a];
      rem /= d.out_dims[a];
      in_stride[a] = st;
      st *= d.in_dims[a];
      if (d.resized[a]) {
        n[a] = axis_taps(d, a, c, idx[a], w[a], &extrapolate);
      } else {
        n[a] = 1;
        idx[a][0] = c;
        w[a][0] = 1.0;
      }
    }
    if (extrapolate) {
      y[i] = from_d<T>(d.extrapolation);
      continue;
    }
    // Sum over the tensor product of the taps; zero weights are skipped (as the reference does,
    // which keeps an Inf in an unused tap out of the result).
    double acc = 0.0;
    int sel[kMaxRank] = {};
    for (;;) {
      double wp = 1.0;
      int64_t off = 0;
      for (int a = 0; a < d.rank; ++a) {
        wp *= w[a][sel[a]];
        off += idx[a][sel[a]] * in_stride[a];
      }
      if (wp != 0.0) acc += wp * to_d(x[off]);
      int a = d.rank - 1;
      for (; a >= 0; --a) {
        if (++sel[a] < n[a]) break;
        sel[a] = 0;
      }
      if (a < 0) break;
    }
    y[i] = from_d<T>(acc);
  }
}

}  // namespace

Status launch_resize(DType dt, const void* x, void* y, const ResizeDesc& d, cudaStream_t s) {
  if (d.numel == 0) return Status::Ok();
  auto go = [&](auto tag) {
    using T = decltype(tag);
    resize_kernel<T><<<grid_for(d.numel), kThreads, 0, s>>>(static_cast<const T*>(x), static_cast<T*>(y), d);
  };
  switch (dt) {
    case DType::F32: go(float{}); break;
    case DType::F16: go(__half{}); break;
    case DType::BF16: go(__nv_bfloat16{}); break;
    case DType::U8: go(uint8_t{}); break;
    case DType::I8: go(int8_t{}); break;
    default: return Status::Unimplemented("CUDA Resize on dtype {}", dtype_name(dt));
  }
  GPUOPT_CHECK_CALL(cudaGetLastError());
  return Status::Ok();
}

}  // namespace gpuopt::cuda
