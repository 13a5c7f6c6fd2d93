// oneDNN convolutions for the fast CPU backend (built when CMake finds oneDNN in .venv; otherwise
// make() returns nullptr and conv.cpp's im2col + sgemm path runs everything). oneDNN's
// channels-last (brgconv) AVX-512/AVX2 kernels ran ResNet-50's convolutions 1.2-2.7x faster than
// im2col + OpenBLAS sgemm on one core (docs/perf-notes.md). Activations are NHWC inside oneDNN;
// an NCHW input, residual or output is converted per unit of work on the thread that computes it,
// and values that pass only between such convolutions stay NHWC (plan_channels_last(),
// fast_kernel.h). Bias, residual (Z) and Relu / LeakyRelu / Clip run as oneDNN post-ops; other
// activations right after on the same rows.
// Every oneDNN call runs single-threaded on a gpuopt pool thread: the work is split by image,
// then by slabs of output rows (one primitive per slab geometry), then, when there are still
// fewer units than threads, by slices of output channels (residual and activation applied after
// oneDNN on each), so GPUOPT_NUM_THREADS and the shared pool hold as for the sgemm path.
//
//   auto c = DnnlConv::make(weight_dims, act);   // nullptr: oneDNN absent or shape not routed
//   ConvIo io{x, x_nhwc, bias, z, z_nhwc, y, y_nhwc};
//   bool done = c->run(shape, w, io);             // false: nothing written, use another path
#pragma once

#include "backends/cpu_fast/fast_kernel.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace gpuopt::cpu_fast {

// One call's 2-D convolution (group 1), OIHW weights.
struct ConvShape {
  int64_t N, C, H, W, M, KH, KW, OH, OW, sh, sw, ph0, pw0, ph1, pw1, dh, dw;
};

// The call's tensors: x [N, C, H, W], optional bias [M] and residual z (y's shape), y [N, M, OH,
// OW], each NCHW or (flag set) the same dims stored NHWC.
struct ConvIo {
  const float* x;
  bool x_nhwc;
  const float* bias;
  const float* z;
  bool z_nhwc;
  float* y;
  bool y_nhwc;
};

class DnnlConv {
 public:
  // For constant OIHW weights of dims `w` ({M, C, KH, KW}) and the node's activation; nullptr
  // without oneDNN.
  static std::unique_ptr<DnnlConv> make(const std::vector<int64_t>& w, const Activation& act);
  virtual ~DnnlConv() = default;
  // y = act(conv(x, w) + bias + z). Returns false, having written nothing, when oneDNN has no
  // channels-last kernel for this call's shape. `w` must be the same constant each call (it is
  // reordered once per primitive layout and cached).
  virtual bool run(const ConvShape& s, const float* w, const ConvIo& io) = 0;
};

// Convolutions oneDNN completed in this process (the tests check that a case took this path).
uint64_t dnnl_conv_calls();
// True when this build has oneDNN.
bool have_dnnl();
// The loaded oneDNN's version ("3.2.0"), or "" without oneDNN (`gpuopt version`).
std::string dnnl_version();

// NCHW <-> NHWC for positions [p0, p1) of one image of C channels and hw positions; the NHWC
// side holds only those positions (row p - p0).
void nchw_to_nhwc(const float* src, float* dst, int64_t C, int64_t hw, int64_t p0, int64_t p1);
void nhwc_to_nchw(const float* src, float* dst, int64_t C, int64_t hw, int64_t p0, int64_t p1);

}  // namespace gpuopt::cpu_fast
