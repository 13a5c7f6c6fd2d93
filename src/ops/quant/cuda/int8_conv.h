// Int8Conv on the GPU (int8_conv.cpp, int8_conv.cu), channels-last only: the per-channel
// epilogue v = acc * alpha[m] + beta[m] (then Relu), where alpha/beta fold x_scale * w_scale[m]
// and the bias, divided by y_scale when the output is int8 (Relu commutes with a positive
// scale); the int8 output is v rounded half to even and saturated, as QuantizeLinear.
#pragma once

#include "core/dtype.h"
#include "core/status.h"

#include <cstdint>

typedef struct CUstream_st* cudaStream_t;

namespace gpuopt::cuda {

struct Int8ConvScales {
  DType dt = DType::F32;          // of the four below: f32 or f16
  const void* x_scale = nullptr;  // device, 1 value
  const void* w_scale = nullptr;  // device, 1 or m values
  bool w_per_channel = false;
  const void* bias = nullptr;     // device, m values, or null
  const void* y_scale = nullptr;  // device, 1 value, or null (float output)
  // The residual form: Z's scale (1 value; null: no residual) and the output scale after the
  // add (1 value, or null: float output).
  const void* z_scale = nullptr;
  const void* out_scale = nullptr;
};

// x [n, h, w, c], w [m, kh, kw, c], y [n, oh, ow, m]; symmetric pads, group 1.
struct Int8ConvGeom {
  int64_t n, h, w, c, m, kh, kw, oh, ow, ph, pw, sh, sw, dh, dw;
};

// alpha[m], beta[m] in f32 from the scales (one small kernel per run: the scales are tensors);
// with a residual (s.z_scale) also beta[m] = y_scale / out_scale and beta[m + 4] = z_scale /
// out_scale (out_scale 1 when absent; 16 bytes apart, as cuDNN wants its tensors aligned), so
// alpha's buffer holds 2 * m + kResidualFloats floats.
constexpr int64_t kResidualFloats = 8;
Status launch_int8_conv_prep(const Int8ConvScales& s, int64_t m, float* alpha, float* beta, cudaStream_t st);
// acc [rows, m] int32 -> y [rows, m] of out_dt (i8, f16, f32).
Status launch_int8_conv_epilogue(int64_t rows, int64_t m, const int32_t* acc, const float* alpha, const float* beta,
                                 bool relu, DType out_dt, void* y, cudaStream_t st);
// The fallback where cuDNN has no int8 plan: one thread per output, int32 sums, same epilogue.
Status launch_int8_conv_direct(const Int8ConvGeom& g, const int8_t* x, const int8_t* w, const float* alpha,
                               const float* beta, bool relu, DType out_dt, void* y, cudaStream_t st);

}  // namespace gpuopt::cuda
