// Weight-only quantized products (W4A16, W8A16) in GPTQ's layout, and FP8 (W8A8) helpers.
// Decode (T <= 16) without act-order: gemv_quant_mma.cu (f16, tensor cores), else
// gemv_quant_wide.cu. With act-order (or where neither applies): each CTA owns 32 output columns, one per lane, and its 8 warps stride over the
// packed rows of K; a lane reads one int32 word (8 or 4 weights of its column), dequantizes it in
// registers ((q - zero) * scale, the group's scale and zero loaded once per word unless act-order
// makes the group change within it) and accumulates x · w in f32; the warps' partial sums are
// reduced in shared memory in a fixed order (deterministic). Words of one packed row are adjacent
// along N, so a warp's loads are one 128-byte line.
#include <cuda_fp8.h>

#include <string>

#include "core/env.h"
#include "core/log.h"
#include "llm/kernels/common.cuh"
#include "llm/kernels/gemv_quant_mma.h"
#include "llm/kernels/gemv_quant_wide.h"
#include "llm/kernels/llm_kernels.h"

namespace gpuopt::llm::cuda {
namespace {

using detail::to_f;

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kCols = 32;

template <class E, int kT, int kBits>
__global__ void __launch_bounds__(kThreads)
    gemv_q_kernel(const E* __restrict__ x, const uint32_t* __restrict__ qw, const uint32_t* __restrict__ qz,
                  const E* __restrict__ scales, const int32_t* __restrict__ g_idx, const E* __restrict__ bias,
                  E* __restrict__ y, int N, int K, int group_size, bool zero_minus_one) {
  constexpr int kPack = 32 / kBits;
  constexpr uint32_t kMask = (1u << kBits) - 1;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int n = blockIdx.x * kCols + lane;
  const int nn = n < N ? n : N - 1;  // lanes past N compute column N-1 again, never written
  const int zshift = kBits * (nn % kPack);
  const int64_t zcols = N / kPack;
  float acc[kT];
#pragma unroll
  for (int t = 0; t < kT; ++t) acc[t] = 0.0f;
  auto zero_of = [&](int g) {
    int z = static_cast<int>((__ldg(qz + static_cast<int64_t>(g) * zcols + nn / kPack) >> zshift) & kMask);
    return zero_minus_one ? ((z + 1) & static_cast<int>(kMask)) : z;
  };
  const int rows = K / kPack;
  // Unrolled so that several words' loads are in flight per thread (a decode step is a stream of
  // weights; one outstanding 4-byte load per thread would not cover the memory latency).
#pragma unroll 4
  for (int r = warp; r < rows; r += kWarps) {
    const uint32_t word = __ldg(qw + static_cast<int64_t>(r) * N + nn);
    const int k0 = r * kPack;
    if (!g_idx) {
      // group_size is a multiple of 8 >= kPack: one group per word.
      const int g = k0 / group_size;
      const float s = to_f(scales[static_cast<int64_t>(g) * N + nn]);
      const float z = static_cast<float>(zero_of(g));
#pragma unroll
      for (int j = 0; j < kPack; ++j) {
        const float w = (static_cast<float>((word >> (kBits * j)) & kMask) - z) * s;
#pragma unroll
        for (int t = 0; t < kT; ++t) acc[t] = fmaf(to_f(x[static_cast<int64_t>(t) * K + k0 + j]), w, acc[t]);
      }
    } else {
#pragma unroll
      for (int j = 0; j < kPack; ++j) {
        const int g = __ldg(g_idx + k0 + j);
        const float s = to_f(scales[static_cast<int64_t>(g) * N + nn]);
        const float w = (static_cast<float>((word >> (kBits * j)) & kMask) - static_cast<float>(zero_of(g))) * s;
#pragma unroll
        for (int t = 0; t < kT; ++t) acc[t] = fmaf(to_f(x[static_cast<int64_t>(t) * K + k0 + j]), w, acc[t]);
      }
    }
  }
  __shared__ float part[kWarps][kT][kCols];
#pragma unroll
  for (int t = 0; t < kT; ++t) part[warp][t][lane] = acc[t];
  __syncthreads();
  for (int i = threadIdx.x; i < kT * kCols; i += kThreads) {
    const int t = i / kCols, c = i % kCols, col = blockIdx.x * kCols + c;
    if (col >= N) continue;
    float s = 0.0f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) s += part[w][t][c];
    if (bias) s += to_f(bias[col]);
    y[static_cast<int64_t>(t) * N + col] = detail::from_f<E>(s);
  }
}

template <class E, int kT>
void launch_t(const void* x, const QuantWeightArgs& w, const void* bias, void* y, int N, int K, cudaStream_t s) {
  const unsigned grid = static_cast<unsigned>((N + kCols - 1) / kCols);
  const auto* qw = static_cast<const uint32_t*>(static_cast<const void*>(w.qweight));
  const auto* qz = static_cast<const uint32_t*>(static_cast<const void*>(w.qzeros));
  const int gs = static_cast<int>(w.group_size);
  if (w.bits == 4)
    gemv_q_kernel<E, kT, 4><<<grid, kThreads, 0, s>>>(static_cast<const E*>(x), qw, qz, static_cast<const E*>(w.scales),
                                                      w.g_idx, static_cast<const E*>(bias), static_cast<E*>(y), N, K,
                                                      gs, w.zero_minus_one);
  else
    gemv_q_kernel<E, kT, 8><<<grid, kThreads, 0, s>>>(static_cast<const E*>(x), qw, qz, static_cast<const E*>(w.scales),
                                                      w.g_idx, static_cast<const E*>(bias), static_cast<E*>(y), N, K,
                                                      gs, w.zero_minus_one);
}

// T = kT, or the next instantiation up to kQuantGemvMaxTokens.
template <class E, int kT = 1>
void dispatch(int64_t T, const void* x, const QuantWeightArgs& w, const void* bias, void* y, int N, int K,
              cudaStream_t s) {
  if constexpr (kT < kQuantGemvMaxTokens) {
    if (T > kT) return dispatch<E, kT + 1>(T, x, w, bias, y, N, K, s);
  }
  launch_t<E, kT>(x, w, bias, y, N, K, s);
}

// One thread per packed word (r, n); consecutive threads take consecutive r of one column n, so
// their 16 (int4) or 8 (int8) bytes of output are adjacent: the writes, four (int4) or two (int8)
// times the bytes of the reads, are the coalesced side.
template <class E, int kBits>
__global__ void dequant_kernel(const uint32_t* __restrict__ qw, const uint32_t* __restrict__ qz,
                               const E* __restrict__ scales, const int32_t* __restrict__ g_idx, E* __restrict__ out,
                               int N, int K, int group_size, bool zero_minus_one) {
  constexpr int kPack = 32 / kBits;
  constexpr uint32_t kMask = (1u << kBits) - 1;
  const int64_t words = static_cast<int64_t>(K / kPack) * N;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < words;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int rows = K / kPack;
    const int n = static_cast<int>(i / rows), r = static_cast<int>(i % rows);
    const uint32_t word = qw[static_cast<int64_t>(r) * N + n];
#pragma unroll
    for (int j = 0; j < kPack; ++j) {
      const int k = r * kPack + j;
      const int g = g_idx ? g_idx[k] : k / group_size;
      int z = static_cast<int>((qz[static_cast<int64_t>(g) * (N / kPack) + n / kPack] >> (kBits * (n % kPack))) & kMask);
      if (zero_minus_one) z = (z + 1) & static_cast<int>(kMask);
      const float w = to_f(scales[static_cast<int64_t>(g) * N + n]) *
                      static_cast<float>(static_cast<int>((word >> (kBits * j)) & kMask) - z);
      out[static_cast<int64_t>(n) * K + k] = detail::from_f<E>(w);
    }
  }
}

