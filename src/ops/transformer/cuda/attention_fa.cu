// gpuopt's register-resident flash attention (FlashAttention-2 layout) for f16/bf16 with head
// sizes 64 and 128 (Q, K and V of one size), compute capability 8+: a block takes 64 query rows of
// one (batch, head), 16 per warp; K and V tiles of 64 keys come into shared memory with cp.async,
// double-buffered (the next tile loads while this one is used), in an XOR-swizzled layout that
// ldmatrix reads without bank conflicts. Each warp computes its 16 x 64 scores with mma.sync
// m16n8k16 (f32 accumulation) into registers, applies scale, mask and causality and the online
// softmax there (four lanes per row; log2(e) folded into each exponent's fma), and feeds P to the
// P V product straight from those registers (the accumulator layout of two n-tiles is the A
// operand's), so neither S nor P touches shared memory; one more mma per 16 keys multiplies P by
// a column of ones for the row sums. The output accumulates in registers and
// is written once, divided by the row sum. The WMMA kernel (attention_wmma.cu) and the scalar
// kernel (attention.cu) are the references it is tested against in backend-ops.
#include "ops/transformer/cuda/attention.h"
#include "ops/transformer/cuda/attention_common.cuh"
#include "core/cuda_check.h"
#include "backends/cuda/kernels/float_convert.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

namespace gpuopt::cuda {
namespace {

using kern::from_f;
using kern::to_f;

constexpr int kKeys = 64;
constexpr float kLog2e = 1.4426950408889634f;

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16 bytes from global to shared, zero-filled when !valid (the source is then not read).
__device__ __forceinline__ void cp16(void* dst, const void* src, bool valid) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)), "l"(src),
               "r"(valid ? 16 : 0));
#endif
}
__device__ __forceinline__ void cp_commit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\n" ::);
#endif
}
template <int N>
__device__ __forceinline__ void cp_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
#endif
}

// Element offset of (row, col) in a [rows, D] tile whose 16-byte chunks are XOR-swizzled by the
// row's low three bits: the eight rows an ldmatrix reads at one column land in eight bank groups.
template <int D>
__device__ __forceinline__ int swz(int row, int col) {
  return row * D + ((((col >> 3) ^ (row & 7))) << 3) + (col & 7);
}

// rows x D elements of a (batch, head) from global (row stride `ld` elements) into a swizzled
// tile, rows at or past `valid` zero-filled.
template <typename T, int D>
__device__ __forceinline__ void load_tile(T* dst, const T* src, int64_t ld, int rows, int64_t valid) {
  const int threads = static_cast<int>(blockDim.x);
  constexpr int kChunks = D / 8;
  for (int i = threadIdx.x; i < rows * kChunks; i += threads) {
    const int r = i / kChunks, c = (i % kChunks) * 8;
    const bool ok = r < valid;
    cp16(dst + swz<D>(r, c), ok ? src + r * ld + c : src, ok);
  }
}

__device__ __forceinline__ void ldsm_x4(uint32_t (&r)[4], const void* p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
#endif
}
__device__ __forceinline__ void ldsm_x4_t(uint32_t (&r)[4], const void* p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
#endif
}

// c += a b for one m16n8k16 tile (row-major A, column-major B, f32 accumulators).
template <typename T>
__device__ __forceinline__ void mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if constexpr (std::is_same_v<T, __half>) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
#endif
}

// Two f32 values rounded to T and packed as one 32-bit operand (lower address first) in one
// conversion.
template <typename T>
__device__ __forceinline__ uint32_t pack2(float x, float y) {
  if constexpr (std::is_same_v<T, __half>) {
    const __half2 p = __floats2half2_rn(x, y);
    return *reinterpret_cast<const uint32_t*>(&p);
  } else {
    const __nv_bfloat162 p = __floats2bfloat162_rn(x, y);
    return *reinterpret_cast<const uint32_t*>(&p);
  }
}

// Two T values packed in 32 bits, as f32.
template <typename T>
__device__ __forceinline__ float2 to_f2(uint32_t v) {
  if constexpr (std::is_same_v<T, __half>) return __half22float2(*reinterpret_cast<const __half2*>(&v));
  else return __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&v));
}

