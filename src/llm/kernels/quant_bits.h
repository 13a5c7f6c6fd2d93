// The bit tricks and fragment mapping of the tensor-core quantized GEMV (gemv_quant_mma.cu), in
// plain C++ so that the host tests (tests/llm/quant_bits_test.cpp) run the same formulas and
// indices as the kernel. Private to src/llm/kernels and its tests.
//
// Dequantization without integer-to-float conversions: an unsigned code q (< 1024) or'ed into the
// mantissa of f16 1024.0 (0x6400) is the f16 value 1024 + q. Two codes at bits 0.. and 16.. of a
// 32-bit word become one f16x2 register with one and-or (a LOP3). GPTQ's int4 word holds k0..k7
// at bits 4j, so
//   (w      & 0x000f000f) | 0x64006400 = (1024 + q0,      1024 + q4)
//   (w      & 0x00f000f0) | 0x64006400 = (1024 + 16 q1,   1024 + 16 q5)
//   (w >> 8 & 0x000f000f) | 0x64006400 = (1024 + q2,      1024 + q6)
//   (w >> 8 & 0x00f000f0) | 0x64006400 = (1024 + 16 q3,   1024 + 16 q7)
// and one f16x2 subtract of (1024 + z) — or fma by 1/16 minus (64 + z) for the x16 ones — leaves
// (q - z) exactly (small integers; every intermediate is exact in f16): 9 instructions per 8
// weights. int8 words (k0..k3 at bits 8j): (w & 0x00ff00ff) | magic = (1024 + q0, 1024 + q2),
// (w >> 8 & 0x00ff00ff) | magic = (1024 + q1, 1024 + q3), then the subtract.
//
// The group scale is not applied per weight: the tensor cores sum x * (q - z) over a group in f32,
// and the sum is scaled once per group and column.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define GPUOPT_QB_HD __host__ __device__ __forceinline__
#else
#define GPUOPT_QB_HD inline
#endif

