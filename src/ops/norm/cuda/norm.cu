#include "ops/norm/cuda/norm.h"
#include "ops/norm/cuda/row_common.cuh"
#include "backends/cuda/kernels/kernel_common.cuh"
#include "backends/cuda/kernels/float_convert.cuh"
#include "core/cuda_check.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cfloat>
#include <type_traits>

namespace gpuopt::cuda {
namespace {

using kern::ld;
using kern::st;

using namespace rowk;

// inner == 1: one block per row.
template <typename T>
__global__ void softmax_rows(const T* __restrict__ x, T* __restrict__ y, int64_t cols, bool log) {
  const int64_t row = blockIdx.x;
  const T* xr = x + row * cols;
  T* yr = y + row * cols;
  float m = -FLT_MAX;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) m = fmaxf(m, ld(xr, j));
  m = block_max(m);
  float s = 0.f;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) s += __expf(ld(xr, j) - m);
  s = block_sum(s);
  const float ls = __logf(s), inv = 1.f / s;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
    const float v = ld(xr, j) - m;
    st(yr, j, log ? v - ls : __expf(v) * inv);
  }
}

template <typename T, int N>
__global__ void softmax_warp(const T* __restrict__ x, T* __restrict__ y, int64_t rows, int cols, bool log) {
  const int64_t row = blockIdx.x * int64_t(kRowsPerBlock) + (threadIdx.x >> 5);
  if (row >= rows) return;
  const int lane = threadIdx.x & 31;
  const T* xr = x + row * cols;
  T* yr = y + row * cols;
  float v[N];
  float m = -FLT_MAX;
#pragma unroll
  for (int k = 0; k < N; ++k) {
    const int j = lane + 32 * k;
    v[k] = j < cols ? ld(xr, j) : -FLT_MAX;
    m = fmaxf(m, v[k]);
  }
  m = warp_max(m);
  float s = 0.f;
#pragma unroll
  for (int k = 0; k < N; ++k)
    if (lane + 32 * k < cols) s += __expf(v[k] - m);
  s = warp_sum(s);
  const float ls = __logf(s), inv = 1.f / s;
#pragma unroll
  for (int k = 0; k < N; ++k) {
    const int j = lane + 32 * k;
    if (j < cols) st(yr, j, log ? (v[k] - m) - ls : __expf(v[k] - m) * inv);
  }
}

// inner > 1: one thread per (outer, inner) column, walking the axis.
template <typename T>
__global__ void softmax_strided(const T* __restrict__ x, T* __restrict__ y, int64_t outer, int64_t axis, int64_t inner,
                                bool log) {
  const int64_t total = outer * inner;
  for (int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; t < total; t += int64_t(gridDim.x) * blockDim.x) {
    const int64_t o = t / inner, i = t % inner;
    const int64_t base = o * axis * inner + i;
    float m = -FLT_MAX;
    for (int64_t a = 0; a < axis; ++a) m = fmaxf(m, ld(x, base + a * inner));
    float s = 0.f;
    for (int64_t a = 0; a < axis; ++a) s += __expf(ld(x, base + a * inner) - m);
    const float ls = __logf(s), inv = 1.f / s;
    for (int64_t a = 0; a < axis; ++a) {
      const float v = ld(x, base + a * inner) - m;
      st(y, base + a * inner, log ? v - ls : __expf(v) * inv);
    }
  }
}

__device__ __forceinline__ float reduce_init(ReduceOp op) {
  switch (op) {
    case ReduceOp::kMax: return -INFINITY;
    case ReduceOp::kMin: return INFINITY;
    case ReduceOp::kProd: return 1.f;
    default: return 0.f;
  }
}
__device__ __forceinline__ float reduce_step(ReduceOp op, float acc, float v) {
  switch (op) {
    case ReduceOp::kMax: return fmaxf(acc, v);
    case ReduceOp::kMin: return fminf(acc, v);
    case ReduceOp::kProd: return acc * v;
    case ReduceOp::kSumSquare:
    case ReduceOp::kL2: return acc + v * v;
    case ReduceOp::kL1: return acc + fabsf(v);
    case ReduceOp::kLogSumExp: return acc + __expf(v);
    default: return acc + v;
  }
}
__device__ __forceinline__ float reduce_final(ReduceOp op, float acc, int64_t count) {
  switch (op) {
    case ReduceOp::kMean: return acc / static_cast<float>(count);
    case ReduceOp::kL2: return sqrtf(acc);
    case ReduceOp::kLogSumExp: return __logf(acc);
    default: return acc;
  }
}

struct ReduceDesc {
  int kept_rank, red_rank;
  int64_t kept_dims[kMaxRank], kept_strides[kMaxRank];
  int64_t red_dims[kMaxRank], red_strides[kMaxRank];
  int64_t out_numel, red_count;
};

