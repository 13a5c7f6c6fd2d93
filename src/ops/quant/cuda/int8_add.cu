// Int8Add's kernel (int8_add.h).
#include "ops/quant/cuda/int8_add.h"
#include "backends/cuda/kernels/kernel_common.cuh"
#include "core/cuda_check.h"

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <type_traits>

namespace gpuopt::cuda {
namespace {

__device__ __forceinline__ float ld(const float* p) { return *p; }
__device__ __forceinline__ float ld(const __half* p) { return __half2float(*p); }
__device__ __forceinline__ void store(int8_t* y, int64_t i, float v) {
  y[i] = static_cast<int8_t>(max(-128, min(127, __float2int_rn(v))));
}
__device__ __forceinline__ void store(__half* y, int64_t i, float v) { y[i] = __float2half_rn(v); }
__device__ __forceinline__ void store(float* y, int64_t i, float v) { y[i] = v; }

// Each thread: 8 consecutive elements (one 8-byte load per input where aligned).
template <typename S, typename O>
__global__ void add_kernel(int64_t n, const int8_t* __restrict__ a, const int8_t* __restrict__ b, const S* sa_p,
                           const S* sb_p, const S* sy_p, bool relu, O* __restrict__ y) {
  const float sa = ld(sa_p), sb = ld(sb_p), inv = sy_p ? 1.0f / ld(sy_p) : 1.0f;
  const float ka = sa * inv, kb = sb * inv;  // v / sy = a * (sa / sy) + b * (sb / sy)
  const int64_t groups = (n + 7) / 8;
  for (int64_t g = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; g < groups;
       g += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i0 = g * 8;
    alignas(8) int8_t av[8];
    alignas(8) int8_t bv[8];
    if (i0 + 8 <= n && (reinterpret_cast<uintptr_t>(a + i0) % 8 == 0) && (reinterpret_cast<uintptr_t>(b + i0) % 8 == 0)) {
      *reinterpret_cast<uint2*>(av) = *reinterpret_cast<const uint2*>(a + i0);
      *reinterpret_cast<uint2*>(bv) = *reinterpret_cast<const uint2*>(b + i0);
    } else {
      for (int k = 0; k < 8; ++k) {
        av[k] = i0 + k < n ? a[i0 + k] : 0;
        bv[k] = i0 + k < n ? b[i0 + k] : 0;
      }
    }
    if constexpr (std::is_same_v<O, int8_t>) {
      if (i0 + 8 <= n && reinterpret_cast<uintptr_t>(y + i0) % 8 == 0) {  // one 8-byte store
        alignas(8) int8_t out[8];
        for (int k = 0; k < 8; ++k) {
          float v = static_cast<float>(av[k]) * ka + static_cast<float>(bv[k]) * kb;
          if (relu) v = fmaxf(v, 0.f);
          out[k] = static_cast<int8_t>(max(-128, min(127, __float2int_rn(v))));
        }
        *reinterpret_cast<uint2*>(y + i0) = *reinterpret_cast<const uint2*>(out);
        continue;
      }
    }
    for (int k = 0; k < 8 && i0 + k < n; ++k) {
      float v = static_cast<float>(av[k]) * ka + static_cast<float>(bv[k]) * kb;
      if (relu) v = fmaxf(v, 0.f);
      store(y, i0 + k, v);
    }
  }
}

template <typename S>
Status launch_typed(const Int8AddArgs& a, cudaStream_t s) {
  const unsigned blocks = kern::grid_for((a.n + 7) / 8, 256);
  const S* sa = static_cast<const S*>(a.a_scale);
  const S* sb = static_cast<const S*>(a.b_scale);
  const S* sy = static_cast<const S*>(a.y_scale);
  if (a.out_dt == DType::I8) {
    add_kernel<<<blocks, 256, 0, s>>>(a.n, a.a, a.b, sa, sb, sy, a.relu, static_cast<int8_t*>(a.y));
  } else if (a.out_dt == DType::F16) {
    add_kernel<<<blocks, 256, 0, s>>>(a.n, a.a, a.b, sa, sb, sy, a.relu, static_cast<__half*>(a.y));
  } else if (a.out_dt == DType::F32) {
    add_kernel<<<blocks, 256, 0, s>>>(a.n, a.a, a.b, sa, sb, sy, a.relu, static_cast<float*>(a.y));
  } else {
    return Status::Unimplemented("Int8Add: output dtype {} on the GPU", dtype_name(a.out_dt));
  }
  GPUOPT_CHECK_CALL(cudaGetLastError());
  return Status::Ok();
}

}  // namespace

Status launch_int8_add(const Int8AddArgs& a, cudaStream_t s) {
  if (a.n == 0) return Status::Ok();
  if (a.scale_dt == DType::F32) return launch_typed<float>(a, s);
  if (a.scale_dt == DType::F16) return launch_typed<__half>(a, s);
  return Status::Unimplemented("Int8Add: scales of dtype {} on the GPU", dtype_name(a.scale_dt));
}

}  // namespace gpuopt::cuda