// 2^x in one special-function instruction (2^-inf = 0).
__device__ __forceinline__ float ex2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// The mask's share of one key tile in shared memory, next to K and V: `rows` rows (1 where the
// mask broadcasts over the queries) of kKeys + 8 elements (the padding puts the eight rows a warp
// reads at one column in different banks).
constexpr int kMaskLd = kKeys + 8;

// A float mask read through shared memory: 16-byte copies of its key rows (contiguous keys,
// aligned rows, a length in whole chunks), loaded with K and V.
bool mask_tile_applies(const AttentionArgs& a) {
  return a.mask && !a.mask_bool && a.mask_sk == 1 && (reinterpret_cast<uintptr_t>(a.mask) & 15) == 0 &&
         (a.mask_sb | a.mask_sh | a.mask_sq) % 8 == 0 && a.mask_len % 8 == 0;
}

template <typename T>
__device__ __forceinline__ void load_mask_tile(T* dst, const AttentionArgs& a, const T* base, int q0, int k0, int rows) {
  for (int i = threadIdx.x; i < rows * (kKeys / 8); i += static_cast<int>(blockDim.x)) {
    const int r = i / (kKeys / 8), c = (i % (kKeys / 8)) * 8;
    const bool ok = q0 + r < a.q_seq && k0 + c < a.mask_len;
    cp16(dst + r * kMaskLd + c, ok ? base + (q0 + r) * a.mask_sq + k0 + c : base, ok);
  }
}

// How the kernel reads the mask: none, a tile in shared memory, or element by element.
enum class MaskRead { kNone, kTile, kGeneric };

