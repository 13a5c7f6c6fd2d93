// The tensor-core path of launch_attention (attention.h) for f16/bf16 with head sizes that are
// multiples of 16 up to 128: a block takes 64 query rows of one (batch, head), 16 per warp; K and
// V tiles of 64 keys come into shared memory with 16-byte copies; each warp computes its 16 x 64
// scores with WMMA (f32 accumulation), applies scale, mask and causality and the online softmax
// in f32 (two lanes per row), writes P in the storage type and adds P V into an f32 output tile
// in shared memory, rescaled per row as the running max moves. The scalar kernel in attention.cu
// is the reference it is tested against (backend-ops) and the path for every other shape.
#include "ops/transformer/cuda/attention.h"
#include "ops/transformer/cuda/attention_common.cuh"
#include "core/cuda_check.h"
#include "backends/cuda/kernels/float_convert.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <mma.h>

namespace gpuopt::cuda {
namespace {

using namespace nvcuda;
using kern::from_f;
using kern::to_f;

constexpr int kWarps = 4, kRowsPerWarp = 16, kRows = kWarps * kRowsPerWarp, kKeys = 64;
constexpr int kPadT = 8, kPadF = 4;  // row padding (elements) against bank conflicts; WMMA ldm rules

// rows x cols (cols a multiple of 8) from global (row stride `src_ld`) into shared (row stride
// `ld`), rows past `valid` zero-filled, with 16-byte copies.
template <typename T>
__device__ void load_tile(T* dst, int ld, const T* src, int64_t src_ld, int rows, int cols, int64_t valid) {
  const int vec = cols / 8;
  for (int i = threadIdx.x; i < rows * vec; i += blockDim.x) {
    const int r = i / vec, c = (i % vec) * 8;
    uint4 v = make_uint4(0, 0, 0, 0);
    if (r < valid) v = *reinterpret_cast<const uint4*>(src + static_cast<int64_t>(r) * src_ld + c);
    *reinterpret_cast<uint4*>(dst + r * ld + c) = v;
  }
}

template <typename T>
__global__ void __launch_bounds__(kWarps * 32) attention_wmma_kernel(AttentionArgs a) {
#if __CUDA_ARCH__ >= 800
  extern __shared__ __align__(128) unsigned char smem_raw[];
  const int D = static_cast<int>(a.head), Dv = static_cast<int>(a.v_head);
  const int ldq = D + kPadT, ldv = Dv + kPadT, lds = kKeys + kPadF, ldp = kKeys + kPadT, ldo = Dv + kPadF;
  T* qs = reinterpret_cast<T*>(smem_raw);
  T* ks = qs + kRows * ldq;
  T* vs = ks + kKeys * ldq;
  T* ps_all = vs + kKeys * ldv;
  float* sf_all = reinterpret_cast<float*>(ps_all + kRows * ldp);
  float* of_all = sf_all + kRows * lds;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  T* ps = ps_all + warp * kRowsPerWarp * ldp;
  float* sf = sf_all + warp * kRowsPerWarp * lds;
  float* of = of_all + warp * kRowsPerWarp * ldo;

  const int64_t b = blockIdx.z, h = blockIdx.y, q0 = static_cast<int64_t>(blockIdx.x) * kRows;
  const int64_t hk = h / (a.q_heads / a.kv_heads);
  const T* q = static_cast<const T*>(a.q) + b * a.qs.b + h * a.qs.h + q0 * a.qs.s;
  const T* k = static_cast<const T*>(a.k) + b * a.ks.b + hk * a.ks.h;
  const T* v = static_cast<const T*>(a.v) + b * a.vs.b + hk * a.vs.h;
  load_tile(qs, ldq, q, a.qs.s, kRows, D, a.q_seq - q0);
  for (int i = lane; i < kRowsPerWarp * ldo; i += 32) of[i] = 0.f;

  // Two lanes per row: lane 2r and 2r + 1 hold row r's running max and sum, and each scores and
  // rescales half of the row's keys and output columns.
  const int row = lane >> 1, half = lane & 1;
  const int64_t qi = q0 + warp * kRowsPerWarp + row;
  float m = -INFINITY, l = 0.f;
  for (int64_t k0 = 0; k0 < a.kv_seq; k0 += kKeys) {
    __syncthreads();  // every warp is done with the previous K/V tile
    load_tile(ks, ldq, k + k0 * a.ks.s, a.ks.s, kKeys, D, a.kv_seq - k0);
    load_tile(vs, ldv, v + k0 * a.vs.s, a.vs.s, kKeys, Dv, a.kv_seq - k0);
    __syncthreads();
    // S = Q K^T for this warp's 16 rows and the tile's 64 keys.
    for (int n = 0; n < kKeys / 16; ++n) {
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
      wmma::fill_fragment(acc, 0.f);
      for (int kk = 0; kk < D / 16; ++kk) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> fa;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::col_major> fb;
        wmma::load_matrix_sync(fa, qs + warp * kRowsPerWarp * ldq + kk * 16, ldq);
        wmma::load_matrix_sync(fb, ks + n * 16 * ldq + kk * 16, ldq);
        wmma::mma_sync(acc, fa, fb, acc);
      }
      wmma::store_matrix_sync(sf + n * 16, acc, lds, wmma::mem_row_major);
    }
    __syncwarp();
    // Scale, mask, online softmax; P in the storage type; the output row rescaled.
    float s[kKeys / 2];
    float mx = -INFINITY;
#pragma unroll
    for (int c = 0; c < kKeys / 2; ++c) {
      const int jj = half * (kKeys / 2) + c;
      const int64_t j = k0 + jj;
      const float x = sf[row * lds + jj] * a.scale;
      s[c] = j >= a.kv_seq || qi >= a.q_seq ? -INFINITY : masked_score<T>(a, b, h, qi, j, x);
      mx = fmaxf(mx, s[c]);
    }
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
    const float m_new = fmaxf(m, mx);
    const float corr = m == -INFINITY ? 0.f : __expf(m - m_new);
    float sum = 0.f;
#pragma unroll
    for (int c = 0; c < kKeys / 2; ++c) {
      const float p = s[c] == -INFINITY ? 0.f : __expf(s[c] - m_new);
      const T pt = from_f<T>(p);
      sum += to_f(pt);  // the sum of what P V adds up, not of the unrounded p
      ps[row * ldp + half * (kKeys / 2) + c] = pt;
    }
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    l = l * corr + sum;
    m = m_new;
    for (int c = half; c < Dv; c += 2) of[row * ldo + c] *= corr;
    __syncwarp();
    // O += P V.
    for (int n = 0; n < Dv / 16; ++n) {
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
      wmma::load_matrix_sync(acc, of + n * 16, ldo, wmma::mem_row_major);
      for (int kk = 0; kk < kKeys / 16; ++kk) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> fa;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::row_major> fb;
        wmma::load_matrix_sync(fa, ps + kk * 16, ldp);
        wmma::load_matrix_sync(fb, vs + kk * 16 * ldv + n * 16, ldv);
        wmma::mma_sync(acc, fa, fb, acc);
      }
      wmma::store_matrix_sync(of + n * 16, acc, ldo, wmma::mem_row_major);
    }
    __syncwarp();
  }
  if (qi < a.q_seq) {
    T* y = static_cast<T*>(a.y) + b * a.ys.b + h * a.ys.h + qi * a.ys.s;
    for (int c = half; c < Dv; c += 2) {
      const float o = of[row * ldo + c] / l;  // l == 0: all masked, NaN
      y[c] = from_f<T>(a.nan_to_zero && isnan(o) ? 0.f : o);
    }
  }
#endif
}

template <typename T>
Status launch_typed(const AttentionArgs& a, cudaStream_t stream) {
  const int64_t ldq = a.head + kPadT, ldv = a.v_head + kPadT;
  const size_t smem = sizeof(T) * static_cast<size_t>(kRows * ldq + kKeys * ldq + kKeys * ldv + kRows * (kKeys + kPadT)) +
                      sizeof(float) * static_cast<size_t>(kRows * (kKeys + kPadF) + kRows * (a.v_head + kPadF));
  return launch_attention_grid(attention_wmma_kernel<T>, a, kRows, kWarps * 32, smem, stream);
}

}  // namespace

bool attention_wmma_applies(const AttentionArgs& a, int device_major) {
  return device_major >= 8 && (a.dt == DType::F16 || a.dt == DType::BF16) && a.head % 16 == 0 &&
         a.v_head % 16 == 0 && a.head <= 128 && a.v_head <= 128 && a.q_seq <= 65535 * kRows;
}

Status launch_attention_wmma(const AttentionArgs& a, cudaStream_t stream) {
  return a.dt == DType::F16 ? launch_typed<__half>(a, stream) : launch_typed<__nv_bfloat16>(a, stream);
}

}  // namespace gpuopt::cuda
