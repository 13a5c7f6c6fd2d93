// LayerNormalization on the GPU: one warp per row with the row in registers (16-byte accesses
// where the row and pointers allow), or one block per row for rows over 2048 values. The same
// kernels take SkipLayerNormalization's skip input (added as the row is read) and write the sum
// when asked, and its quantized copy of the output when given: e4m3 codes of the stored output /
// its scale (as Fp8Gemm's quantize of it would give), or int8 (as QuantizeLinear's kernel would
// give, quant_math.h, with the scale rounded to the output's type).
#include "ops/norm/cuda/norm.h"
#include "ops/norm/cuda/row_common.cuh"
#include "ops/quant/cuda/quant_math.h"
#include "backends/cuda/kernels/e4m3.cuh"
#include "backends/cuda/kernels/float_convert.cuh"
#include "core/cuda_check.h"

#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

namespace gpuopt::cuda {
namespace {

using kern::ld;
using kern::st;
using namespace rowk;

// o as the output stores it (rounded to T), back in f32.
template <typename T>
__device__ __forceinline__ float stored(float o) {
  T t;
  st(&t, 0, o);
  return ld(&t, 0);
}

template <int E>
struct alignas(E) Codes {
  uint8_t v[E];
};

// One code of the quantized copy: `s` is the scale, already rounded to T for int8.
template <typename T>
__device__ __forceinline__ uint8_t code_of(float stored_value, float s, bool int8) {
  if (!int8) return static_cast<uint8_t>(to_e4m3(stored_value / s));
  constexpr QFloat t = std::is_same_v<T, __half> ? QFloat::kF16 : std::is_same_v<T, __nv_bfloat16> ? QFloat::kBF16 : QFloat::kF32;
  return static_cast<uint8_t>(static_cast<int8_t>(quantize_value_f32(stored_value, s, t, 0.f, -128.f, 127.f)));
}

template <typename T, int N>
__global__ void layernorm_warp(const T* __restrict__ x, const T* __restrict__ skip, const T* __restrict__ scale,
                               const T* __restrict__ bias, T* __restrict__ y, T* __restrict__ sum, int64_t rows, int64_t skip_rows, int cols,
                               float eps, float* mean_out, float* inv_out, bool rms, uint8_t* __restrict__ codes,
                               float codes_scale, bool codes_int8) {
  const int64_t row = blockIdx.x * int64_t(kRowsPerBlock) + (threadIdx.x >> 5);
  if (row >= rows) return;
  const int lane = threadIdx.x & 31;
  const float qs = codes_int8 ? stored<T>(codes_scale) : codes_scale;
  const T* xr = x + row * cols;
  T* yr = y + row * cols;
  float v[N];
  float s = 0.f;
#pragma unroll
  for (int k = 0; k < N; ++k) {
    const int j = lane + 32 * k;
    v[k] = j < cols ? ld(xr, j) + (skip ? ld(skip + (row % skip_rows) * cols, j) : 0.f) : 0.f;
    if (sum && j < cols) st(sum + row * cols, j, v[k]);
    s += v[k];
  }
  const float mean = rms ? 0.f : warp_sum(s) / static_cast<float>(cols);
  float q = 0.f;
#pragma unroll
  for (int k = 0; k < N; ++k)
    if (lane + 32 * k < cols) q += (v[k] - mean) * (v[k] - mean);
  const float inv = rsqrtf(warp_sum(q) / static_cast<float>(cols) + eps);
#pragma unroll
  for (int k = 0; k < N; ++k) {
    const int j = lane + 32 * k;
    if (j >= cols) continue;
    float o = (v[k] - mean) * inv * ld(scale, j);
    if (bias) o += ld(bias, j);
    st(yr, j, o);
    if (codes) codes[row * cols + j] = code_of<T>(stored<T>(o), qs, codes_int8);
  }
  if (lane == 0) {
    if (mean_out) mean_out[row] = mean;
    if (inv_out) inv_out[row] = inv;
  }
}

// The same with 16-byte accesses: a lane holds NV vectors of E = 16 / sizeof(T) values (vector i of
// the row at lane + 32 k), so a warp reads a 768-wide fp16 row in 3 instructions instead of 24.
// For cols a multiple of E with x, y, scale and bias 16-byte aligned (launch_layernorm checks).
template <typename T, int NV>
__global__ void layernorm_vec(const T* __restrict__ x, const T* __restrict__ skip, const T* __restrict__ scale,
                              const T* __restrict__ bias, T* __restrict__ y, T* __restrict__ sum, int64_t rows, int64_t skip_rows, int cols,
                              float eps, float* mean_out, float* inv_out, bool rms, uint8_t* __restrict__ codes,
                              float codes_scale, bool codes_int8) {
  constexpr int E = 16 / sizeof(T);
  const float qs = codes_int8 ? stored<T>(codes_scale) : codes_scale;
  const int64_t row = blockIdx.x * int64_t(kRowsPerBlock) + (threadIdx.x >> 5);
  if (row >= rows) return;
  const int lane = threadIdx.x & 31, nvec = cols / E;
  const uint4* xr = reinterpret_cast<const uint4*>(x + row * cols);
  uint4* yr = reinterpret_cast<uint4*>(y + row * cols);
  float v[NV][E];
  float s = 0.f;
#pragma unroll
  for (int k = 0; k < NV; ++k) {
    const int i = lane + 32 * k;
    uint4 raw = make_uint4(0, 0, 0, 0), sraw = make_uint4(0, 0, 0, 0);
    if (i < nvec) raw = xr[i];
    if (skip && i < nvec) sraw = reinterpret_cast<const uint4*>(skip + (row % skip_rows) * cols)[i];
    const T* e = reinterpret_cast<const T*>(&raw);
    const T* se = reinterpret_cast<const T*>(&sraw);
#pragma unroll
    for (int j = 0; j < E; ++j) {
      v[k][j] = i < nvec ? ld(e, j) + (skip ? ld(se, j) : 0.f) : 0.f;
      s += v[k][j];
    }
    if (sum && i < nvec) {
      uint4 out;
      T* oe = reinterpret_cast<T*>(&out);
#pragma unroll
      for (int j = 0; j < E; ++j) st(oe, j, v[k][j]);
      reinterpret_cast<uint4*>(sum + row * cols)[i] = out;
    }
  }
  const float mean = rms ? 0.f : warp_sum(s) / static_cast<float>(cols);
  float q = 0.f;
#pragma unroll
  for (int k = 0; k < NV; ++k)
    if (lane + 32 * k < nvec)
#pragma unroll
      for (int j = 0; j < E; ++j) q += (v[k][j] - mean) * (v[k][j] - mean);
  const float inv = rsqrtf(warp_sum(q) / static_cast<float>(cols) + eps);
#pragma unroll
  for (int k = 0; k < NV; ++k) {
    const int i = lane + 32 * k;
    if (i >= nvec) continue;
    const uint4 sraw = reinterpret_cast<const uint4*>(scale)[i];
    uint4 braw = make_uint4(0, 0, 0, 0);
    if (bias) braw = reinterpret_cast<const uint4*>(bias)[i];
    const T* se = reinterpret_cast<const T*>(&sraw);
    const T* be = reinterpret_cast<const T*>(&braw);
    uint4 out;
    T* oe = reinterpret_cast<T*>(&out);
#pragma unroll
    for (int j = 0; j < E; ++j) {
      float o = (v[k][j] - mean) * inv * ld(se, j);
      if (bias) o += ld(be, j);
      st(oe, j, o);
    }
    yr[i] = out;
    if (codes) {  // E codes of the stored values: 8 bytes (16-bit types) or 4 (f32)
      Codes<E> c;
#pragma unroll
      for (int j = 0; j < E; ++j) c.v[j] = code_of<T>(ld(oe, j), qs, codes_int8);
      reinterpret_cast<Codes<E>*>(codes + row * cols)[i] = c;
    }
  }
  if (lane == 0) {
    if (mean_out) mean_out[row] = mean;
    if (inv_out) inv_out[row] = inv;
  }
}

// Calls f(std::integral_constant<int, NV>) with the smallest NV in {1, 2, 3, 4, 6, 8} with
// 32 * NV vectors of `per_vec` values covering cols; false when none does.
template <typename F>
bool by_vec_count(int64_t cols, int64_t per_vec, F&& f) {
  const int64_t n = (cols + 32 * per_vec - 1) / (32 * per_vec);
  if (n <= 1) f(std::integral_constant<int, 1>{});
  else if (n == 2) f(std::integral_constant<int, 2>{});
  else if (n == 3) f(std::integral_constant<int, 3>{});
  else if (n == 4) f(std::integral_constant<int, 4>{});
  else if (n <= 6) f(std::integral_constant<int, 6>{});
  else if (n <= 8) f(std::integral_constant<int, 8>{});
  else return false;
  return true;
}

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; }

template <typename T>
__global__ void layernorm_rows(const T* __restrict__ x, const T* __restrict__ skip, const T* __restrict__ scale,
                               const T* __restrict__ bias, T* __restrict__ y, T* __restrict__ sum, int64_t skip_rows,
                               int64_t cols, float eps, float* mean_out, float* inv_out, bool rms,
                               uint8_t* __restrict__ codes, float codes_scale, bool codes_int8) {
  const int64_t row = blockIdx.x;
  const float qs = codes_int8 ? stored<T>(codes_scale) : codes_scale;
  const T* xr = x + row * cols;
  const T* kr = skip ? skip + (row % skip_rows) * cols : nullptr;
  T* yr = y + row * cols;
  // x + skip, recomputed in each pass (in f32, as the warp kernels hold it) rather than re-read
  // rounded to T.
  auto val = [&](int64_t j) { return ld(xr, j) + (kr ? ld(kr, j) : 0.f); };
  float s = 0.f;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) s += val(j);
  const float mean = rms ? 0.f : block_sum(s) / static_cast<float>(cols);
  float v = 0.f;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
    const float d = val(j) - mean;
    v += d * d;
  }
  const float inv = rsqrtf(block_sum(v) / static_cast<float>(cols) + eps);
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
    const float e = val(j);
    if (sum) st(sum + row * cols, j, e);
    float o = (e - mean) * inv * ld(scale, j);
    if (bias) o += ld(bias, j);
    st(yr, j, o);
    if (codes) codes[row * cols + j] = code_of<T>(stored<T>(o), qs, codes_int8);
  }
  if (threadIdx.x == 0) {
    if (mean_out) mean_out[row] = mean;
    if (inv_out) inv_out[row] = inv;
  }
}

}  // namespace

