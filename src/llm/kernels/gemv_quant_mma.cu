// The tensor-core W4A16 / W8A16 product for 1..16 tokens (f16, no act-order, groups of whole
// 4-row steps): the weight is read once per launch for all T tokens, dequantized in registers to
// (q - z) in f16 with the magic-number trick (quant_bits.h: 9 instructions per 8 int4 weights, 5
// per 4 int8), and multiplied by the tokens' activations with mma.sync m16n8k16 (one n-tile of 8
// tokens up to T = 8, two up to 16), so the time hardly grows with T until the dequantization,
// not the tensor cores, is the limit. The mma sums x * (q - z) over a group in f32 (the products
// of small integers by f16 values are exact); the group's scale is applied to that sum, once per
// group and column, into an f32 total.
//
// A CTA (4 warps) owns 128 output columns and a slice of K (blockIdx.y); each warp 32 columns of
// it, stepping over the slice four packed rows at a time (one 16-byte load per lane per step, eight
// steps in flight). The slice of x is staged in shared memory as f16, permuted within each word's
// chunk so that a lane's B fragment is one load. Slices are added in order by the last CTA of a
// column tile (gemv_split.cuh): deterministic.
#include <algorithm>

#include "llm/kernels/common.cuh"
#include "llm/kernels/gemv_quant_mma.h"
#include "llm/kernels/gemv_split.cuh"
#include "llm/kernels/quant_bits.h"