// One thread per output element, walking every reduced index (any axes set).
template <typename T>
__global__ void reduce_general(ReduceOp op, const T* __restrict__ x, T* __restrict__ y, ReduceDesc d) {
  for (int64_t o = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; o < d.out_numel; o += int64_t(gridDim.x) * blockDim.x) {
    int64_t rem = o, base = 0;
    for (int k = d.kept_rank - 1; k >= 0; --k) {
      base += (rem % d.kept_dims[k]) * d.kept_strides[k];
      rem /= d.kept_dims[k];
    }
    float acc = reduce_init(op);
    for (int64_t r = 0; r < d.red_count; ++r) {
      int64_t rr = r, off = base;
      for (int k = d.red_rank - 1; k >= 0; --k) {
        off += (rr % d.red_dims[k]) * d.red_strides[k];
        rr /= d.red_dims[k];
      }
      acc = reduce_step(op, acc, ld(x, off));
    }
    st(y, o, reduce_final(op, acc, d.red_count));
  }
}

// Reduced axes are the trailing ones: one block per output row.
template <typename T>
__global__ void reduce_rows(ReduceOp op, const T* __restrict__ x, T* __restrict__ y, int64_t cols) {
  const T* xr = x + blockIdx.x * cols;
  float acc = reduce_init(op);
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) acc = reduce_step(op, acc, ld(xr, j));
  if (op == ReduceOp::kMax) acc = block_max(acc);
  else if (op == ReduceOp::kMin) acc = -block_max(-acc);
  else if (op == ReduceOp::kProd) {
    __shared__ float sh[kBlock];
    sh[threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.x == 0) {
      for (unsigned i = 1; i < blockDim.x; ++i) acc *= sh[i];
      sh[0] = acc;
    }
    __syncthreads();
    acc = sh[0];
  } else acc = block_sum(acc);
  if (threadIdx.x == 0) st(y, blockIdx.x, reduce_final(op, acc, cols));
}

// Reduced axes form one run in the middle: [outer, mid, inner] with mid reduced (NHWC spatial
// means: [N, H*W, C]). A block takes 32 adjacent inner elements of one outer index (coalesced
// loads across the warp) and 32 rows of warps split mid; shared memory combines the 32 partials.
// One thread per output (reduce_general) ran N*C threads over H*W values each: 1024 threads for
// EfficientNet's first squeeze-excitation mean at batch 32, 0.86 ms.
template <typename T>
__global__ void __launch_bounds__(1024) reduce_mid(ReduceOp op, const T* __restrict__ x, T* __restrict__ y, int64_t mid,
                                                   int64_t inner) {
  __shared__ float part[32][33];
  const int64_t i = static_cast<int64_t>(blockIdx.x) * 32 + threadIdx.x;
  const int64_t o = blockIdx.y;
  float acc = reduce_init(op);
  if (i < inner)
    for (int64_t m = threadIdx.y; m < mid; m += 32) acc = reduce_step(op, acc, ld(x, (o * mid + m) * inner + i));
  part[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y == 0 && i < inner) {
    float a = part[0][threadIdx.x];
    for (int k = 1; k < 32; ++k) {
      const float v = part[k][threadIdx.x];
      a = op == ReduceOp::kMax ? fmaxf(a, v) : op == ReduceOp::kMin ? fminf(a, v) : op == ReduceOp::kProd ? a * v : a + v;
    }
    st(y, o * inner + i, reduce_final(op, a, mid));
  }
}

// [outer, mid, inner] as reduce_mid, inner a whole number of N-element vectors (16 bytes): a
// block takes 32 adjacent vectors of one outer index (threadIdx.x: a warp reads 512 contiguous
// bytes per step) and 8 slices of mid (threadIdx.y); shared memory combines the 8 partials.
// reduce_mid ran ResNet-50's 7x7 mean at batch 256 ([256, 49, 2048] f16, 51 MB) in 126 us on the
// H200 (0.4 TB/s): 1024 threads per 32 outputs, each loading 2 bytes once or twice.
constexpr int kMidSlices = 8;
template <typename T, int N>
__global__ void __launch_bounds__(32 * kMidSlices) reduce_mid_vec(ReduceOp op, const T* __restrict__ x,
                                                                   T* __restrict__ y, int64_t mid, int64_t inner) {
  struct alignas(sizeof(T) * N) Vec {
    T v[N];
  };
  __shared__ float part[kMidSlices][32][N + 1];  // +1: a warp's stores fall in distinct banks
  const int64_t c = (static_cast<int64_t>(blockIdx.x) * 32 + threadIdx.x) * N;  // first element of the vector
  const int64_t o = blockIdx.y;
  float acc[N];
#pragma unroll
  for (int e = 0; e < N; ++e) acc[e] = reduce_init(op);
  if (c < inner) {
    const T* xp = x + o * mid * inner + c;
#pragma unroll 4
    for (int64_t m = threadIdx.y; m < mid; m += kMidSlices) {
      const Vec v = *reinterpret_cast<const Vec*>(xp + m * inner);
#pragma unroll
      for (int e = 0; e < N; ++e) acc[e] = reduce_step(op, acc[e], kern::to_f(v.v[e]));
    }
  }
#pragma unroll
  for (int e = 0; e < N; ++e) part[threadIdx.y][threadIdx.x][e] = acc[e];
  __syncthreads();
  if (threadIdx.y != 0 || c >= inner) return;
  Vec out;
#pragma unroll
  for (int e = 0; e < N; ++e) {
    float a = part[0][threadIdx.x][e];
    for (int k = 1; k < kMidSlices; ++k) {
      const float v = part[k][threadIdx.x][e];
      a = op == ReduceOp::kMax ? fmaxf(a, v) : op == ReduceOp::kMin ? fminf(a, v) : op == ReduceOp::kProd ? a * v : a + v;
    }
    out.v[e] = kern::from_f<T>(reduce_final(op, a, mid));
  }
  *reinterpret_cast<Vec*>(y + o * inner + c) = out;
}