// --- FP8 ---

template <class E>
__global__ void fp8_rows_kernel(const E* __restrict__ x, int K, const float* __restrict__ static_scale,
                                __nv_fp8_e4m3* __restrict__ xq, float* __restrict__ row_scale) {
  __shared__ float scratch[32];
  const int64_t row = blockIdx.x;
  const E* xr = x + row * K;
  float s;
  if (static_scale) {
    s = *static_scale;
  } else {
    float m = 0.0f;
    for (int k = threadIdx.x; k < K; k += blockDim.x) m = fmaxf(m, fabsf(to_f(xr[k])));
    m = detail::warp_max(m);
    __syncthreads();
    if ((threadIdx.x & 31) == 0) scratch[threadIdx.x >> 5] = m;
    __syncthreads();
    m = (threadIdx.x & 31) < (blockDim.x >> 5) ? scratch[threadIdx.x & 31] : 0.0f;
    m = detail::warp_max(m);
    s = fmaxf(m, 1e-12f) / 448.0f;
  }
  if (threadIdx.x == 0) row_scale[row] = s;
  const float inv = 1.0f / s;
  for (int k = threadIdx.x; k < K; k += blockDim.x) xq[row * K + k] = __nv_fp8_e4m3(to_f(xr[k]) * inv);
}