template <typename T, int D, MaskRead kMask, int W>
__global__ void __launch_bounds__(W * 32, D == 64 ? 16 / W : 1) attention_fa_kernel(AttentionArgs a) {
  constexpr int kRows = 16 * W;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  extern __shared__ __align__(128) unsigned char smem_raw[];
  T* qs = reinterpret_cast<T*>(smem_raw);
  T* kbuf = qs + kRows * D;        // two K tiles
  T* vbuf = kbuf + 2 * kKeys * D;  // two V tiles
  const int mrows = a.mask_sq == 0 ? 1 : kRows;
  T* mbuf = vbuf + 2 * kKeys * D;  // two mask tiles of mrows rows (kTile)
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;

  const int64_t b = blockIdx.z, h = blockIdx.y, q0 = static_cast<int64_t>(blockIdx.x) * kRows;
  const int64_t hk = h / (a.q_heads / a.kv_heads);
  const T* q = static_cast<const T*>(a.q) + b * a.qs.b + h * a.qs.h + q0 * a.qs.s;
  const T* k = static_cast<const T*>(a.k) + b * a.ks.b + hk * a.ks.h;
  const T* v = static_cast<const T*>(a.v) + b * a.vs.b + hk * a.vs.h;

  // Causal: keys past the block's last query are masked for every row, so those tiles are skipped.
  int64_t kv_end = a.kv_seq;
  if (a.causal) kv_end = std::min<int64_t>(kv_end, q0 + kRows);
  const int tiles = static_cast<int>((kv_end + kKeys - 1) / kKeys);

  load_tile<T, D>(qs, q, a.qs.s, kRows, a.q_seq - q0);
  const T* mbase = kMask == MaskRead::kTile ? static_cast<const T*>(a.mask) + b * a.mask_sb + h * a.mask_sh : nullptr;
  if (tiles > 0) {
    load_tile<T, D>(kbuf, k, a.ks.s, kKeys, a.kv_seq);
    load_tile<T, D>(vbuf, v, a.vs.s, kKeys, a.kv_seq);
    if constexpr (kMask == MaskRead::kTile) load_mask_tile(mbuf, a, mbase, static_cast<int>(q0), 0, mrows);
  }
  cp_commit();

  // This lane's two rows (g and g + 8 of the warp's 16) and their mask rows.
  const int r0 = static_cast<int>(q0) + warp * 16 + g, r1 = r0 + 8, qn = static_cast<int>(a.q_seq);
  const int kn = static_cast<int>(a.kv_seq), mlen = static_cast<int>(a.mask_len);
  const T* mrow[2] = {nullptr, nullptr};
  if (kMask == MaskRead::kGeneric && a.mask && !a.mask_bool) {
    const T* m = static_cast<const T*>(a.mask) + b * a.mask_sb + h * a.mask_sh;
    mrow[0] = m + std::min(r0, qn - 1) * a.mask_sq;
    mrow[1] = m + std::min(r1, qn - 1) * a.mask_sq;
  }
  // Scores stay in natural units (score * scale + mask); log2(e) is folded into each exponent's
  // fma: p = 2^(x log2 e - max log2 e).
  const float sc = a.scale;
  const int warp_row0 = static_cast<int>(q0) + warp * 16;
  // This lane's two rows in the mask tile (row 0 where the mask broadcasts over the queries).
  const int mrow_s[2] = {a.mask_sq == 0 ? 0 : (warp * 16 + g) * kMaskLd, a.mask_sq == 0 ? 0 : (warp * 16 + g + 8) * kMaskLd};

  float o[D / 8][4];
#pragma unroll
  for (int n = 0; n < D / 8; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.f;
  float mx[2] = {-INFINITY, -INFINITY};
  // The row sums of P as rounded to T, by the tensor cores: P times a column of ones (lsum[0] is
  // row g's, lsum[2] row g + 8's, in every lane of the row).
  float lsum[4] = {0.f, 0.f, 0.f, 0.f};
  const uint32_t ones = std::is_same_v<T, __half> ? 0x3C003C00u : 0x3F803F80u;

  for (int it = 0; it < tiles; ++it) {
    const int k0 = it * kKeys;
    if (it + 1 < tiles) {
      const int nb = (it + 1) & 1;
      load_tile<T, D>(kbuf + nb * kKeys * D, k + (k0 + kKeys) * a.ks.s, a.ks.s, kKeys, a.kv_seq - k0 - kKeys);
      load_tile<T, D>(vbuf + nb * kKeys * D, v + (k0 + kKeys) * a.vs.s, a.vs.s, kKeys, a.kv_seq - k0 - kKeys);
      if constexpr (kMask == MaskRead::kTile) load_mask_tile(mbuf + nb * mrows * kMaskLd, a, mbase, static_cast<int>(q0), k0 + kKeys, mrows);
      cp_commit();
      cp_wait<1>();
    } else {
      cp_wait<0>();
    }
    __syncthreads();
    const T* ks = kbuf + (it & 1) * kKeys * D;
    const T* vs = vbuf + (it & 1) * kKeys * D;
    const T* ms = mbuf + (it & 1) * mrows * kMaskLd;

    // S = Q K^T: 8 n-tiles of 8 keys.
    float s[kKeys / 8][4];
#pragma unroll
    for (int n = 0; n < kKeys / 8; ++n) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.f;
#pragma unroll
    for (int kc = 0; kc < D / 16; ++kc) {
      uint32_t qa[4];
      ldsm_x4(qa, qs + swz<D>(warp * 16 + (lane & 7) + ((lane >> 3) & 1) * 8, kc * 16 + (lane >> 4) * 8));
#pragma unroll
      for (int np = 0; np < kKeys / 16; ++np) {
        uint32_t kb[4];
        ldsm_x4(kb, ks + swz<D>(np * 16 + (lane & 7) + (lane >> 4) * 8, kc * 16 + ((lane >> 3) & 1) * 8));
        mma<T>(s[2 * np], qa, kb[0], kb[1]);
        mma<T>(s[2 * np + 1], qa, kb[2], kb[3]);
      }
    }

    // Scale, mask and causality, in the log2 domain; the tile's row maxima. Interior tiles (every
    // key inside the sequence and the mask, none after a row of this warp) take the path without
    // per-element checks; the mask tile is read as element pairs.
    const bool edge = k0 + kKeys > kn || (a.causal && k0 + kKeys - 1 > warp_row0) ||
                      (kMask != MaskRead::kNone && k0 + kKeys > mlen) || kMask == MaskRead::kGeneric;
    float tmax[2] = {-INFINITY, -INFINITY};
    if (!edge) {
#pragma unroll
      for (int n = 0; n < kKeys / 8; ++n)
#pragma unroll
        for (int ri = 0; ri < 2; ++ri) {
          float2 m = make_float2(0.f, 0.f);
          if constexpr (kMask == MaskRead::kTile)
            m = to_f2<T>(*reinterpret_cast<const uint32_t*>(ms + mrow_s[ri] + n * 8 + 2 * t));
          s[n][2 * ri] = fmaf(s[n][2 * ri], sc, m.x);
          s[n][2 * ri + 1] = fmaf(s[n][2 * ri + 1], sc, m.y);
          tmax[ri] = fmaxf(tmax[ri], fmaxf(s[n][2 * ri], s[n][2 * ri + 1]));
        }
    } else {
#pragma unroll
      for (int n = 0; n < kKeys / 8; ++n) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int ri = e >> 1;
          const int j = k0 + n * 8 + 2 * t + (e & 1), qi = ri ? r1 : r0;
          float x = s[n][e] * sc;
          if (j >= kn || (a.causal && j > qi)) {
            x = -INFINITY;
          } else if (kMask != MaskRead::kNone) {
            if (j >= mlen) x = -INFINITY;
            else if (kMask == MaskRead::kTile) x += to_f(ms[mrow_s[ri] + n * 8 + 2 * t + (e & 1)]);
            else if (mrow[ri]) x += to_f(mrow[ri][j * a.mask_sk]);
            else x = masked_score<T>(a, b, h, std::min(qi, qn - 1), j, x);
          }
          s[n][e] = x;
          tmax[ri] = fmaxf(tmax[ri], x);
        }
      }
    }
    float corr[2], nb[2];
#pragma unroll
    for (int ri = 0; ri < 2; ++ri) {
      tmax[ri] = fmaxf(tmax[ri], __shfl_xor_sync(0xffffffffu, tmax[ri], 1));
      tmax[ri] = fmaxf(tmax[ri], __shfl_xor_sync(0xffffffffu, tmax[ri], 2));
      const float m_new = fmaxf(mx[ri], tmax[ri]);
      const float base = m_new == -INFINITY ? 0.f : m_new;  // a row masked so far: every p is 0
      corr[ri] = ex2((mx[ri] - base) * kLog2e);             // 0 while the row had no key
      nb[ri] = -base * kLog2e;
      mx[ri] = m_new;
    }
    if (it > 0) {  // the first tile's O and sums are still zero
#pragma unroll
      for (int n = 0; n < D / 8; ++n) {
        o[n][0] *= corr[0];
        o[n][1] *= corr[0];
        o[n][2] *= corr[1];
        o[n][3] *= corr[1];
      }
      lsum[0] *= corr[0];
      lsum[1] *= corr[0];
      lsum[2] *= corr[1];
      lsum[3] *= corr[1];
    }

    // O += P V, 16 keys at a time: P's A operand is two score n-tiles, rounded to T.
#pragma unroll
    for (int kc = 0; kc < kKeys / 16; ++kc) {
      uint32_t pa[4];
      pa[0] = pack2<T>(ex2(fmaf(s[2 * kc][0], kLog2e, nb[0])), ex2(fmaf(s[2 * kc][1], kLog2e, nb[0])));
      pa[1] = pack2<T>(ex2(fmaf(s[2 * kc][2], kLog2e, nb[1])), ex2(fmaf(s[2 * kc][3], kLog2e, nb[1])));
      pa[2] = pack2<T>(ex2(fmaf(s[2 * kc + 1][0], kLog2e, nb[0])), ex2(fmaf(s[2 * kc + 1][1], kLog2e, nb[0])));
      pa[3] = pack2<T>(ex2(fmaf(s[2 * kc + 1][2], kLog2e, nb[1])), ex2(fmaf(s[2 * kc + 1][3], kLog2e, nb[1])));
      mma<T>(lsum, pa, ones, ones);
#pragma unroll
      for (int dp = 0; dp < D / 16; ++dp) {
        uint32_t vb[4];
        ldsm_x4_t(vb, vs + swz<D>(kc * 16 + (lane & 7) + ((lane >> 3) & 1) * 8, dp * 16 + (lane >> 4) * 8));
        mma<T>(o[2 * dp], pa, vb[0], vb[1]);
        mma<T>(o[2 * dp + 1], pa, vb[2], vb[3]);
      }
    }
    __syncthreads();  // every warp is done with this buffer before the load two tiles on
  }

  // O / l (0 / 0 = NaN where every key is masked).
  const float l[2] = {lsum[0], lsum[2]};