namespace gpuopt::llm::cuda {
namespace {

namespace qb = quant_bits;

constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;
constexpr int kTileCols = kWarps * qb::kWarpCols;  // 128
constexpr int kSmemBytes = 48 * 1024;               // no opt-in needed
constexpr int kMaxSplits = 32;
constexpr int kUnroll = 8;                          // steps (16-byte loads) in flight per lane

__device__ __forceinline__ uint32_t sub_f16x2(uint32_t a, uint32_t b) {
  uint32_t d;
  asm("sub.rn.f16x2 %0, %1, %2;\n" : "=r"(d) : "r"(a), "r"(b));
  return d;
}
__device__ __forceinline__ uint32_t fma_f16x2(uint32_t a, uint32_t b, uint32_t c) {
  uint32_t d;
  asm("fma.rn.f16x2 %0, %1, %2, %3;\n" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  return d;
}
__device__ __forceinline__ void mma_f16(float* c, const uint32_t* a, uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

template <int kBits, int kNT>
__global__ void __launch_bounds__(kThreads)
    gemv_mma_kernel(const __half* __restrict__ x, const uint4* __restrict__ qw, const uint32_t* __restrict__ qz,
                    const __half* __restrict__ scales, const __half* __restrict__ bias, __half* __restrict__ y, int T,
                    int N, int K, int group_size, bool zero_minus_one, int rows_per_split, float* __restrict__ partial,
                    int* __restrict__ counters) {
  constexpr int kPack = 32 / kBits;  // codes per word
  constexpr int kPairs = kPack / 2;  // f16x2 per word
  constexpr int kMmas = kPairs / 2;  // mmas per tile, n-tile and step
  constexpr uint32_t kMask = (1u << kBits) - 1;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, i = lane & 3;
  const int tile = blockIdx.x, split = blockIdx.y;
  const int col0 = tile * kTileCols + warp * qb::kWarpCols + 4 * g;  // this lane's 4 columns
  const bool live = col0 < N;  // N % 4 == 0: all four columns in or all out
  const bool warp_live = tile * kTileCols + warp * qb::kWarpCols < N;
  const int rows = K / kPack;
  const int r0 = split * rows_per_split, r1 = min(rows, r0 + rows_per_split);
  const int slice_k = (r1 - r0) * kPack;
  const int xstride = qb::x_stride<kBits>(rows_per_split * kPack);

  // The first batch of weight loads goes out before x is staged, so the two latencies overlap
  // (a warp's slice is often a single batch).
  const int64_t row_vecs = N / 4;
  uint4 wd[kUnroll];
  const auto load_batch = [&](int r) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int rr = r + qb::kStepRows * u;
      wd[u] = live && rr < r1 ? __ldg(qw + static_cast<int64_t>(rr + i) * row_vecs + col0 / 4) : make_uint4(0, 0, 0, 0);
    }
  };
  load_batch(r0);

  // x's slice into shared memory, 16 bytes at a time, permuted (quant_bits.h permute8).
  __half* xs = reinterpret_cast<__half*>(smem_raw);  // [T][xstride]
  for (int t = 0; t < T; ++t) {
    const uint4* src = reinterpret_cast<const uint4*>(x + static_cast<int64_t>(t) * K + static_cast<int64_t>(r0) * kPack);
    uint4* dst = reinterpret_cast<uint4*>(xs + t * xstride);
    for (int v = threadIdx.x; v < slice_k / 8; v += kThreads) {
      const uint4 in = __ldg(src + v);
      const uint32_t iw[4] = {in.x, in.y, in.z, in.w};
      uint32_t ow[4];
      qb::permute8<kBits>(iw, ow);
      dst[v] = make_uint4(ow[0], ow[1], ow[2], ow[3]);
    }
  }
  __syncthreads();

  float acc[2][kNT][4], grp_acc[2][kNT][4];
#pragma unroll
  for (int tt = 0; tt < 2; ++tt)
#pragma unroll
    for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
      for (int r = 0; r < 4; ++r) acc[tt][nt][r] = grp_acc[tt][nt][r] = 0.0f;
  float s[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  uint32_t zsub[4] = {}, zfma[4] = {};
  // The group's sums into the totals: c-registers 0,1 are row g (column 2tt), 2,3 row g+8 (2tt+1).
  const auto flush = [&]() {
#pragma unroll
    for (int tt = 0; tt < 2; ++tt)
#pragma unroll
      for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
        for (int r = 0; r < 4; ++r) {
          acc[tt][nt][r] = fmaf(s[2 * tt + (r >> 1)], grp_acc[tt][nt][r], acc[tt][nt][r]);
          grp_acc[tt][nt][r] = 0.0f;
        }
  };
  const auto load_group = [&](int grp) {
    if (!live) return;  // s = 0: the dead columns' sums stay 0
    const uint2 sv = __ldg(reinterpret_cast<const uint2*>(scales + static_cast<int64_t>(grp) * N + col0));
    const __half2 s01 = *reinterpret_cast<const __half2*>(&sv.x), s23 = *reinterpret_cast<const __half2*>(&sv.y);
    s[0] = __low2float(s01);
    s[1] = __high2float(s01);
    s[2] = __low2float(s23);
    s[3] = __high2float(s23);
    const uint32_t zw = __ldg(qz + static_cast<int64_t>(grp) * (N / kPack) + col0 / kPack);
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      uint32_t z = (zw >> (kBits * ((col0 + c) % kPack))) & kMask;
      if (zero_minus_one) z = (z + 1) & kMask;
      zsub[c] = qb::zero_sub2(z);
      zfma[c] = qb::zero_fma2(z);
    }
  };

  if (warp_live) {
    // Groups without a division per step: the slice's first group, then a count of the steps left
    // in the current one (a group is a whole number of steps, and slices start on a step).
    const int steps_per_group = group_size / (qb::kStepRows * kPack);
    int grp = r0 / qb::kStepRows / steps_per_group;
    int left = steps_per_group - (r0 / qb::kStepRows) % steps_per_group;
    load_group(grp);
    for (int r = r0; r < r1; r += qb::kStepRows * kUnroll) {
      if (r != r0) load_batch(r);
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int rr = r + qb::kStepRows * u;
        if (rr >= r1) break;  // warp-uniform
        if (left == 0) {
          flush();
          ++grp;
          left = steps_per_group;
          load_group(grp);
        }
        --left;
        // (q - z) pairs of the lane's four columns.
        const uint32_t words[4] = {wd[u].x, wd[u].y, wd[u].z, wd[u].w};
        uint32_t q[4][4];
#pragma unroll
        for (int c = 0; c < 4; ++c) {
          qb::biased_pairs<kBits>(words[c], q[c]);
#pragma unroll
          for (int j = 0; j < kPairs; ++j)
            q[c][j] = qb::pair_scaled<kBits>(j) ? fma_f16x2(q[c][j], qb::kSixteenth2, zfma[c]) : sub_f16x2(q[c][j], zsub[c]);
        }
        // B: token 8 nt + g's x pairs of chunk i (the lane's packed row); zero past T.
        uint32_t b[kNT][kPairs];
        const int xoff = (rr - r0 + i) * kPack;
#pragma unroll
        for (int nt = 0; nt < kNT; ++nt) {
          const int tok = 8 * nt + g;
          if (tok < T) {
            const __half* p = xs + tok * xstride + xoff;
            if constexpr (kPairs == 4) {
              const uint4 v = *reinterpret_cast<const uint4*>(p);
              b[nt][0] = v.x;
              b[nt][1] = v.y;
              b[nt][2] = v.z;
              b[nt][3] = v.w;
            } else {
              const uint2 v = *reinterpret_cast<const uint2*>(p);
              b[nt][0] = v.x;
              b[nt][1] = v.y;
            }
          } else {
#pragma unroll
            for (int j = 0; j < kPairs; ++j) b[nt][j] = 0;
          }
        }
#pragma unroll
        for (int tt = 0; tt < 2; ++tt)
#pragma unroll
          for (int m = 0; m < kMmas; ++m) {
            uint32_t a[4];
            qb::a_frag(q, tt, m, a);
#pragma unroll
            for (int nt = 0; nt < kNT; ++nt) mma_f16(grp_acc[tt][nt], a, b[nt][2 * m], b[nt][2 * m + 1]);
          }
      }
    }
    flush();
  }

