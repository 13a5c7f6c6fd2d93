// Data movement on the GPU (layout.h). Transpose and the strided copy pick their kernel on the
// host (layout_plan.h): 32-bit index math by magic-number division wherever the sizes allow,
// since 64-bit `%` and `/` per axis per element cost more than moving the bytes.
#include "ops/tensor/cuda/layout.h"
#include "ops/tensor/cuda/layout_plan.h"
#include "backends/cuda/kernels/by_size.cuh"
#include "backends/cuda/kernels/kernel_common.cuh"
#include "core/cuda_check.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <type_traits>

namespace gpuopt::cuda {
namespace {

constexpr int kThreads = 256;
unsigned grid_for(int64_t n) { return kern::grid_for(n, kThreads); }

// Calls f with a value of the word type that moves `w` bytes (16, 8, 4, 2, else 1) per access.
template <typename F>
void by_chunk_width(int w, F&& f) {
  switch (w) {
    case 16: f(uint4{}); break;
    case 8: f(uint2{}); break;
    case 4: f(uint32_t{}); break;
    case 2: f(uint16_t{}); break;
    default: f(uint8_t{}); break;
  }
}

template <typename E>
__global__ void strided_copy_kernel(const E* __restrict__ in, E* __restrict__ out, StridedDesc d) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < d.numel; i += int64_t(gridDim.x) * blockDim.x) {
    int64_t rem = i, off = d.in_offset;
    for (int k = d.rank - 1; k >= 0; --k) {
      const int64_t c = rem % d.out_dims[k];
      rem /= d.out_dims[k];
      off += c * d.in_strides[k];
    }
    out[i] = in[off];
  }
}

template <typename E>
__global__ void strided_copy32_kernel(const E* __restrict__ in, E* __restrict__ out, Strided32 g) {
  for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < g.n; i += gridDim.x * blockDim.x)
    out[i] = in[strided32_offset(g, i)];
}

// Transpose that keeps the last axis: chunks of W bytes (layout_plan.h's RowsArgs).
template <typename W>
__global__ void transpose_rows_kernel(const W* __restrict__ in, W* __restrict__ out, RowsArgs g) {
  for (uint32_t j = blockIdx.x * blockDim.x + threadIdx.x; j < g.chunks; j += gridDim.x * blockDim.x)
    out[j] = in[rows_source(g, j)];
}

// Transpose that moves the last axis (TileArgs): a 32x32 tile is read along n and written
// along m, both coalesced; the +1 column of padding keeps the column reads free of bank
// conflicts.
template <typename E>
__global__ void transpose_tiled_kernel(const E* __restrict__ in, E* __restrict__ out, TileArgs g) {
  __shared__ E tile[kTile][kTile + 1];
  for (uint32_t b = blockIdx.z; b < g.batch; b += gridDim.z) {
    uint32_t ib, ob;
    tile_batch_offsets(g, b, &ib, &ob);
    for (uint32_t ty = blockIdx.y; ty < g.tiles_m; ty += gridDim.y)
      for (uint32_t tx = blockIdx.x; tx < g.tiles_n; tx += gridDim.x) {
        const uint32_t m0 = ty * kTile, n0 = tx * kTile;
#pragma unroll
        for (int k = 0; k < kTile / kTileRows; ++k) {
          const uint32_t r = threadIdx.y + k * kTileRows, m = m0 + r, n = n0 + threadIdx.x;
          if (m < g.m && n < g.n) tile[r][threadIdx.x] = in[ib + m * g.in_row_stride + n];
        }
        __syncthreads();
#pragma unroll
        for (int k = 0; k < kTile / kTileRows; ++k) {
          const uint32_t r = threadIdx.y + k * kTileRows, n = n0 + r, m = m0 + threadIdx.x;
          if (n < g.n && m < g.m) out[ob + n * g.out_col_stride + m] = tile[threadIdx.x][r];
        }
        __syncthreads();
      }
  }
}

