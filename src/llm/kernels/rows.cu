// Row-wise kernels: embedding lookup, row gather, RMSNorm (+ residual add) and SiLU * up.
#include "llm/kernels/common.cuh"
#include "llm/kernels/llm_kernels.h"

namespace gpuopt::llm::cuda {
namespace {
using namespace detail;

// dst row r = src row idx[r]; rows of `bytes` bytes copied in W-byte words (W divides bytes and
// both bases' alignment). Element-type agnostic: embedding and gather are the same copy.
template <class W>
__global__ void copy_rows_kernel(const char* __restrict__ src, const int32_t* __restrict__ idx, char* __restrict__ dst,
                                 int64_t n, int64_t bytes) {
  const int64_t words = bytes / static_cast<int64_t>(sizeof(W));
  for (int64_t r = blockIdx.x; r < n; r += gridDim.x) {
    const W* s = reinterpret_cast<const W*>(src + static_cast<int64_t>(idx[r]) * bytes);
    W* d = reinterpret_cast<W*>(dst + r * bytes);
    for (int64_t i = threadIdx.x; i < words; i += blockDim.x) d[i] = s[i];
  }
}

void copy_rows(const void* src, const int32_t* idx, void* dst, int64_t n, int64_t bytes, cudaStream_t stream) {
  if (n <= 0 || bytes <= 0) return;
  const uintptr_t a =
      reinterpret_cast<uintptr_t>(src) | reinterpret_cast<uintptr_t>(dst) | static_cast<uintptr_t>(bytes);
  const unsigned grid = static_cast<unsigned>(n < 65535 ? n : 65535);
  const auto* s = static_cast<const char*>(src);
  auto* d = static_cast<char*>(dst);
  if ((a & 15) == 0)
    copy_rows_kernel<uint4><<<grid, 128, 0, stream>>>(s, idx, d, n, bytes);
  else if ((a & 3) == 0)
    copy_rows_kernel<uint32_t><<<grid, 128, 0, stream>>>(s, idx, d, n, bytes);
  else
    copy_rows_kernel<uint16_t><<<grid, 128, 0, stream>>>(s, idx, d, n, bytes);
}

// One block per row. V: elements per access (Vec<T>::kN for 16-byte accesses, else 1).
// With residual: residual = round(x + residual) and the norm is taken of that rounded value, as
// Hugging Face does in the model's dtype. Sum of squares in f32.
template <class T, int V>
__global__ void rms_norm_kernel(const T* __restrict__ x, T* __restrict__ residual, const T* __restrict__ w,
                                T* __restrict__ out, int64_t dim, float eps) {
  __shared__ float scratch[32];
  const int64_t row = blockIdx.x;
  const T* xr = x + row * dim;
  T* rr = residual ? residual + row * dim : nullptr;
  T* orow = out + row * dim;
  const int64_t nv = dim / V;
  float ss = 0.0f;
  for (int64_t i = threadIdx.x; i < nv; i += blockDim.x) {
    float f[V];
    if constexpr (V == 1) {
      f[0] = to_f(xr[i]);
    } else {
      unpack<T>(reinterpret_cast<const uint4*>(xr)[i], f);
    }
    if (rr) {
      float r[V];
      if constexpr (V == 1) {
        r[0] = to_f(rr[i]);
      } else {
        unpack<T>(reinterpret_cast<const uint4*>(rr)[i], r);
      }
#pragma unroll
      for (int k = 0; k < V; ++k) f[k] = to_f(from_f<T>(f[k] + r[k]));
      if constexpr (V == 1) {
        rr[i] = from_f<T>(f[0]);
      } else {
        reinterpret_cast<uint4*>(rr)[i] = pack<T>(f);
      }
    }
#pragma unroll
    for (int k = 0; k < V; ++k) ss += f[k] * f[k];
  }
  ss = block_sum(ss, scratch);
  const float inv = rsqrtf(ss / static_cast<float>(dim) + eps);
  const T* src = rr ? rr : xr;  // this thread's own writes above: visible to it
  for (int64_t i = threadIdx.x; i < nv; i += blockDim.x) {
    float f[V], g[V];
    if constexpr (V == 1) {
      f[0] = to_f(src[i]);
      g[0] = to_f(w[i]);
    } else {
      unpack<T>(reinterpret_cast<const uint4*>(src)[i], f);
      unpack<T>(reinterpret_cast<const uint4*>(w)[i], g);
    }
#pragma unroll
    for (int k = 0; k < V; ++k) f[k] = f[k] * inv * g[k];
    if constexpr (V == 1) {
      orow[i] = from_f<T>(f[0]);
    } else {
      reinterpret_cast<uint4*>(orow)[i] = pack<T>(f);
    }
  }
}

template <class T, int V>
__global__ void silu_mul_kernel(const T* __restrict__ gu, T* __restrict__ out, int64_t T_, int64_t inter) {
  const int64_t per_row = inter / V, total = T_ * per_row;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t t = i / per_row, c = i - t * per_row;
    const T* g = gu + t * 2 * inter;
    const T* u = g + inter;
    float a[V], b[V];
    if constexpr (V == 1) {
      a[0] = to_f(g[c]);
      b[0] = to_f(u[c]);
    } else {
      unpack<T>(reinterpret_cast<const uint4*>(g)[c], a);
      unpack<T>(reinterpret_cast<const uint4*>(u)[c], b);
    }
#pragma unroll
    for (int k = 0; k < V; ++k) a[k] = a[k] / (1.0f + __expf(-a[k])) * b[k];
    if constexpr (V == 1) {
      out[t * inter + c] = from_f<T>(a[0]);
    } else {
      reinterpret_cast<uint4*>(out + t * inter)[c] = pack<T>(a);
    }
  }
}

}  // namespace

