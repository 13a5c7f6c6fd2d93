// The channels-last max pool's plan (maxpool_nhwc.h): host code, tested without a GPU.
#include "ops/pool/cuda/maxpool_nhwc.h"

namespace gpuopt::cuda {

int common_alignment(const void* a, const void* b) {
  const uintptr_t bits = reinterpret_cast<uintptr_t>(a) | reinterpret_cast<uintptr_t>(b);
  int w = 16;
  while (w > 1 && bits % static_cast<uintptr_t>(w) != 0) w /= 2;
  return w;
}

MaxPoolNhwcPlan plan_maxpool_nhwc(const MaxPoolNhwcArgs& a, size_t es, int align) {
  MaxPoolNhwcPlan p;
  const int64_t row_bytes = a.c * static_cast<int64_t>(es);  // one pixel's channels
  p.vec_bytes = static_cast<int>(es);
  for (int w = 16; w > static_cast<int>(es); w /= 2)
    if (row_bytes % w == 0 && align % w == 0) {
      p.vec_bytes = w;
      break;
    }
  // The template column loops want whole 16-byte vectors and dilation 1 along W.
  if (p.vec_bytes == 16 && a.dw == 1) {
    if (a.kw == 3 && a.sw == 2) p.cols = MaxPoolCols::kK3S2;
    else if (a.kw == 2 && a.sw == 2) p.cols = MaxPoolCols::kK2S2;
    else if (a.kw == 3 && a.sw == 1) p.cols = MaxPoolCols::kK3S1;
  }
  p.outs = p.cols == MaxPoolCols::kGeneral ? 1 : 4;
  const int64_t vecs = row_bytes / p.vec_bytes;
  const int64_t groups = (a.ow + p.outs - 1) / p.outs;
  const int64_t threads = a.n * a.oh * groups * vecs;
  constexpr int64_t kMax = (int64_t{1} << 31) - 1;
  // Sizes the kernel holds as int, and the thread index as uint32 (its grid-stride loop adds
  // up to 2^31 more).
  for (int64_t v : {a.h, a.w, a.c, a.oh, a.ow, a.kh, a.kw, a.sh, a.sw, a.ph, a.pw, a.dh, a.dw, threads, a.n * a.oh})
    if (v < 0 || v > kMax) {
      p.why = "a size or the thread count reaches 2^31: the general pool2d kernel";
      return p;
    }
  if (a.h * a.w > kMax || a.w * a.c > kMax) {
    p.why = "an image row offset reaches 2^31: the general pool2d kernel";
    return p;
  }
  p.ok = true;
  p.vecs = static_cast<uint32_t>(vecs);
  p.groups = static_cast<uint32_t>(groups);
  p.threads = static_cast<uint32_t>(threads);
  p.why = p.cols == MaxPoolCols::kGeneral ? "general column loop" : "template column loop";
  return p;
}

}  // namespace gpuopt::cuda