// kInterleave, one run of R = 16 / sizeof(E) positions per thread: M 16-byte loads (one per row,
// adjacent threads reading adjacent runs), the M * R elements regrouped in registers, M 16-byte
// stores of the contiguous output run.
template <typename E, int M>
__global__ void interleave_vec_kernel(const E* __restrict__ in, E* __restrict__ out, SmallSideArgs g) {
  constexpr int R = 16 / sizeof(E);
  struct alignas(16) Run {
    E v[R];
  };
  const uint32_t runs = g.n / R, total = g.batch * runs;
  for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += gridDim.x * blockDim.x) {
    const uint32_t b = i / runs, j0 = (i - b * runs) * R;
    const size_t plane = static_cast<size_t>(b) * M * g.n;
    Run rows[M];
#pragma unroll
    for (int r = 0; r < M; ++r) rows[r] = *reinterpret_cast<const Run*>(in + plane + static_cast<size_t>(r) * g.n + j0);
    Run* o = reinterpret_cast<Run*>(out + plane + static_cast<size_t>(j0) * M);
#pragma unroll
    for (int q = 0; q < M; ++q) {
      Run w;
#pragma unroll
      for (int e = 0; e < R; ++e) {
        const int k = q * R + e;  // output element k of the run: position k / M, row k % M
        w.v[e] = rows[k % M].v[k / M];
      }
      o[q] = w;
    }
  }
}

// kInterleave without the alignment or run length: one position per thread, M elements.
template <typename E, int M>
__global__ void interleave_kernel(const E* __restrict__ in, E* __restrict__ out, SmallSideArgs g) {
  const uint32_t total = g.batch * g.n;
  for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += gridDim.x * blockDim.x) {
    const uint32_t b = i / g.n, j = i - b * g.n;
    const size_t plane = static_cast<size_t>(b) * M * g.n;
#pragma unroll
    for (int r = 0; r < M; ++r) out[static_cast<size_t>(i) * M + r] = in[plane + static_cast<size_t>(r) * g.n + j];
  }
}

struct Where3 {
  int rank;
  int64_t numel;
  int64_t dims[kMaxRank];
  int64_t sc[kMaxRank], sa[kMaxRank], sb[kMaxRank];
};

template <typename E>
__global__ void where_kernel(const bool* __restrict__ c, const E* __restrict__ a, const E* __restrict__ b,
                             E* __restrict__ y, Where3 d) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < d.numel; i += int64_t(gridDim.x) * blockDim.x) {
    int64_t rem = i, oc = 0, oa = 0, ob = 0;
    for (int k = d.rank - 1; k >= 0; --k) {
      const int64_t x = rem % d.dims[k];
      rem /= d.dims[k];
      oc += x * d.sc[k];
      oa += x * d.sa[k];
      ob += x * d.sb[k];
    }
    y[i] = c[oc] ? a[oa] : b[ob];
  }
}

template <typename E>
__global__ void where32_kernel(const bool* __restrict__ c, const E* __restrict__ a, const E* __restrict__ b,
                               E* __restrict__ y, Where32 g) {
  for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < g.n; i += gridDim.x * blockDim.x) {
    uint32_t oc, oa, ob;
    where32_offsets(g, i, &oc, &oa, &ob);
    y[i] = c[oc] ? a[oa] : b[ob];
  }
}

// Gather in chunks of W bytes of the inner block (an embedding row of 768 f16 moves as 96
// 16-byte chunks), 32-bit index math.
template <typename W, typename I>
__global__ void gather32_kernel(const W* __restrict__ data, const I* __restrict__ idx, W* __restrict__ out, int* bad,
                                Gather32 g) {
  for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < g.total; i += gridDim.x * blockDim.x) {
    uint32_t o, j, c;
    gather32_split(g, i, &o, &j, &c);
    int64_t k = static_cast<int64_t>(idx[j]);
    if (k < 0) k += g.axis_dim;
    if (k < 0 || k >= g.axis_dim) {
      out[i] = W{};
      if (bad) *bad = 1;
      continue;
    }
    out[i] = data[(o * g.axis_dim + static_cast<uint32_t>(k)) * g.inner.divisor + c];
  }
}

template <typename E, typename I>
__global__ void gather_kernel(const E* __restrict__ data, int64_t outer, int64_t axis_dim, int64_t inner,
                              const I* __restrict__ idx, int64_t nidx, E* __restrict__ out, int* bad) {
  const int64_t total = outer * nidx * inner;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t in_i = i % inner;
    const int64_t j = (i / inner) % nidx;
    const int64_t o = i / (inner * nidx);
    int64_t k = static_cast<int64_t>(idx[j]);
    if (k < 0) k += axis_dim;
    if (k < 0 || k >= axis_dim) {
      out[i] = E{};
      if (bad) *bad = 1;
      continue;
    }
    out[i] = data[(o * axis_dim + k) * inner + in_i];
  }
}