namespace gpuopt::llm::quant_bits {

constexpr uint32_t kMagic2 = 0x64006400u;   // f16x2 (1024, 1024)
constexpr uint32_t kSixteenth2 = 0x2C002C00u;  // f16x2 (1/16, 1/16)

// Pairs per 32-bit word: 4 (int4), 2 (int8). Pair j's low and high halves hold k = pair_k(j, 0|1)
// of the word's kPack = 32 / bits values.
template <int kBits>
GPUOPT_QB_HD int pair_k(int j, int hi) {
  return kBits == 4 ? j + 4 * hi : j + 2 * hi;
}
// Where value k of a word's chunk sits in the kernel's permuted copy of x (half index within the
// chunk): the inverse of pair_k, so that half 2j + hi of a chunk pairs with pair j's half hi.
template <int kBits>
GPUOPT_QB_HD int x_slot(int k) {
  return kBits == 4 ? 2 * (k & 3) + (k >> 2) : 2 * (k & 1) + (k >> 1);
}

// The word's codes as biased f16x2 (see above); int4 pairs 1 and 3 are scaled by 16.
template <int kBits>
GPUOPT_QB_HD void biased_pairs(uint32_t w, uint32_t* p) {
  if constexpr (kBits == 4) {
    p[0] = (w & 0x000f000fu) | kMagic2;
    p[1] = (w & 0x00f000f0u) | kMagic2;
    const uint32_t v = w >> 8;
    p[2] = (v & 0x000f000fu) | kMagic2;
    p[3] = (v & 0x00f000f0u) | kMagic2;
  } else {
    p[0] = (w & 0x00ff00ffu) | kMagic2;
    p[1] = ((w >> 8) & 0x00ff00ffu) | kMagic2;
  }
}
// f16x2 (1024 + z, 1024 + z): subtracted from the plain pairs (z < 1024).
GPUOPT_QB_HD uint32_t zero_sub2(uint32_t z) {
  return (0x6400u + z) * 0x00010001u;
}
// f16x2 (-(64 + z), -(64 + z)): added after the x16 pairs are multiplied by 1/16 (int4, z < 16:
// 64 + z has the exponent of 64, mantissa z * 16).
GPUOPT_QB_HD uint32_t zero_fma2(uint32_t z) {
  return (0xD400u + (z << 4)) * 0x00010001u;
}
// Whether pair j needs the fma (x16) rather than the subtract.
template <int kBits>
GPUOPT_QB_HD bool pair_scaled(int j) {
  return kBits == 4 && (j & 1);
}

// The warp's fragment mapping. A warp owns 32 adjacent output columns and steps over K four packed
// rows at a time; lane (g = lane / 4, i = lane % 4) loads one 16-byte vector: packed row i of the
// step, columns 4g..4g+3 of the warp's 32. Those four columns are rows g and g+8 of two m16n8k16
// A tiles: column 4g + 2 tt + h is row g + 8h of tile tt. Per step each tile takes kPairs / 2
// mmas (int4 2, int8 1); for mma m the lane's word of a column gives pair 2m as logical k 2i, 2i+1
// and pair 2m+1 as k 2i+8, 2i+9 (PTX's A layout: a0a1 row g, a2a3 row g+8, a4a5 and a6a7 the same
// rows 8 k further). B matches them with x's pairs 2m, 2m+1 of chunk i (the lane's own packed row)
// for token g of the n-tile; the same k permutation on both sides leaves the sum unchanged.
constexpr int kWarpCols = 32;
constexpr int kStepRows = 4;  // packed rows per step (one per lane of a quad)

GPUOPT_QB_HD int col_of(int g, int tt, int h) {
  return 4 * g + 2 * tt + h;
}
// A fragment of tile tt for mma m from the four columns' dequantized pairs q[c][j].
GPUOPT_QB_HD void a_frag(const uint32_t (&q)[4][4], int tt, int m, uint32_t* a) {
  a[0] = q[2 * tt][2 * m];          // row g,   k 2i..2i+1
  a[1] = q[2 * tt + 1][2 * m];      // row g+8, k 2i..2i+1
  a[2] = q[2 * tt][2 * m + 1];      // row g,   k 2i+8..2i+9
  a[3] = q[2 * tt + 1][2 * m + 1];  // row g+8, k 2i+8..2i+9
}

// Eight consecutive f16 values of x (four 32-bit words, two halves each, low half first) into
// the permuted order: int4 one chunk [x0 x4 x1 x5 x2 x6 x3 x7], int8 two chunks [x0 x2 x1 x3]
// (half i of the output is input k with x_slot(k % kPack) == i % kPack).
GPUOPT_QB_HD uint32_t halves(uint32_t lo_of, uint32_t hi_of, bool high) {  // (a.lo, b.lo) or (a.hi, b.hi)
  return high ? (lo_of >> 16) | (hi_of & 0xffff0000u) : (lo_of & 0xffffu) | (hi_of << 16);
}
template <int kBits>
GPUOPT_QB_HD void permute8(const uint32_t* in, uint32_t* out) {
  if constexpr (kBits == 4) {
    out[0] = halves(in[0], in[2], false);  // x0 x4
    out[1] = halves(in[0], in[2], true);   // x1 x5
    out[2] = halves(in[1], in[3], false);  // x2 x6
    out[3] = halves(in[1], in[3], true);   // x3 x7
  } else {
    out[0] = halves(in[0], in[1], false);  // x0 x2
    out[1] = halves(in[0], in[1], true);   // x1 x3
    out[2] = halves(in[2], in[3], false);
    out[3] = halves(in[2], in[3], true);
  }
}

// The permuted x row of a slice: tokens' rows of `stride` halves. Rounded to 64 halves, plus a
// pad that puts consecutive tokens in different banks for the lanes' 16-byte (int4) or 8-byte
// (int8) loads: 64 bytes (int4: a quarter warp reads two tokens), 32 (int8: four tokens).
template <int kBits>
GPUOPT_QB_HD int x_stride(int slice_k) {
  return (slice_k + 63) / 64 * 64 + (kBits == 4 ? 32 : 16);
}

}  // namespace gpuopt::llm::quant_bits