  // The lane's outputs to shared memory: tile tt, n-tile nt, register r is column
  // col_of(g, tt, r / 2) of the warp and token 8 nt + 2 i + r % 2.
  __syncthreads();  // xs is read no more
  float* part = reinterpret_cast<float*>(smem_raw);  // [T][kTileCols]
#pragma unroll
  for (int tt = 0; tt < 2; ++tt)
#pragma unroll
    for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const int tok = 8 * nt + 2 * i + (r & 1);
        if (tok < T) part[tok * kTileCols + warp * qb::kWarpCols + qb::col_of(g, tt, r >> 1)] = acc[tt][nt][r];
      }
  __syncthreads();
  const auto cta_sum = [&](int t, int cc) { return part[t * kTileCols + cc]; };
  const auto out = [&](int t, int col, float v) {
    if (bias) v += __half2float(bias[col]);
    y[static_cast<int64_t>(t) * N + col] = __float2half_rn(v);
  };
  detail::split_k_finish_t<kThreads>(cta_sum, out, T, tile, tile * kTileCols, kTileCols, N, partial, counters);
}

int pack_of(int bits) {
  return 32 / bits;
}

int smem_bytes(int bits, int64_t T, int rps) {
  const int slice_k = rps * pack_of(bits);
  const int xs = static_cast<int>(T) * (bits == 4 ? qb::x_stride<4>(slice_k) : qb::x_stride<8>(slice_k)) * 2;
  return std::max(xs, static_cast<int>(T) * kTileCols * 4);
}