template <typename T>
__global__ void channel_affine(const T* __restrict__ x, const float* __restrict__ scale, const float* __restrict__ shift,
                               T* __restrict__ y, int64_t total, int64_t c, int64_t spatial) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t ch = (i / spatial) % c;
    st(y, i, ld(x, i) * scale[ch] + shift[ch]);
  }
}

template <typename T>
__global__ void pool2d(const T* __restrict__ x, T* __restrict__ y, Pool2d p) {
  const int64_t total = p.n * p.c * p.oh * p.ow;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    // Channels-last: the channel is the fastest index, so a warp reads adjacent channels of one
    // pixel (coalesced), and pixels are p.c elements apart.
    const int64_t pix = p.nhwc ? i / p.c : i;
    const int64_t ox = pix % p.ow, oy = (pix / p.ow) % p.oh, img = pix / (p.ow * p.oh);
    const int64_t step = p.nhwc ? p.c : 1;
    const T* xp = p.nhwc ? x + img * p.h * p.w * p.c + i % p.c : x + img * p.h * p.w;
    float acc = p.max ? -INFINITY : 0.f;
    int64_t count = 0;
    const int64_t y0 = oy * p.sh - p.ph, x0 = ox * p.sw - p.pw;
    for (int64_t ky = 0; ky < p.kh; ++ky) {
      const int64_t iy = y0 + ky * p.dh;
      for (int64_t kx = 0; kx < p.kw; ++kx) {
        const int64_t ix = x0 + kx * p.dw;
        if (iy < 0 || iy >= p.h || ix < 0 || ix >= p.w) {
          // Padding counts for the average only when asked, and only inside the padded extent.
          if (!p.max && p.count_include_pad && iy < p.h + p.ph && ix < p.w + p.pw) ++count;
          continue;
        }
        const float v = ld(xp, (iy * p.w + ix) * step);
        acc = p.max ? fmaxf(acc, v) : acc + v;
        ++count;
      }
    }
    st(y, i, p.max ? acc : acc / static_cast<float>(count > 0 ? count : 1));
  }
}

unsigned grid_for(int64_t n) { return kern::grid_for(n, kBlock); }

// reduce_mid_vec: whole 16-byte vectors of inner, both pointers aligned, one block row per outer
// index (grid.y), and a mid worth splitting into slices.
template <typename T>
bool mid_vec_applies(const void* x, const void* y, int64_t outer, int64_t mid, int64_t inner) {
  constexpr int64_t n = 16 / sizeof(T);
  const bool aligned = (reinterpret_cast<uintptr_t>(x) | reinterpret_cast<uintptr_t>(y)) % 16 == 0;
  return aligned && inner % n == 0 && mid >= kMidSlices && outer <= 65535;
}
}  // namespace

Status launch_softmax(DType dt, const void* x, void* y, int64_t outer, int64_t axis, int64_t inner, bool log,
                      cudaStream_t s) {
  if (outer * axis * inner == 0) return Status::Ok();
  GPUOPT_RETURN_IF_ERROR(by_float(dt, [&](auto tag) {
    using T = decltype(tag);
    const bool warp = inner == 1 && outer < (int64_t{1} << 31) * kRowsPerBlock && by_row_width(axis, [&](auto n) {
      softmax_warp<T, decltype(n)::value><<<warp_row_blocks(outer), 32 * kRowsPerBlock, 0, s>>>(
          static_cast<const T*>(x), static_cast<T*>(y), outer, static_cast<int>(axis), log);
    });
    if (warp) return;
    if (inner == 1) softmax_rows<T><<<static_cast<unsigned>(outer), kBlock, 0, s>>>(static_cast<const T*>(x), static_cast<T*>(y), axis, log);
    else softmax_strided<T><<<grid_for(outer * inner), kBlock, 0, s>>>(static_cast<const T*>(x), static_cast<T*>(y), outer, axis, inner, log);
  }));
  GPUOPT_CHECK_CALL(cudaGetLastError());
  return Status::Ok();
}