// I: the index type (32-bit where numel allows: 64-bit division per axis per element costs more
// than the bytes moved).
template <typename E, typename I>
__global__ void pad_index_kernel(const E* __restrict__ in, E* __restrict__ out, PadDesc d, E fill) {
  const I n_total = static_cast<I>(d.numel);
  for (I i = blockIdx.x * I(blockDim.x) + threadIdx.x; i < n_total; i += I(gridDim.x) * blockDim.x) {
    I rem = i;
    int64_t src = 0;
    bool outside = false;
    for (int k = d.rank - 1; k >= 0; --k) {
      const I od = static_cast<I>(d.out_dims[k]);
      const I c = rem % od;
      rem /= od;
      const int64_t n = d.in_dims[k];
      int64_t j = static_cast<int64_t>(c) - d.begin[k];
      if (j < 0 || j >= n) {
        if (d.mode == PadMode::kConstant) {
          outside = true;
          break;
        } else if (d.mode == PadMode::kEdge) {
          j = j < 0 ? 0 : n - 1;
        } else if (d.mode == PadMode::kWrap) {
          j = ((j % n) + n) % n;
        } else {
          const int64_t p = 2 * (n - 1);
          j = p == 0 ? 0 : ((j % p) + p) % p;
          if (j >= n) j = p - j;
        }
      }
      src += j * d.in_strides[k];
    }
    out[i] = outside ? fill : in[src];
  }
}

// Strides of `s` broadcast to `out` (0 along broadcast axes).
void broadcast_strides(const Shape& s, const Shape& out, int64_t* strides) {
  const int r = static_cast<int>(out.size());
  int64_t st = 1;
  for (int k = r - 1; k >= 0; --k) {
    const int ks = k - (r - static_cast<int>(s.size()));
    const int64_t d = ks >= 0 ? s[ks] : 1;
    strides[k] = d == 1 ? 0 : st;
    st *= d;
  }
}

}  // namespace

Status launch_strided_copy(size_t es, const void* in, void* out, const StridedDesc& d, cudaStream_t s) {
  if (d.numel == 0) return Status::Ok();
  const StridedDesc c = collapse_strided(d);
  const bool fits = strided_fits_32(c);
  const Strided32 g = fits ? make_strided32(c) : Strided32{};
  GPUOPT_RETURN_IF_ERROR(by_size(es, [&](auto tag) {
    using E = decltype(tag);
    if (fits)
      strided_copy32_kernel<E><<<grid_for(c.numel), kThreads, 0, s>>>(static_cast<const E*>(in), static_cast<E*>(out), g);
    else
      strided_copy_kernel<E><<<grid_for(d.numel), kThreads, 0, s>>>(static_cast<const E*>(in), static_cast<E*>(out), d);
  }));
  GPUOPT_CHECK_CALL(cudaGetLastError());
  return Status::Ok();
}

