// launch_attention (attention.h): a block takes 16 query rows of one (batch, head), 4 warps of 4
// rows each; K and V stream through shared memory 64 keys at a time (as f32, K rows padded by
// one so lanes reading different keys hit different banks). Each lane scores keys lane and
// lane + 32 of the tile, the warp keeps the row's running max and sum (online softmax), and each
// lane accumulates the output columns lane, lane + 32, ... in registers. A row whose every key is
// masked gives 0/0 = NaN, as the CPU reference does.
#include "ops/transformer/cuda/attention.h"
#include "ops/transformer/cuda/attention_common.cuh"
#include "core/cuda_check.h"
#include "backends/cuda/kernels/float_convert.cuh"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cmath>

namespace gpuopt::cuda {
namespace {

using kern::from_f;
using kern::to_f;

constexpr int kRows = 16, kWarps = 4, kKeys = 64;

__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

template <typename T, int kVRegs>
__global__ void __launch_bounds__(kWarps * 32) attention_kernel(AttentionArgs a) {
  extern __shared__ float smem[];
  const int D = static_cast<int>(a.head), Dv = static_cast<int>(a.v_head);
  float* qs = smem;                       // [kRows][D], pre-scaled
  float* ks = qs + kRows * D;             // [kKeys][D + 1]
  float* vs = ks + kKeys * (D + 1);       // [kKeys][Dv]
  const int64_t b = blockIdx.z, h = blockIdx.y, q0 = static_cast<int64_t>(blockIdx.x) * kRows;
  const int64_t hk = h / (a.q_heads / a.kv_heads);
  const T* q = static_cast<const T*>(a.q) + b * a.qs.b + h * a.qs.h;
  const T* k = static_cast<const T*>(a.k) + b * a.ks.b + hk * a.ks.h;
  const T* v = static_cast<const T*>(a.v) + b * a.vs.b + hk * a.vs.h;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  for (int i = tid; i < kRows * D; i += blockDim.x) {
    const int64_t r = q0 + i / D;
    qs[i] = r < a.q_seq ? to_f(q[r * a.qs.s + i % D]) * a.scale : 0.f;
  }
  float m[kRows / kWarps], l[kRows / kWarps], acc[kRows / kWarps][kVRegs];
#pragma unroll
  for (int r = 0; r < kRows / kWarps; ++r) {
    m[r] = -INFINITY;
    l[r] = 0.f;
    for (int c = 0; c < kVRegs; ++c) acc[r][c] = 0.f;
  }
  const float ninf = -INFINITY;
  for (int64_t k0 = 0; k0 < a.kv_seq; k0 += kKeys) {
    __syncthreads();  // the previous tile is no longer read (and qs is written, first time)
    for (int i = tid; i < kKeys * D; i += blockDim.x) {
      const int64_t j = k0 + i / D;
      ks[(i / D) * (D + 1) + i % D] = j < a.kv_seq ? to_f(k[j * a.ks.s + i % D]) : 0.f;
    }
    for (int i = tid; i < kKeys * Dv; i += blockDim.x) {
      const int64_t j = k0 + i / Dv;
      vs[i] = j < a.kv_seq ? to_f(v[j * a.vs.s + i % Dv]) : 0.f;
    }
    __syncthreads();
#pragma unroll
    for (int r = 0; r < kRows / kWarps; ++r) {
      const int row = warp + r * kWarps;
      const int64_t qi = q0 + row;
      if (qi >= a.q_seq) break;  // warp-uniform
      float s[2];
#pragma unroll
      for (int t = 0; t < 2; ++t) {
        const int jj = lane + 32 * t;
        const int64_t j = k0 + jj;
        float dot = 0.f;
        const float* qr = qs + row * D;
        const float* kr = ks + jj * (D + 1);
        for (int d = 0; d < D; ++d) dot = fmaf(qr[d], kr[d], dot);
        s[t] = j >= a.kv_seq ? ninf : masked_score<T>(a, b, h, qi, j, dot);
      }
      const float m_new = fmaxf(m[r], warp_max(fmaxf(s[0], s[1])));
      const float corr = m[r] == ninf ? 0.f : __expf(m[r] - m_new);
      float p[2];
      for (int t = 0; t < 2; ++t) p[t] = s[t] == ninf ? 0.f : __expf(s[t] - m_new);
      l[r] = l[r] * corr + warp_sum(p[0] + p[1]);
      m[r] = m_new;
#pragma unroll
      for (int c = 0; c < kVRegs; ++c) acc[r][c] *= corr;
      const int keys = a.kv_seq - k0 < kKeys ? static_cast<int>(a.kv_seq - k0) : kKeys;
#pragma unroll
      for (int t = 0; t < 2; ++t) {
        for (int jj = 32 * t; jj < keys && jj < 32 * (t + 1); ++jj) {
          const float pj = __shfl_sync(0xffffffffu, p[t], jj & 31);
          const float* vr = vs + jj * Dv;
#pragma unroll
          for (int c = 0; c < kVRegs; ++c) {
            const int d = lane + 32 * c;
            if (d < Dv) acc[r][c] = fmaf(pj, vr[d], acc[r][c]);
          }
        }
      }
    }
  }
  T* y = static_cast<T*>(a.y) + b * a.ys.b + h * a.ys.h;
#pragma unroll
  for (int r = 0; r < kRows / kWarps; ++r) {
    const int64_t qi = q0 + warp + r * kWarps;
    if (qi >= a.q_seq) break;
    for (int c = 0; c < kVRegs; ++c) {
      const int d = lane + 32 * c;
      if (d >= Dv) continue;
      const float o = acc[r][c] / l[r];  // l == 0: every key masked, NaN
      y[qi * a.ys.s + d] = from_f<T>(a.nan_to_zero && isnan(o) ? 0.f : o);
    }
  }
}

template <typename T, int kVRegs>
Status launch_typed(const AttentionArgs& a, cudaStream_t stream) {
  const size_t smem = sizeof(float) * (kRows * a.head + kKeys * (a.head + 1) + kKeys * a.v_head);
  return launch_attention_grid(attention_kernel<T, kVRegs>, a, kRows, kWarps * 32, smem, stream);
}

template <typename T>
Status launch_for(const AttentionArgs& a, cudaStream_t stream) {
  if (a.v_head <= 32) return launch_typed<T, 1>(a, stream);
  if (a.v_head <= 64) return launch_typed<T, 2>(a, stream);
  if (a.v_head <= 128) return launch_typed<T, 4>(a, stream);
  return launch_typed<T, 8>(a, stream);
}

template <typename T>
__global__ void nan_to_zero_kernel(T* y, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    if (isnan(to_f(y[i]))) y[i] = from_f<T>(0.f);
}

// The same over 16-byte vectors (n a multiple of 16 / sizeof(T), y 16-byte aligned).
template <typename T>
__global__ void nan_to_zero_vec(uint4* y, int64_t nvec) {
  constexpr int E = 16 / sizeof(T);
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < nvec; i += int64_t(gridDim.x) * blockDim.x) {
    uint4 v = y[i];
    T* e = reinterpret_cast<T*>(&v);
    bool any = false;
#pragma unroll
    for (int j = 0; j < E; ++j)
      if (isnan(to_f(e[j]))) {
        e[j] = from_f<T>(0.f);
        any = true;
      }
    if (any) y[i] = v;
  }
}

template <typename T>
void launch_nan_to_zero_typed(void* y, int64_t n, cudaStream_t stream) {
  constexpr int64_t E = 16 / sizeof(T);
  if (n % E == 0 && (reinterpret_cast<uintptr_t>(y) & 15) == 0) {
    const int64_t nvec = n / E, blocks = std::min<int64_t>((nvec + 255) / 256, 4096);
    nan_to_zero_vec<T><<<static_cast<unsigned>(blocks), 256, 0, stream>>>(static_cast<uint4*>(y), nvec);
    return;
  }
  const int64_t blocks = std::min<int64_t>((n + 255) / 256, 4096);
  nan_to_zero_kernel<T><<<static_cast<unsigned>(blocks), 256, 0, stream>>>(static_cast<T*>(y), n);
}

}  // namespace