Status launch_reduce(ReduceOp op, DType dt, const void* x, void* y, const Shape& in, const std::vector<bool>& reduced,
                     cudaStream_t s) {
  const int r = static_cast<int>(in.size());
  if (r > kMaxRank) return Status::Unimplemented("reduction of rank {} exceeds {}", r, kMaxRank);
  ReduceDesc d{};
  const auto strides = shape_strides(in);
  d.red_count = 1;
  d.out_numel = 1;
  bool trailing = true;  // reduced axes form a suffix
  bool seen_reduced = false;
  // One run of reduced axes (size-1 axes ignored) splits the tensor into [outer, mid, inner].
  int64_t outer = 1, inner = 1;
  int runs = 0;
  bool in_run = false;
  for (int k = 0; k < r; ++k) {
    if (in[k] == 1) continue;
    if (reduced[k] && !in_run) ++runs;
    in_run = reduced[k];
    if (!reduced[k]) (runs == 0 ? outer : inner) *= in[k];
  }
  for (int k = 0; k < r; ++k) {
    if (reduced[k]) {
      d.red_dims[d.red_rank] = in[k];
      d.red_strides[d.red_rank++] = strides[k];
      d.red_count *= in[k];
      seen_reduced = true;
    } else {
      if (seen_reduced && in[k] != 1) trailing = false;
      d.kept_dims[d.kept_rank] = in[k];
      d.kept_strides[d.kept_rank++] = strides[k];
      d.out_numel *= in[k];
    }
  }
  if (d.out_numel == 0) return Status::Ok();
  GPUOPT_RETURN_IF_ERROR(by_float(dt, [&](auto tag) {
    using T = decltype(tag);
    if (trailing && d.red_count >= 32)
      reduce_rows<T><<<static_cast<unsigned>(d.out_numel), kBlock, 0, s>>>(op, static_cast<const T*>(x), static_cast<T*>(y), d.red_count);
    else if (runs == 1 && mid_vec_applies<T>(x, y, outer, d.red_count, inner))  // ResNet's 7x7 mean: 49
      reduce_mid_vec<T, 16 / sizeof(T)>
          <<<dim3(static_cast<unsigned>((inner / (16 / sizeof(T)) + 31) / 32), static_cast<unsigned>(outer)),
             dim3(32, kMidSlices), 0, s>>>(op, static_cast<const T*>(x), static_cast<T*>(y), d.red_count, inner);
    else if (runs == 1 && inner >= 8 && d.red_count >= 16 && outer <= 65535)  // ResNet's 7x7 means: 49
      reduce_mid<T><<<dim3(static_cast<unsigned>((inner + 31) / 32), static_cast<unsigned>(outer)), dim3(32, 32), 0, s>>>(
          op, static_cast<const T*>(x), static_cast<T*>(y), d.red_count, inner);
    else
      reduce_general<T><<<grid_for(d.out_numel), kBlock, 0, s>>>(op, static_cast<const T*>(x), static_cast<T*>(y), d);
  }));
  GPUOPT_CHECK_CALL(cudaGetLastError());
  return Status::Ok();
}

Status launch_channel_affine(DType dt, const void* x, const float* scale, const float* shift, void* y, int64_t n,
                             int64_t c, int64_t spatial, cudaStream_t s) {
  const int64_t total = n * c * spatial;
  if (total == 0) return Status::Ok();
  GPUOPT_RETURN_IF_ERROR(by_float(dt, [&](auto tag) {
    using T = decltype(tag);
    channel_affine<T><<<grid_for(total), kBlock, 0, s>>>(static_cast<const T*>(x), scale, shift, static_cast<T*>(y), total, c, spatial);
  }));
  GPUOPT_CHECK_CALL(cudaGetLastError());
  return Status::Ok();
}

Status launch_pool2d(DType dt, const void* x, void* y, const Pool2d& p, cudaStream_t s) {
  const int64_t total = p.n * p.c * p.oh * p.ow;
  if (total == 0) return Status::Ok();
  GPUOPT_RETURN_IF_ERROR(by_float(dt, [&](auto tag) {
    using T = decltype(tag);
    pool2d<T><<<grid_for(total), kBlock, 0, s>>>(static_cast<const T*>(x), static_cast<T*>(y), p);
  }));
  GPUOPT_CHECK_CALL(cudaGetLastError());
  return Status::Ok();
}

}  // namespace gpuopt::cuda