#pragma unroll
  for (int ri = 0; ri < 2; ++ri) {
    const int qi = ri ? r1 : r0;
    if (qi >= qn) continue;
    T* y = static_cast<T*>(a.y) + b * a.ys.b + h * a.ys.h + qi * a.ys.s;
    const float inv = 1.f / l[ri];
#pragma unroll
    for (int n = 0; n < D / 8; ++n) {
      float y0 = o[n][2 * ri] * inv, y1 = o[n][2 * ri + 1] * inv;
      if (a.nan_to_zero) {
        if (isnan(y0)) y0 = 0.f;
        if (isnan(y1)) y1 = 0.f;
      }
      const T p[2] = {from_f<T>(y0), from_f<T>(y1)};
      *reinterpret_cast<uint32_t*>(y + n * 8 + 2 * t) = *reinterpret_cast<const uint32_t*>(p);
    }
  }
#endif
}

template <typename T, int D, int W>
Status launch_typed(const AttentionArgs& a, cudaStream_t stream) {
  constexpr int kRows = 16 * W;
  const bool mt = mask_tile_applies(a);
  const int64_t mrows = a.mask_sq == 0 ? 1 : kRows;
  const size_t smem = sizeof(T) * static_cast<size_t>(kRows * D + 4 * kKeys * D + (mt ? 2 * mrows * kMaskLd : 0));
  if (!a.mask) return launch_attention_grid(attention_fa_kernel<T, D, MaskRead::kNone, W>, a, kRows, W * 32, smem, stream);
  if (mt) return launch_attention_grid(attention_fa_kernel<T, D, MaskRead::kTile, W>, a, kRows, W * 32, smem, stream);
  return launch_attention_grid(attention_fa_kernel<T, D, MaskRead::kGeneric, W>, a, kRows, W * 32, smem, stream);
}