Status launch_nan_to_zero(DType dt, void* y, int64_t n, cudaStream_t stream) {
  if (n <= 0) return Status::Ok();
  switch (dt) {
    case DType::F32: launch_nan_to_zero_typed<float>(y, n, stream); break;
    case DType::F16: launch_nan_to_zero_typed<__half>(y, n, stream); break;
    case DType::BF16: launch_nan_to_zero_typed<__nv_bfloat16>(y, n, stream); break;
    default: return Status::Unimplemented("nan_to_zero in {}", dtype_name(dt));
  }
  GPUOPT_CHECK_CALL(cudaGetLastError());
  return Status::Ok();
}

namespace {

// The current device's compute capability major, which decides the tensor-core kernels.
cudaError_t device_major(int* major) {
  int device = 0;
  const cudaError_t e = cudaGetDevice(&device);
  return e != cudaSuccess ? e : cudaDeviceGetAttribute(major, cudaDevAttrComputeCapabilityMajor, device);
}

}  // namespace

bool attention_fa_preferred(const AttentionArgs& a) {
  if (a.kernel != AttentionKernel::kAuto || a.head != 64 || a.kv_seq > 128) return false;
  int major = 0;
  return device_major(&major) == cudaSuccess && attention_fa_applies(a, major);
}

Status launch_attention(const AttentionArgs& a, cudaStream_t stream) {
  if (a.batch == 0 || a.q_heads == 0 || a.q_seq == 0) return Status::Ok();
  if (a.head > kAttentionMaxHead || a.v_head > kAttentionMaxHead || a.head <= 0 || a.v_head <= 0)
    return Status::Unimplemented("attention head sizes {} / {} (the CUDA kernel takes 1..{})", a.head, a.v_head,
                                 kAttentionMaxHead);
  if (a.q_seq > 65535 * kRows || a.q_heads > 65535 || a.batch > 65535)
    return Status::Unimplemented("attention grid too large: batch {}, heads {}, q_seq {}", a.batch, a.q_heads, a.q_seq);
  int major = 0;
  GPUOPT_CHECK_CALL(device_major(&major));
  const AttentionKernel mode = a.kernel;
  if (mode != AttentionKernel::kWmma && mode != AttentionKernel::kScalar && attention_fa_applies(a, major))
    return launch_attention_fa(a, stream);
  if (mode != AttentionKernel::kScalar && attention_wmma_applies(a, major)) return launch_attention_wmma(a, stream);
  switch (a.dt) {
    case DType::F32: return launch_for<float>(a, stream);
    case DType::F16: return launch_for<__half>(a, stream);
    case DType::BF16: return launch_for<__nv_bfloat16>(a, stream);
    default: return Status::Unimplemented("attention in {}", dtype_name(a.dt));
  }
}

}  // namespace gpuopt::cuda
