// oneDNN convolutions for the fast CPU backend (built when CMake finds oneDNN in .venv; otherwise
// make() returns nullptr and conv.cpp's im2col + sgemm path runs everything). oneDNN's
// channels-last (brgconv) AVX-512/AVX2 kernels ran ResNet-50's 3x3 and 7x7 convolutions 1.3-2.7x
// faster than im2col + OpenBLAS sgemm on one core, reorders in and out included
// (docs/perf-notes.md). Activations stay NCHW between nodes: the input is reordered to oneDNN's
// layout in the call, the output back, and the caller's epilogue (bias, residual, activation)
// runs on each part.
// Every oneDNN call runs single-threaded on a gpuopt pool thread (work split by image, then by
// output-channel blocks), so GPUOPT_NUM_THREADS and the shared pool hold as for the sgemm path.
//
//   auto c = DnnlConv::make(shape_of_weights);          // nullptr: oneDNN absent or shape not routed
//   bool done = c->run(s, x, w, y, [&](int64_t n, int64_t m0, int64_t m1) { /* rows [m0, m1) */ });
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace gpuopt::cpu_fast {

// One call's 2-D convolution (group 1), NCHW input and output, OIHW weights.
struct ConvShape {
  int64_t N, C, H, W, M, KH, KW, OH, OW, sh, sw, ph0, pw0, ph1, pw1, dh, dw;
};

class DnnlConv {
 public:
  // For constant OIHW weights of dims `w` ({M, C, KH, KW}); nullptr without oneDNN, and for 1x1
  // kernels: with the reorders in and out, oneDNN ran them no faster than sgemm on the input as
  // it is (stride 1) or on its subsample (stride 2).
  static std::unique_ptr<DnnlConv> make(const std::vector<int64_t>& w);
  virtual ~DnnlConv() = default;
  // y = conv(x, w) without bias; then epilogue(n, m0, m1) over output channels [m0, m1) of image
  // n, on the thread that wrote them. Returns false, having written nothing, when oneDNN has no
  // blocked kernel for this call's shape (the caller's own path runs it). `w` must be the same
  // constant each call (it is reordered once per thread split and cached).
  virtual bool run(const ConvShape& s, const float* x, const float* w, float* y,
                   const std::function<void(int64_t n, int64_t m0, int64_t m1)>& epilogue) = 0;
};

// Convolutions oneDNN completed in this process (the tests check that a case took this path).
uint64_t dnnl_conv_calls();
// True when this build has oneDNN.
bool have_dnnl();
// The loaded oneDNN's version ("3.2.0"), or "" without oneDNN (`gpuopt version`).
std::string dnnl_version();

}  // namespace gpuopt::cpu_fast
