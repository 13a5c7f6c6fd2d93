// Row-wise kernels: Softmax/LogSoftmax, LayerNormalization, reductions, per-channel affine
// (inference BatchNormalization) and pooling. Statistics are accumulated in f32 whatever the
// storage type (the f32-statistics rule of the precision list).
#pragma once

#include "backends/cuda/elementwise.h"

#include <vector>

namespace gpuopt::cuda {

// x viewed as [outer, axis, inner]; softmax along `axis`.
Status launch_softmax(DType dt, const void* x, void* y, int64_t outer, int64_t axis, int64_t inner, bool log,
                      cudaStream_t s);

// x viewed as [rows, cols]; y = (x - mean) / sqrt(var + eps) * scale + bias (bias may be null);
// mean/inv_std (f32, per row) are written when non-null.
Status launch_layernorm(DType dt, const void* x, const void* scale, const void* bias, void* y, int64_t rows,
                        int64_t cols, float eps, float* mean, float* inv_std, cudaStream_t s);
// The same over x + skip (skip: [skip_rows, cols] repeated over the rows, or nullptr); the sum is
// written to `sum` when it is non-null (SkipLayerNormalization's input_skip_bias_sum), and the
// e4m3 codes of y / q_scale (y as stored) to `q` when it is non-null (its output 4), or with
// q_int8 the int8 QuantizeLinear of y by q_scale rounded to y's type (zero point 0).
Status launch_skip_layernorm(DType dt, const void* x, const void* skip, int64_t skip_rows, const void* scale,
                             const void* bias, void* y, void* sum, int64_t rows, int64_t cols, float eps, float* mean,
                             float* inv_std, cudaStream_t s, bool rms = false, uint8_t* q = nullptr,
                             float q_scale = 1.0f, bool q_int8 = false);

// RMSNormalization: y = x / sqrt(mean(x^2) + eps) * scale over each row (the LayerNorm kernels
// without the centring); inv_rms (f32 per row) when non-null.
Status launch_rmsnorm(DType dt, const void* x, const void* scale, void* y, int64_t rows, int64_t cols, float eps,
                      float* inv_rms, cudaStream_t s);

enum class ReduceOp : uint8_t { kSum, kMean, kMax, kMin, kProd, kL2, kSumSquare, kL1, kLogSumExp };

// Reduces the axes flagged in `reduced` of a contiguous tensor of shape `in`; y holds the kept
// dims in order (keepdims does not change the memory layout).
Status launch_reduce(ReduceOp op, DType dt, const void* x, void* y, const Shape& in, const std::vector<bool>& reduced,
                     cudaStream_t s);

// y[n, c, i] = x[n, c, i] * scale[c] + shift[c]; scale/shift are f32 device vectors.
Status launch_channel_affine(DType dt, const void* x, const float* scale, const float* shift, void* y, int64_t n,
                             int64_t c, int64_t spatial, cudaStream_t s);

struct Pool2d {
  int64_t n, c, h, w, oh, ow;
  int64_t kh, kw, sh, sw, ph, pw, dh, dw;  // pads: top/left; bottom/right follow from the output size
  bool max = true;
  bool count_include_pad = false;
  bool nhwc = false;  // x [n, h, w, c] and y [n, oh, ow, c] (channels-last), else NCHW
};
Status launch_pool2d(DType dt, const void* x, void* y, const Pool2d& p, cudaStream_t s);

}  // namespace gpuopt::cuda
