// gpuopt's channels-last max pool (NhwcMaxPool's default; GPUOPT_POOL_KERNEL=cudnn keeps cuDNN's
// pooling for A/B runs). Each thread takes one vector of channels (16 bytes: 8 f16/bf16 or 4 f32)
// of `outs` neighbouring output pixels along W, and for each window row loads every input column
// of their joint span once: a 3-wide window at stride 2 over 4 outputs reads 9 columns instead of
// 12, reused from registers. Padded taps are left out of the maximum, as ONNX does; a window of
// padding only gives -inf, as the CPU reference does.
//
//   MaxPoolNhwcPlan p = plan_maxpool_nhwc(args, 2, 16);  // ResNet-50's stem: k3 s2 p1, C=64, f16
//   // p.cols == MaxPoolCols::kK3S2, p.vec_bytes == 16, p.outs == 4
//
// The plan is host code (tests/cuda/maxpool_plan_test.cpp checks it without a GPU).
#pragma once

#include "core/dtype.h"
#include "core/status.h"

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace gpuopt::cuda {

// x [n, h, w, c] -> y [n, oh, ow, c]; pads top/left (bottom/right follow from oh/ow, so ceil_mode
// and asymmetric pads need nothing more).
struct MaxPoolNhwcArgs {
  int64_t n = 0, h = 0, w = 0, c = 0, oh = 0, ow = 0;
  int64_t kh = 1, kw = 1, sh = 1, sw = 1, ph = 0, pw = 0, dh = 1, dw = 1;
};

// The column loop: the kernel's width and stride along W as template constants (dilation 1,
// 16-byte vectors), else the general loop (any width, stride and dilation, one output per thread).
enum class MaxPoolCols : uint8_t { kK3S2, kK2S2, kK3S1, kGeneral };

struct MaxPoolNhwcPlan {
  bool ok = false;  // false: sizes past the kernel's 32-bit thread index (`why` says)
  MaxPoolCols cols = MaxPoolCols::kGeneral;
  int vec_bytes = 0;      // bytes per access: 16, 8, 4, or the element size
  int outs = 1;           // output pixels per thread along W
  uint32_t vecs = 0;      // channel vectors per pixel (c * elem_size / vec_bytes)
  uint32_t groups = 0;    // thread groups per output row: ceil(ow / outs)
  uint32_t threads = 0;   // n * oh * groups * vecs
  const char* why = "";
};

// `align`: the largest power of two (up to 16) that both pointers are aligned to.
MaxPoolNhwcPlan plan_maxpool_nhwc(const MaxPoolNhwcArgs& a, size_t elem_size, int align);

// Runs the plan (f32, f16, bf16); the caller checked plan.ok.
Status launch_maxpool_nhwc(DType dt, const void* x, void* y, const MaxPoolNhwcArgs& a, const MaxPoolNhwcPlan& plan,
                           cudaStream_t s);

// The largest power of two up to 16 dividing both addresses.
int common_alignment(const void* a, const void* b);

}  // namespace gpuopt::cuda