namespace {

Status launch_rows(size_t es, const void* in, void* out, const TransposePlan& p, cudaStream_t s) {
  const int w = row_chunk_bytes(es, p.dims[p.rank - 1], in, out);
  const RowsArgs g = make_rows(p, es, w);
  auto go = [&](auto tag) {
    using W = decltype(tag);
    transpose_rows_kernel<W><<<grid_for(g.chunks), kThreads, 0, s>>>(static_cast<const W*>(in), static_cast<W*>(out), g);
  };
  by_chunk_width(w, go);
  return Status::Ok();
}

Status launch_tiled(size_t es, const void* in, void* out, const TransposePlan& p, cudaStream_t s) {
  const TileArgs g = make_tiles(p);
  const dim3 grid(g.tiles_n, std::min<uint32_t>(g.tiles_m, 65535), std::min<uint32_t>(g.batch, 65535));
  const dim3 block(kTile, kTileRows);
  return by_size(es, [&](auto tag) {
    using E = decltype(tag);
    transpose_tiled_kernel<E><<<grid, block, 0, s>>>(static_cast<const E*>(in), static_cast<E*>(out), g);
  });
}

// Calls f(std::integral_constant<int, M>) for m in 2..kInterleaveMax.
template <typename F>
void by_rows(uint32_t m, F&& f) {
  switch (m) {
    case 2: f(std::integral_constant<int, 2>{}); break;
    case 3: f(std::integral_constant<int, 3>{}); break;
    case 4: f(std::integral_constant<int, 4>{}); break;
    case 5: f(std::integral_constant<int, 5>{}); break;
    case 6: f(std::integral_constant<int, 6>{}); break;
    case 7: f(std::integral_constant<int, 7>{}); break;
    default: f(std::integral_constant<int, 8>{}); break;
  }
}

Status launch_interleave(size_t es, const void* in, void* out, const TransposePlan& p, cudaStream_t s) {
  int align = 16;
  while (align > 1 && ((reinterpret_cast<uintptr_t>(in) | reinterpret_cast<uintptr_t>(out)) % align) != 0) align /= 2;
  const SmallSideArgs g = make_small_side(p, es, align);
  return by_size(es, [&](auto tag) {
    using E = decltype(tag);
    by_rows(g.m, [&](auto rows) {
      constexpr int M = decltype(rows)::value;
      if (g.vec) {
        const int64_t runs = static_cast<int64_t>(g.batch) * (g.n / (16 / sizeof(E)));
        interleave_vec_kernel<E, M><<<grid_for(runs), kThreads, 0, s>>>(static_cast<const E*>(in), static_cast<E*>(out), g);
      } else {
        interleave_kernel<E, M><<<grid_for(static_cast<int64_t>(g.batch) * g.n), kThreads, 0, s>>>(
            static_cast<const E*>(in), static_cast<E*>(out), g);
      }
    });
  });
}

}  // namespace

Status launch_transpose(size_t es, const void* in, void* out, const Shape& in_shape, const std::vector<int64_t>& perm,
                        cudaStream_t s, bool interleave) {
  if (es != 1 && es != 2 && es != 4 && es != 8) return Status::Unimplemented("CUDA transpose of {}-byte elements", es);
  TransposePlan p = plan_transpose(in_shape, perm);
  if (p.numel == 0) return Status::Ok();
  if (p.kind == TransposeKind::kInterleave && !interleave) p.kind = TransposeKind::kGeneral;
  switch (p.kind) {
    case TransposeKind::kCopy:
      GPUOPT_CHECK_CALL(cudaMemcpyAsync(out, in, static_cast<size_t>(p.numel) * es, cudaMemcpyDeviceToDevice, s));
      return Status::Ok();
    case TransposeKind::kRows: GPUOPT_RETURN_IF_ERROR(launch_rows(es, in, out, p, s)); break;
    case TransposeKind::kTiled: GPUOPT_RETURN_IF_ERROR(launch_tiled(es, in, out, p, s)); break;
    case TransposeKind::kInterleave: GPUOPT_RETURN_IF_ERROR(launch_interleave(es, in, out, p, s)); break;
    case TransposeKind::kGeneral: {
      return launch_strided_copy(es, in, out, transpose_as_strided(p), s);
    }
  }
  GPUOPT_CHECK_CALL(cudaGetLastError());
  return Status::Ok();
}

Status launch_pad_index(const void* in, void* out, const PadDesc& d, cudaStream_t s) {
  if (d.numel == 0) return Status::Ok();
  const size_t w = d.elem_size;
  if (w != 1 && w != 2 && w != 4 && w != 8 && w != 16) return Status::Unimplemented("CUDA Pad of {}-byte elements", w);
  const bool narrow = d.numel < (int64_t{1} << 31);
  by_chunk_width(static_cast<int>(w), [&](auto tag) {
    using E = decltype(tag);
    E fill;
    memcpy(&fill, d.fill, sizeof(E));
    if (narrow)
      pad_index_kernel<E, uint32_t><<<grid_for(d.numel), kThreads, 0, s>>>(static_cast<const E*>(in), static_cast<E*>(out), d, fill);
    else
      pad_index_kernel<E, int64_t><<<grid_for(d.numel), kThreads, 0, s>>>(static_cast<const E*>(in), static_cast<E*>(out), d, fill);
  });
  GPUOPT_CHECK_CALL(cudaGetLastError());
  return Status::Ok();
}