template <class E, class A>
__global__ void fp8_out_kernel(const A* __restrict__ acc, const float* __restrict__ row_scale,
                               const float* __restrict__ w_scale, bool per_channel, const E* __restrict__ bias,
                               E* __restrict__ y, int64_t T, int N) {
  const int64_t total = T * N;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t t = i / N;
    const int n = static_cast<int>(i % N);
    float v = to_f(acc[i]) * row_scale[t] * w_scale[per_channel ? n : 0];
    if (bias) v += to_f(bias[n]);
    y[i] = detail::from_f<E>(v);
  }
}

bool half_type(DType dt) {
  return dt == DType::F16 || dt == DType::BF16;
}

}  // namespace

bool gemv_quant_supported(const QuantWeightArgs& w, int64_t T, int64_t N, int64_t K, DType dt) {
  const int64_t pack = w.bits == 4 ? 8 : 4;
  return half_type(dt) && (w.bits == 4 || w.bits == 8) && T >= 1 && T <= kQuantGemvMaxTokens && N >= 1 &&
         N % pack == 0 && N < (int64_t{1} << 31) && K >= pack && K % pack == 0 && K < (int64_t{1} << 31) &&
         w.qweight && w.qzeros && w.scales && (w.g_idx || (w.group_size >= 8 && w.group_size % 8 == 0 &&
                                                          K % w.group_size == 0));
}

QuantGemvKernel quant_gemv_default_kernel() {
  static const QuantGemvKernel k = [] {
    const std::string v = env_get("GPUOPT_LLM_QUANT_GEMV").value_or("mma");
    if (v == "wide") return QuantGemvKernel::Wide;
    if (v == "column") return QuantGemvKernel::Column;
    if (v != "mma") GPUOPT_LOG(warn, "GPUOPT_LLM_QUANT_GEMV='{}': expected mma, wide or column; using mma", v);
    return QuantGemvKernel::Mma;
  }();
  return k;
}

bool gemv_quant_mma_runs(const QuantWeightArgs& w, int64_t T, int64_t N, int64_t K, DType dt,
                         const GemvSplitScratch* split) {
  return gemv_quant_supported(w, T, N, K, dt) && gemv_quant_mma_applies(w, T, N, K, dt, split);
}

QuantGemvKernel gemv_quant(const void* x, const QuantWeightArgs& w, const void* bias, void* y, int64_t T, int64_t N,
                           int64_t K, DType dt, cudaStream_t stream, const GemvSplitScratch* split,
                           QuantGemvKernel kernel) {
  if (!gemv_quant_supported(w, T, N, K, dt))
    detail::contract_violation("gemv_quant: unsupported shape, dtype or layout");
  if (kernel == QuantGemvKernel::Auto) kernel = quant_gemv_default_kernel();
  if (kernel == QuantGemvKernel::Mma && gemv_quant_mma(x, w, bias, y, T, N, K, dt, split, stream))
    return QuantGemvKernel::Mma;
  if (kernel != QuantGemvKernel::Column && gemv_quant_wide(x, w, bias, y, T, N, K, dt, split, stream))
    return QuantGemvKernel::Wide;
  if (dt == DType::F16)
    dispatch<__half>(T, x, w, bias, y, static_cast<int>(N), static_cast<int>(K), stream);
  else
    dispatch<__nv_bfloat16>(T, x, w, bias, y, static_cast<int>(N), static_cast<int>(K), stream);
  return QuantGemvKernel::Column;
}