// Packed rows per slice, a multiple of the 4-row step: about enough slices for four CTAs per SM
// (at most kMaxSplits), no more than the x slice's shared memory holds; 0 where it cannot run.
int rows_per_split(int64_t T, int bits, int64_t N, int64_t K, const GemvSplitScratch* ws, int sms) {
  const int64_t rows = K / pack_of(bits), tiles = (N + kTileCols - 1) / kTileCols;
  const int64_t splits = detail::split_count(T, N, tiles, kMaxSplits, ws, sms);
  int64_t rps = ((rows + splits - 1) / splits + qb::kStepRows - 1) / qb::kStepRows * qb::kStepRows;
  while (rps > qb::kStepRows && smem_bytes(bits, T, static_cast<int>(rps)) > kSmemBytes) rps -= qb::kStepRows;
  if (smem_bytes(bits, T, static_cast<int>(rps)) > kSmemBytes) return 0;
  const int64_t need = (rows + rps - 1) / rps;
  if (need > 1 && !(ws && ws->partial && ws->counters && tiles <= ws->num_counters &&
                    static_cast<size_t>(need * T * N) <= ws->partial_floats))
    return 0;
  return static_cast<int>(rps);
}

template <int kBits, int kNT>
void launch(const void* x, const QuantWeightArgs& w, const void* bias, void* y, int64_t T, int N, int K, int rps,
            const GemvSplitScratch* ws, cudaStream_t s) {
  const int rows = K / pack_of(kBits);
  const dim3 grid((N + kTileCols - 1) / kTileCols, (rows + rps - 1) / rps);
  const int smem = smem_bytes(kBits, T, rps);
  float* partial = grid.y > 1 ? ws->partial : nullptr;
  int* counters = grid.y > 1 ? ws->counters : nullptr;
  gemv_mma_kernel<kBits, kNT><<<grid, kThreads, smem, s>>>(
      static_cast<const __half*>(x), static_cast<const uint4*>(static_cast<const void*>(w.qweight)),
      static_cast<const uint32_t*>(static_cast<const void*>(w.qzeros)), static_cast<const __half*>(w.scales),
      static_cast<const __half*>(bias), static_cast<__half*>(y), static_cast<int>(T), N, K,
      static_cast<int>(w.group_size), w.zero_minus_one, rps, partial, counters);
}

bool aligned(const void* p, uintptr_t a) {
  return (reinterpret_cast<uintptr_t>(p) & (a - 1)) == 0;
}

}  // namespace

bool gemv_quant_mma_applies(const QuantWeightArgs& w, int64_t T, int64_t N, int64_t K, DType dt,
                            const GemvSplitScratch* ws) {
  if (dt != DType::F16 || w.g_idx || (w.bits != 4 && w.bits != 8) || T < 1 || T > kQuantGemvMaxTokens ||
      N % 8 != 0 || !aligned(w.qweight, 16) || !aligned(w.scales, 8) || w.group_size <= 0 ||
      w.group_size % (qb::kStepRows * pack_of(w.bits)) != 0 || K % w.group_size != 0)
    return false;
  static const int sms = detail::sm_count();
  return rows_per_split(T, w.bits, N, K, ws, sms) > 0;
}

bool gemv_quant_mma(const void* x, const QuantWeightArgs& w, const void* bias, void* y, int64_t T, int64_t N,
                    int64_t K, DType dt, const GemvSplitScratch* ws, cudaStream_t stream) {
  if (!aligned(x, 16) || !gemv_quant_mma_applies(w, T, N, K, dt, ws)) return false;  // x staged 16 bytes at a time
  static const int sms = detail::sm_count();
  const int rps = rows_per_split(T, w.bits, N, K, ws, sms);
  const int n = static_cast<int>(N), k = static_cast<int>(K);
  if (w.bits == 4) {
    if (T <= 8)
      launch<4, 1>(x, w, bias, y, T, n, k, rps, ws, stream);
    else
      launch<4, 2>(x, w, bias, y, T, n, k, rps, ws, stream);
  } else {
    if (T <= 8)
      launch<8, 1>(x, w, bias, y, T, n, k, rps, ws, stream);
    else
      launch<8, 2>(x, w, bias, y, T, n, k, rps, ws, stream);
  }
  return true;
}

}  // namespace gpuopt::llm::cuda
