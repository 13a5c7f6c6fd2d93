// QLinearConv on the GPU: u8/i8 input and weight, 1-3 spatial dims, groups, strides, dilations,
// pads (the CPU reference's window resolution, auto_pad included), per-tensor or per-output-
// channel weight scale and zero point, i32 bias. Exact int64 sums, the reference's
// requantization (quant_math.h). One thread per output element; the per-element sum is a
// __host__ __device__ function so the host unit test checks it against the CPU reference.
#pragma once

#include "backends/cuda/elementwise.h"
#include "ops/quant/cuda/quant_math.h"

#ifdef __CUDACC__
#define GPUOPT_QCONV_HD __host__ __device__
#else
#define GPUOPT_QCONV_HD
#endif

namespace gpuopt::cuda {

constexpr int kQConvMaxSpatial = 3;

struct QConvDesc {
  int nd = 0;
  int64_t N = 0, C = 0, M = 0, G = 1;
  int64_t in[kQConvMaxSpatial] = {}, out[kQConvMaxSpatial] = {}, kernel[kQConvMaxSpatial] = {};
  int64_t stride[kQConvMaxSpatial] = {}, dilation[kQConvMaxSpatial] = {}, pad_begin[kQConvMaxSpatial] = {};
  bool x_signed = false, w_signed = false, y_signed = false;
  int64_t x_zp = 0;
  int64_t w_zp_count = 1, w_scale_count = 1;  // 1 or M
  double x_scale = 1, y_scale = 1, y_zp = 0;
  QFloat scale_t = QFloat::kF32;
  int64_t numel = 0;  // N * M * prod(out)
};

GPUOPT_QCONV_HD inline int64_t qconv_q8(const void* p, bool sgn, int64_t i) {
  return sgn ? static_cast<int64_t>(static_cast<const int8_t*>(p)[i]) : static_cast<int64_t>(static_cast<const uint8_t*>(p)[i]);
}

// The exact sum of output element e (bias included), as the reference: taps outside the input
// (padding) contribute nothing.
GPUOPT_QCONV_HD inline int64_t qconv_sum(const QConvDesc& d, int64_t e, const void* x, const void* w, const void* w_zp,
                                         const int32_t* bias, int64_t* m_out) {
  int64_t osz = 1, isz = 1, ksz = 1;
  for (int i = 0; i < d.nd; ++i) osz *= d.out[i], isz *= d.in[i], ksz *= d.kernel[i];
  const int64_t o = e % osz, m = (e / osz) % d.M, n = e / (osz * d.M);
  *m_out = m;
  int64_t oc[kQConvMaxSpatial] = {};
  int64_t rem = o;
  for (int i = d.nd - 1; i >= 0; --i) oc[i] = rem % d.out[i], rem /= d.out[i];
  const int64_t Cg = d.C / d.G, Mg = d.M / d.G, g = m / Mg;
  const int64_t wz = qconv_q8(w_zp, d.w_signed, d.w_zp_count == 1 ? 0 : m);
  int64_t acc = bias ? bias[m] : 0;
  for (int64_t t = 0; t < ksz; ++t) {
    int64_t tr = t, ioff = 0, istride = 1;
    bool inside = true;
    for (int i = d.nd - 1; i >= 0; --i) {
      const int64_t tk = tr % d.kernel[i];
      tr /= d.kernel[i];
      const int64_t p = oc[i] * d.stride[i] - d.pad_begin[i] + tk * d.dilation[i];
      inside = inside && p >= 0 && p < d.in[i];
      ioff += p * istride;
      istride *= d.in[i];
    }
    if (!inside) continue;
    for (int64_t c = 0; c < Cg; ++c) {
      const int64_t xv = qconv_q8(x, d.x_signed, (n * d.C + g * Cg + c) * isz + ioff) - d.x_zp;
      const int64_t wv = qconv_q8(w, d.w_signed, (m * Cg + c) * ksz + t) - wz;
      acc += xv * wv;
    }
  }
  return acc;
}

// w_scale: f32 (w_scale_count values); bias may be null.
Status launch_qlinear_conv(const QConvDesc& d, const void* x, const void* w, const void* w_zp, const float* w_scale,
                           const int32_t* bias, void* y, cudaStream_t s);

}  // namespace gpuopt::cuda