void dequantize_weight(const QuantWeightArgs& w, void* out, int64_t N, int64_t K, DType dt, cudaStream_t stream) {
  if (!gemv_quant_supported(w, 1, N, K, dt)) detail::contract_violation("dequantize_weight: unsupported layout");
  const auto* qw = static_cast<const uint32_t*>(static_cast<const void*>(w.qweight));
  const auto* qz = static_cast<const uint32_t*>(static_cast<const void*>(w.qzeros));
  const int n = static_cast<int>(N), k = static_cast<int>(K), gs = static_cast<int>(w.group_size);
  const unsigned grid = detail::grid_1d(K / (w.bits == 4 ? 8 : 4) * N, 256);
  auto go = [&](auto e) {
    using E = decltype(e);
    if constexpr (!std::is_same_v<E, float>) {
      if (w.bits == 4)
        dequant_kernel<E, 4><<<grid, 256, 0, stream>>>(qw, qz, static_cast<const E*>(w.scales), w.g_idx,
                                                        static_cast<E*>(out), n, k, gs, w.zero_minus_one);
      else
        dequant_kernel<E, 8><<<grid, 256, 0, stream>>>(qw, qz, static_cast<const E*>(w.scales), w.g_idx,
                                                        static_cast<E*>(out), n, k, gs, w.zero_minus_one);
    }
  };
  detail::dispatch_float(dt, go);
}

void fp8_quantize_rows(const void* x, int64_t T, int64_t K, DType dt, const float* static_scale, void* xq,
                       float* row_scale, cudaStream_t stream) {
  if (!half_type(dt) || T < 1 || K < 1) detail::contract_violation("fp8_quantize_rows: f16/bf16 rows only");
  auto go = [&](auto e) {
    using E = decltype(e);
    if constexpr (!std::is_same_v<E, float>)
      fp8_rows_kernel<E><<<static_cast<unsigned>(T), 256, 0, stream>>>(
          static_cast<const E*>(x), static_cast<int>(K), static_scale, static_cast<__nv_fp8_e4m3*>(xq), row_scale);
  };
  detail::dispatch_float(dt, go);
}

void fp8_scale_output(const void* acc, DType acc_dt, const float* row_scale, const float* w_scale, bool per_channel,
                      const void* bias, void* y, int64_t T, int64_t N, DType dt, cudaStream_t stream) {
  if (!half_type(dt) || (acc_dt != DType::F32 && acc_dt != DType::BF16))
    detail::contract_violation("fp8_scale_output: f32/bf16 products, f16/bf16 output only");
  const unsigned grid = detail::grid_1d(T * N, 256);
  auto go = [&](auto e) {
    using E = decltype(e);
    if constexpr (!std::is_same_v<E, float>) {
      if (acc_dt == DType::F32)
        fp8_out_kernel<E, float><<<grid, 256, 0, stream>>>(static_cast<const float*>(acc), row_scale, w_scale,
                                                           per_channel, static_cast<const E*>(bias), static_cast<E*>(y),
                                                           T, static_cast<int>(N));
      else
        fp8_out_kernel<E, __nv_bfloat16><<<grid, 256, 0, stream>>>(static_cast<const __nv_bfloat16*>(acc), row_scale,
                                                                   w_scale, per_channel, static_cast<const E*>(bias),
                                                                   static_cast<E*>(y), T, static_cast<int>(N));
    }
  };
  detail::dispatch_float(dt, go);
}

}  // namespace gpuopt::llm::cuda