Status launch_layernorm(DType dt, const void* x, const void* scale, const void* bias, void* y, int64_t rows,
                        int64_t cols, float eps, float* mean, float* inv_std, cudaStream_t s) {
  return launch_skip_layernorm(dt, x, nullptr, 1, scale, bias, y, nullptr, rows, cols, eps, mean, inv_std, s);
}

Status launch_rmsnorm(DType dt, const void* x, const void* scale, void* y, int64_t rows, int64_t cols, float eps,
                      float* inv_rms, cudaStream_t s) {
  return launch_skip_layernorm(dt, x, nullptr, 1, scale, nullptr, y, nullptr, rows, cols, eps, nullptr, inv_rms, s,
                               /*rms=*/true);
}

Status launch_skip_layernorm(DType dt, const void* x, const void* skip, int64_t skip_rows, const void* scale,
                             const void* bias, void* y, void* sum, int64_t rows, int64_t cols, float eps, float* mean,
                             float* inv_std, cudaStream_t s, bool rms, uint8_t* q, float q_scale, bool q_int8) {
  if (rows * cols == 0) return Status::Ok();
  if (skip_rows <= 0 || rows % skip_rows != 0)
    return Status::InvalidArgument("skip has {} rows, which do not repeat over the input's {}", skip_rows, rows);
  GPUOPT_RETURN_IF_ERROR(by_float(dt, [&](auto tag) {
    using T = decltype(tag);
    constexpr int64_t E = 16 / sizeof(T);
    const bool fits = rows < (int64_t{1} << 31) * kRowsPerBlock;
    const T* xs = static_cast<const T*>(x);
    const T* ks = static_cast<const T*>(skip);
    const T* sc = static_cast<const T*>(scale);
    const T* bs = static_cast<const T*>(bias);
    T* ys = static_cast<T*>(y);
    T* ss = static_cast<T*>(sum);
    const bool vec = fits && cols % E == 0 && aligned16(x) && aligned16(y) && aligned16(scale) &&
                     (!bias || aligned16(bias)) && (!skip || aligned16(skip)) && (!sum || aligned16(sum)) &&
                     (!q || reinterpret_cast<uintptr_t>(q) % E == 0) &&
                     by_vec_count(cols, E, [&](auto nv) {
                       layernorm_vec<T, decltype(nv)::value><<<warp_row_blocks(rows), 32 * kRowsPerBlock, 0, s>>>(
                           xs, ks, sc, bs, ys, ss, rows, skip_rows, static_cast<int>(cols), eps, mean, inv_std, rms, q, q_scale, q_int8);
                     });
    if (vec) return;
    const bool warp = fits && by_row_width(cols, [&](auto n) {
      layernorm_warp<T, decltype(n)::value><<<warp_row_blocks(rows), 32 * kRowsPerBlock, 0, s>>>(
          xs, ks, sc, bs, ys, ss, rows, skip_rows, static_cast<int>(cols), eps, mean, inv_std, rms, q, q_scale, q_int8);
    });
    if (warp) return;
    layernorm_rows<T><<<static_cast<unsigned>(rows), kBlock, 0, s>>>(xs, ks, sc, bs, ys, ss, skip_rows, cols, eps, mean,
                                                                     inv_std, rms, q, q_scale, q_int8);
  }));
  GPUOPT_CHECK_CALL(cudaGetLastError());
  return Status::Ok();
}

}  // namespace gpuopt::cuda
