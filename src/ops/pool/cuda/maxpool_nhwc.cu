// The channels-last max pool kernel (maxpool_nhwc.h).
#include "ops/pool/cuda/maxpool_nhwc.h"
#include "ops/pool/cuda/maxpool_nhwc_thread.h"
#include "backends/cuda/kernels/kernel_common.cuh"
#include "core/cuda_check.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace gpuopt::cuda {
namespace {

constexpr int kThreads = 256;

template <typename T, int N, int KW, int SW, int OUTS>
__global__ void __launch_bounds__(kThreads) maxpool_nhwc(const T* __restrict__ x, T* __restrict__ y, MaxPoolDims d) {
  for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < d.threads; i += gridDim.x * blockDim.x)
    maxpool_nhwc_thread<T, N, KW, SW, OUTS>(x, y, d, i);
}

template <typename T, int N, int KW, int SW, int OUTS>
void launch(const void* x, void* y, const MaxPoolDims& d, cudaStream_t s) {
  maxpool_nhwc<T, N, KW, SW, OUTS><<<kern::grid_for(d.threads, kThreads), kThreads, 0, s>>>(
      static_cast<const T*>(x), static_cast<T*>(y), d);
}

// The general loop at `bytes` per access.
template <typename T>
void launch_general(int bytes, const void* x, void* y, const MaxPoolDims& d, cudaStream_t s) {
  constexpr int es = sizeof(T);
  if (bytes == 16) launch<T, 16 / es, 0, 0, 1>(x, y, d, s);
  else if (bytes == 8) launch<T, 8 / es, 0, 0, 1>(x, y, d, s);
  else if (bytes == 4 && es <= 4) launch<T, 4 / es, 0, 0, 1>(x, y, d, s);
  else launch<T, 1, 0, 0, 1>(x, y, d, s);
}

template <typename T>
void dispatch(const void* x, void* y, const MaxPoolDims& d, const MaxPoolNhwcPlan& p, cudaStream_t s) {
  constexpr int n16 = 16 / static_cast<int>(sizeof(T));
  switch (p.cols) {
    case MaxPoolCols::kK3S2: launch<T, n16, 3, 2, 4>(x, y, d, s); return;
    case MaxPoolCols::kK2S2: launch<T, n16, 2, 2, 4>(x, y, d, s); return;
    case MaxPoolCols::kK3S1: launch<T, n16, 3, 1, 4>(x, y, d, s); return;
    case MaxPoolCols::kGeneral: launch_general<T>(p.vec_bytes, x, y, d, s); return;
  }
}

}  // namespace

Status launch_maxpool_nhwc(DType dt, const void* x, void* y, const MaxPoolNhwcArgs& a, const MaxPoolNhwcPlan& p,
                           cudaStream_t s) {
  if (p.threads == 0) return Status::Ok();
  auto i = [](int64_t v) { return static_cast<int>(v); };
  const MaxPoolDims d{i(a.h),  i(a.w),  i(a.c),  i(a.oh), i(a.ow), i(a.kh),   i(a.kw),   i(a.sh),
                      i(a.sw), i(a.ph), i(a.pw), i(a.dh), i(a.dw), p.vecs, p.groups, p.threads};
  switch (dt) {
    case DType::F32: dispatch<float>(x, y, d, p, s); break;
    case DType::F16: dispatch<__half>(x, y, d, p, s); break;
    case DType::BF16: dispatch<__nv_bfloat16>(x, y, d, p, s); break;
    default: return Status::Unimplemented("channels-last max pool of {}", dtype_name(dt));
  }
  GPUOPT_CHECK_CALL(cudaGetLastError());
  return Status::Ok();
}

}  // namespace gpuopt::cuda