// GPUOPT_FA_WARPS=auto: 8 warps (128 query rows per block: K and V read half as often) where the
// 8-warp grid still covers every SM this many times; 4 (twice the blocks) for small grids, where
// 8 left SMs idle (H200: BERT-base b256 10.36 against 10.42 ms with 8, b1 0.51 against 0.49).
constexpr int64_t kFaWideWaves = 4;

int sm_count() {
  int device = 0, n = 0;
  if (cudaGetDevice(&device) != cudaSuccess || cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, device) != cudaSuccess)
    return 0;
  return n;
}

bool fa_wide(const AttentionArgs& a) {
  const int w = a.fa_warps;
  if (w != 0) return w == 8;
  static const int sms = sm_count();  // one GPU kind per process in practice; a wrong count only costs speed
  const int64_t blocks = a.batch * a.q_heads * ((a.q_seq + 127) / 128);
  return sms > 0 && blocks >= kFaWideWaves * sms;
}

template <typename T>
Status launch_for(const AttentionArgs& a, cudaStream_t stream) {
  if (a.head == 64) return fa_wide(a) ? launch_typed<T, 64, 8>(a, stream) : launch_typed<T, 64, 4>(a, stream);
  return launch_typed<T, 128, 4>(a, stream);
}

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; }

}  // namespace

bool attention_fa_applies(const AttentionArgs& a, int device_major) {
  if (device_major < 8 || (a.dt != DType::F16 && a.dt != DType::BF16)) return false;
  if ((a.head != 64 && a.head != 128) || a.v_head != a.head) return false;
  // 16-byte copies of every row: aligned bases, row strides in whole 8-element chunks.
  if (!aligned16(a.q) || !aligned16(a.k) || !aligned16(a.v) || (a.qs.s | a.ks.s | a.vs.s) % 8 != 0 ||
      (a.qs.b | a.qs.h | a.ks.b | a.ks.h | a.vs.b | a.vs.h) % 8 != 0)
    return false;
  // The output's 4-byte stores of element pairs.
  if ((reinterpret_cast<uintptr_t>(a.y) & 3) != 0 || (a.ys.b | a.ys.h | a.ys.s) % 2 != 0) return false;
  return a.kv_seq > 0 && a.kv_seq < (1LL << 30) && a.mask_len < (1LL << 30) && a.q_seq <= 65535LL * 64 && a.q_heads <= 65535 && a.batch <= 65535;
}

Status launch_attention_fa(const AttentionArgs& a, cudaStream_t stream) {
  return a.dt == DType::F16 ? launch_for<__half>(a, stream) : launch_for<__nv_bfloat16>(a, stream);
}

}  // namespace gpuopt::cuda