void embedding(const int32_t* tokens, const void* table, void* out, int64_t T, int64_t hidden, DType dt,
               cudaStream_t stream) {
  copy_rows(table, tokens, out, T, hidden * static_cast<int64_t>(dtype_size(dt)), stream);
}

void gather_rows(const void* x, const int32_t* rows, void* out, int64_t n, int64_t dim, DType dt, cudaStream_t stream) {
  copy_rows(x, rows, out, n, dim * static_cast<int64_t>(dtype_size(dt)), stream);
}

void rms_norm(const void* x, void* residual, const void* weight, void* out, int64_t rows, int64_t dim, float eps,
              DType dt, cudaStream_t stream) {
  if (rows <= 0 || dim <= 0) return;
  dispatch_float(dt, [&](auto tag) {
    using T = decltype(tag);
    constexpr int kV = Vec<T>::kN;
    const bool vec = dim % kV == 0 && aligned16(x) && aligned16(weight) && aligned16(out) &&
                     (residual == nullptr || aligned16(residual));
    const int64_t nv = vec ? dim / kV : dim;
    const int threads = nv >= 1024 ? 1024 : nv >= 256 ? 256 : 128;  // dim 4096 bf16: 2 per thread
    auto* xs = static_cast<const T*>(x);
    auto* rs = static_cast<T*>(residual);
    auto* ws = static_cast<const T*>(weight);
    auto* os = static_cast<T*>(out);
    if (vec)
      rms_norm_kernel<T, kV><<<static_cast<unsigned>(rows), threads, 0, stream>>>(xs, rs, ws, os, dim, eps);
    else
      rms_norm_kernel<T, 1><<<static_cast<unsigned>(rows), threads, 0, stream>>>(xs, rs, ws, os, dim, eps);
  });
}

void silu_mul(const void* gate_up, void* out, int64_t T, int64_t inter, DType dt, cudaStream_t stream) {
  if (T <= 0 || inter <= 0) return;
  dispatch_float(dt, [&](auto tag) {
    using T_ = decltype(tag);
    constexpr int kV = Vec<T_>::kN;
    auto* g = static_cast<const T_*>(gate_up);
    auto* o = static_cast<T_*>(out);
    if (inter % kV == 0 && aligned16(gate_up) && aligned16(out)) {
      silu_mul_kernel<T_, kV><<<grid_1d(T * inter / kV, 256), 256, 0, stream>>>(g, o, T, inter);
    } else {
      silu_mul_kernel<T_, 1><<<grid_1d(T * inter, 256), 256, 0, stream>>>(g, o, T, inter);
    }
  });
}

}  // namespace gpuopt::llm::cuda