Status launch_where(size_t es, const bool* cond, const Shape& cs, const void* a, const Shape& as, const void* b,
                    const Shape& bs, void* y, const Shape& out, cudaStream_t s) {
  const int rank = static_cast<int>(out.size());
  if (rank > kMaxRank) return Status::Unimplemented("Where of rank {} exceeds {}", rank, kMaxRank);
  const int64_t numel = shape_numel(out);
  if (numel == 0) return Status::Ok();
  if (numel <= kMax32) {
    const Where32 g = make_where32(out, cs, as, bs);
    GPUOPT_RETURN_IF_ERROR(by_size(es, [&](auto tag) {
      using E = decltype(tag);
      where32_kernel<E><<<grid_for(numel), kThreads, 0, s>>>(cond, static_cast<const E*>(a), static_cast<const E*>(b),
                                                             static_cast<E*>(y), g);
    }));
    GPUOPT_CHECK_CALL(cudaGetLastError());
    return Status::Ok();
  }
  Where3 d{};
  d.rank = rank;
  d.numel = numel;
  for (int k = 0; k < d.rank; ++k) d.dims[k] = out[k];
  broadcast_strides(cs, out, d.sc);
  broadcast_strides(as, out, d.sa);
  broadcast_strides(bs, out, d.sb);
  GPUOPT_RETURN_IF_ERROR(by_size(es, [&](auto tag) {
    using E = decltype(tag);
    where_kernel<E><<<grid_for(d.numel), kThreads, 0, s>>>(cond, static_cast<const E*>(a), static_cast<const E*>(b),
                                                           static_cast<E*>(y), d);
  }));
  GPUOPT_CHECK_CALL(cudaGetLastError());
  return Status::Ok();
}

Status launch_gather(size_t es, const void* data, int64_t outer, int64_t axis_dim, int64_t inner, const void* indices,
                     bool i64, int64_t nidx, void* out, int* bad, cudaStream_t s) {
  const int64_t total = outer * nidx * inner;
  if (total == 0) return Status::Ok();
  if (total <= kMax32 && outer * axis_dim * inner <= kMax32 && (es == 1 || es == 2 || es == 4 || es == 8)) {
    const int w = row_chunk_bytes(es, inner, data, out);
    const int64_t per = w / static_cast<int64_t>(es);  // elements per chunk
    Gather32 g;
    g.total = static_cast<uint32_t>(total / per);
    g.inner = FastDivmod(static_cast<uint32_t>(inner / per));
    g.nidx = FastDivmod(static_cast<uint32_t>(nidx));
    g.axis_dim = static_cast<uint32_t>(axis_dim);
    auto go = [&](auto tag) {
      using W = decltype(tag);
      if (i64)
        gather32_kernel<W, int64_t><<<grid_for(g.total), kThreads, 0, s>>>(
            static_cast<const W*>(data), static_cast<const int64_t*>(indices), static_cast<W*>(out), bad, g);
      else
        gather32_kernel<W, int32_t><<<grid_for(g.total), kThreads, 0, s>>>(
            static_cast<const W*>(data), static_cast<const int32_t*>(indices), static_cast<W*>(out), bad, g);
    };
    by_chunk_width(w, go);
    GPUOPT_CHECK_CALL(cudaGetLastError());
    return Status::Ok();
  }
  GPUOPT_RETURN_IF_ERROR(by_size(es, [&](auto tag) {
    using E = decltype(tag);
    if (i64)
      gather_kernel<E, int64_t><<<grid_for(total), kThreads, 0, s>>>(static_cast<const E*>(data), outer, axis_dim, inner,
                                                                     static_cast<const int64_t*>(indices), nidx,
                                                                     static_cast<E*>(out), bad);
    else
      gather_kernel<E, int32_t><<<grid_for(total), kThreads, 0, s>>>(static_cast<const E*>(data), outer, axis_dim, inner,
                                                                     static_cast<const int32_t*>(indices), nidx,
                                                                     static_cast<E*>(out), bad);
  }));
  GPUOPT_CHECK_CALL(cudaGetLastError());
  return Status::Ok();
}

}  // namespace gpuopt::cuda
