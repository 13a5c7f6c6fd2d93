// Integer matrix products (see qmatmul.h). One thread per output element walking K: A's row is
// shared by a warp (broadcast reads), B's columns are read coalesced. Correctness first; these
// ops are rare on the hot path.
#include "ops/quant/cuda/qmatmul.h"
#include "backends/cuda/kernels/kernel_common.cuh"
#include "ops/quant/cuda/quant_math.h"
#include "core/cuda_check.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

namespace gpuopt::cuda {
namespace {

constexpr int kThreads = 256;
unsigned grid_for(int64_t n) { return kern::grid_for(n, kThreads); }

__device__ __forceinline__ int64_t ld8(const void* p, bool sgn, int64_t i) {
  return sgn ? static_cast<int64_t>(static_cast<const int8_t*>(p)[i]) : static_cast<int64_t>(static_cast<const uint8_t*>(p)[i]);
}

__device__ __forceinline__ double ldf(const void* p, DType t, int64_t i) {
  if (t == DType::F16) return __half2float(static_cast<const __half*>(p)[i]);
  if (t == DType::BF16) return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
  return static_cast<const float*>(p)[i];
}
__global__ void int_matmul_kernel(IntMatMulDesc d, const void* __restrict__ a, const void* __restrict__ b,
                                  const void* __restrict__ a_zp, const void* __restrict__ b_zp, Requant rq,
                                  bool requant, void* __restrict__ y) {
  const int64_t total = d.batches * d.M * d.N;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t n = i % d.N, m = (i / d.N) % d.M, bt = i / (d.M * d.N);
    int64_t rem = bt, ao = 0, bo = 0;
    for (int k = d.batch_rank - 1; k >= 0; --k) {
      const int64_t c = rem % d.batch_dims[k];
      rem /= d.batch_dims[k];
      ao += c * d.a_batch_strides[k];
      bo += c * d.b_batch_strides[k];
    }
    const int64_t a_base = ao * d.M * d.K + m * d.K, b_base = bo * d.K * d.N + n;
    const int64_t za = d.a_zp_count == 0 ? 0 : ld8(a_zp, d.a_signed, d.a_zp_count == 1 ? 0 : m);
    const int64_t zb = d.b_zp_count == 0 ? 0 : ld8(b_zp, d.b_signed, d.b_zp_count == 1 ? 0 : n);
    int64_t acc = 0;
    for (int64_t k = 0; k < d.K; ++k)
      acc += (ld8(a, d.a_signed, a_base + k) - za) * (ld8(b, d.b_signed, b_base + k * d.N) - zb);
    if (!requant) {
      static_cast<int32_t*>(y)[i] = static_cast<int32_t>(static_cast<uint32_t>(acc));  // low 32 bits
      continue;
    }
    const double as = ldf(rq.a_scale, rq.scale_dt, rq.a_scale_count == 1 ? 0 : m);
    const double bs = ldf(rq.b_scale, rq.b_scale_dt, rq.b_scale_count == 1 ? 0 : n);
    const QFloat t = rq.scale_dt == DType::F16 ? QFloat::kF16 : rq.scale_dt == DType::BF16 ? QFloat::kBF16 : QFloat::kF32;
    const double v = requantize(acc, as, bs, t, rq.y_scale, rq.y_zero_point, rq.y_signed ? -128.0 : 0.0,
                                rq.y_signed ? 127.0 : 255.0);
    if (rq.y_signed) static_cast<int8_t*>(y)[i] = static_cast<int8_t>(v);
    else static_cast<uint8_t*>(y)[i] = static_cast<uint8_t>(v);
  }
}

}  // namespace

Status launch_int_matmul(const IntMatMulDesc& d, const void* a, const void* b, const void* a_zp, const void* b_zp,
                         const Requant* requant, void* y, cudaStream_t s) {
  const int64_t total = d.batches * d.M * d.N;
  if (total == 0) return Status::Ok();
  int_matmul_kernel<<<grid_for(total), kThreads, 0, s>>>(d, a, b, a_zp, b_zp, requant ? *requant : Requant{},
                                                          requant != nullptr, y);
  GPUOPT_CHECK_CALL(cudaGetLastError());
  return Status::Ok();
}

}  // namespace gpuopt::cuda
