// The tensor-core quantized GEMV's bit tricks and fragment mapping (src/llm/kernels/quant_bits.h)
// on the CPU: the magic-number dequantization of every int4 and int8 code at every position of a
// word, for every zero point, against (q - z) read from GPTQ's layout by shifting and masking; the
// f16 constants against Half's own conversion; and a warp of the kernel emulated lane by lane (the
// header's fragments into an m16n8k16 written from PTX's fragment tables) against
// dequantize-then-multiply, over K slices, groups and 1..16 tokens.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "llm/kernels/quant_bits.h"

namespace gpuopt::llm {
namespace {

namespace qb = quant_bits;

float lo_half(uint32_t v) {
  return Half::to_float(static_cast<uint16_t>(v & 0xffff));
}
float hi_half(uint32_t v) {
  return Half::to_float(static_cast<uint16_t>(v >> 16));
}
bool f16_exact(float v) {
  return Half::to_float(Half::from_float(v)) == v;
}

// What the device's f16x2 subtract / fma leave in one half: the exact result, which the test
// checks is an f16 value (so the device's rounding does not change it).
float fix_half(bool scaled, float biased, float zconst) {
  return scaled ? biased * Half::to_float(0x2C00) + zconst : biased - zconst;
}

template <int kBits>
void dequant_word(uint32_t w, uint32_t z, float* out) {  // out[k] = q_k - z, k < 32 / kBits
  constexpr int kPack = 32 / kBits;
  uint32_t p[kPack / 2];
  qb::biased_pairs<kBits>(w, p);
  for (int j = 0; j < kPack / 2; ++j)
    for (int hi = 0; hi < 2; ++hi) {
      const bool scaled = qb::pair_scaled<kBits>(j);
      const uint32_t zc = scaled ? qb::zero_fma2(z) : qb::zero_sub2(z);
      const float biased = hi ? hi_half(p[j]) : lo_half(p[j]);
      const float v = fix_half(scaled, biased, hi ? hi_half(zc) : lo_half(zc));
      ASSERT_TRUE(f16_exact(biased) && f16_exact(v));
      out[qb::pair_k<kBits>(j, hi)] = v;
    }
}

TEST(LlmQuantBits, ConstantsAreTheirF16Values) {
  EXPECT_EQ(qb::kMagic2, Half::from_float(1024.0f) * 0x00010001u);
  EXPECT_EQ(qb::kSixteenth2, Half::from_float(1.0f / 16) * 0x00010001u);
  for (uint32_t z = 0; z < 256; ++z) {
    EXPECT_EQ(qb::zero_sub2(z), Half::from_float(1024.0f + static_cast<float>(z)) * 0x00010001u) << z;
    if (z < 16) {
      EXPECT_EQ(qb::zero_fma2(z), Half::from_float(-64.0f - static_cast<float>(z)) * 0x00010001u) << z;
    }
  }
}

// Every code at every position (the other positions random), every zero point.
TEST(LlmQuantBits, Int4WordsDequantizeExactly) {
  std::mt19937 rng(7);
  for (int pos = 0; pos < 8; ++pos)
    for (uint32_t q = 0; q < 16; ++q)
      for (uint32_t z = 0; z < 16; ++z) {
        const uint32_t w = (rng() & ~(15u << (4 * pos))) | (q << (4 * pos));
        float got[8];
        dequant_word<4>(w, z, got);
        for (int k = 0; k < 8; ++k)
          ASSERT_EQ(got[k], static_cast<float>(static_cast<int>((w >> (4 * k)) & 15) - static_cast<int>(z)))
              << "word " << std::hex << w << std::dec << " k " << k << " z " << z;
      }
}

TEST(LlmQuantBits, Int8WordsDequantizeExactly) {
  std::mt19937 rng(8);
  for (int pos = 0; pos < 4; ++pos)
    for (uint32_t q = 0; q < 256; ++q)
      for (uint32_t z = 0; z < 256; z += (q % 7) + 1) {
        const uint32_t w = (rng() & ~(255u << (8 * pos))) | (q << (8 * pos));
        float got[4];
        dequant_word<8>(w, z, got);
        for (int k = 0; k < 4; ++k)
          ASSERT_EQ(got[k], static_cast<float>(static_cast<int>((w >> (8 * k)) & 255) - static_cast<int>(z)))
              << "word " << std::hex << w << std::dec << " k " << k << " z " << z;
      }
}

TEST(LlmQuantBits, XSlotsInvertPairPositions) {
  for (int j = 0; j < 4; ++j)
    for (int hi = 0; hi < 2; ++hi) EXPECT_EQ(qb::x_slot<4>(qb::pair_k<4>(j, hi)), 2 * j + hi);
  for (int j = 0; j < 2; ++j)
    for (int hi = 0; hi < 2; ++hi) EXPECT_EQ(qb::x_slot<8>(qb::pair_k<8>(j, hi)), 2 * j + hi);
}

template <int kBits>
void check_permute8() {
  constexpr int kPack = 32 / kBits;
  uint32_t in[4], out[4];
  for (int h = 0; h < 4; ++h) in[h] = static_cast<uint32_t>(2 * h) | static_cast<uint32_t>(2 * h + 1) << 16;  // k
  qb::permute8<kBits>(in, out);
  for (int k = 0; k < 8; ++k) {
    const int slot = k / kPack * kPack + qb::x_slot<kBits>(k % kPack);
    EXPECT_EQ((out[slot / 2] >> (16 * (slot % 2))) & 0xffff, static_cast<uint32_t>(k)) << "int" << kBits << " k " << k;
  }
}

TEST(LlmQuantBits, StagingPermutesLikeXSlot) {
  check_permute8<4>();
  check_permute8<8>();
}

// m16n8k16 as PTX defines its fragments (lane = 4 g + i): A[g][2i+h] in a[0], A[g+8][2i+h] in
// a[1], A[g][2i+8+h] in a[2], A[g+8][2i+8+h] in a[3]; B[2i+h][g] in b[0], B[2i+8+h][g] in b[1];
// D[g][2i+h] in c[h], D[g+8][2i+h] in c[2+h]. Half h: the low (0) or high (1) 16 bits.
void mma_emulated(const uint32_t (&a)[32][4], const uint32_t (&b)[32][2], float (&c)[32][4]) {
  double A[16][16], B[16][8];
  const auto half = [](uint32_t v, int h) { return static_cast<double>(h ? hi_half(v) : lo_half(v)); };
  for (int lane = 0; lane < 32; ++lane) {
    const int g = lane / 4, i = lane % 4;
    for (int h = 0; h < 2; ++h) {
      A[g][2 * i + h] = half(a[lane][0], h);
      A[g + 8][2 * i + h] = half(a[lane][1], h);
      A[g][2 * i + 8 + h] = half(a[lane][2], h);
      A[g + 8][2 * i + 8 + h] = half(a[lane][3], h);
      B[2 * i + h][g] = half(b[lane][0], h);
      B[2 * i + 8 + h][g] = half(b[lane][1], h);
    }
  }
  for (int lane = 0; lane < 32; ++lane) {
    const int g = lane / 4, i = lane % 4;
    for (int r = 0; r < 4; ++r) {
      const int row = g + 8 * (r / 2), col = 2 * i + r % 2;
      double d = 0;
      for (int kk = 0; kk < 16; ++kk) d += A[row][kk] * B[kk][col];
      c[lane][r] += static_cast<float>(d);
    }
  }
}

// One warp of gemv_quant_mma.cu's kernel over 32 columns, written after the kernel: K split into
// slices of `rps` packed rows (x staged per slice, permuted by x_slot), four-row steps, the group
// sums flushed with the group's scale, c-registers mapped back with col_of.
template <int kBits>
std::vector<double> warp_emulated(const std::vector<uint32_t>& qweight, const std::vector<uint32_t>& zeros,
                                  const std::vector<float>& scales, const std::vector<float>& x, int T, int K, int gs,
                                  int rps) {
  constexpr int kPack = 32 / kBits, kPairs = kPack / 2, N = 32;
  const int rows = K / kPack, ntiles = (T + 7) / 8;
  std::vector<double> y(static_cast<size_t>(T) * N, 0.0);
  for (int r0 = 0; r0 < rows; r0 += rps) {
    const int r1 = std::min(rows, r0 + rps), slice_k = (r1 - r0) * kPack, xstride = qb::x_stride<kBits>(rps * kPack);
    std::vector<uint16_t> xs(static_cast<size_t>(T) * xstride, 0);
    for (int t = 0; t < T; ++t)
      for (int k8 = 0; k8 < slice_k; k8 += 8) {  // 16 bytes at a time, as the kernel stages them
        uint32_t in[4], out[4];
        for (int h = 0; h < 4; ++h) {
          const size_t at = static_cast<size_t>(t * K + r0 * kPack + k8 + 2 * h);
          in[h] = Half::from_float(x[at]) | static_cast<uint32_t>(Half::from_float(x[at + 1])) << 16;
        }
        qb::permute8<kBits>(in, out);
        for (int h = 0; h < 4; ++h) {
          xs[static_cast<size_t>(t * xstride + k8 + 2 * h)] = static_cast<uint16_t>(out[h] & 0xffff);
          xs[static_cast<size_t>(t * xstride + k8 + 2 * h + 1)] = static_cast<uint16_t>(out[h] >> 16);
        }
      }
    std::vector<float> acc(32 * 2 * 2 * 4, 0.0f), grp(acc.size(), 0.0f), s(32 * 4, 0.0f);
    const auto at = [](int lane, int tt, int nt, int r) { return static_cast<size_t>(((lane * 2 + tt) * 2 + nt) * 4 + r); };
    const auto flush = [&] {
      for (int lane = 0; lane < 32; ++lane)
        for (int tt = 0; tt < 2; ++tt)
          for (int nt = 0; nt < ntiles; ++nt)
            for (int r = 0; r < 4; ++r) {
              acc[at(lane, tt, nt, r)] += s[static_cast<size_t>(lane * 4 + 2 * tt + r / 2)] * grp[at(lane, tt, nt, r)];
              grp[at(lane, tt, nt, r)] = 0.0f;
            }
    };
    // Groups as the kernel tracks them: the slice's first, then a count of steps left in it.
    const int spg = gs / (qb::kStepRows * kPack);
    int group = r0 / qb::kStepRows / spg, left = spg - (r0 / qb::kStepRows) % spg;
    const auto load_group = [&] {
      for (int lane = 0; lane < 32; ++lane)
        for (int c = 0; c < 4; ++c) s[static_cast<size_t>(lane * 4 + c)] = scales[static_cast<size_t>(group * N + 4 * (lane / 4) + c)];
    };
    load_group();
    for (int rr = r0; rr < r1; rr += qb::kStepRows) {
      if (left == 0) {
        flush();
        ++group;
        left = spg;
        load_group();
      }
      --left;
      uint32_t q[32][4][4] = {}, b[32][2][4] = {};
      for (int lane = 0; lane < 32; ++lane) {
        const int g = lane / 4, i = lane % 4;
        for (int c = 0; c < 4; ++c) {
          const int col = 4 * g + c;
          const uint32_t z = zeros[static_cast<size_t>(group * N + col)];
          float v[kPack];
          dequant_word<kBits>(qweight[static_cast<size_t>((rr + i) * N + col)], z, v);
          for (int j = 0; j < kPairs; ++j)
            q[lane][c][j] = Half::from_float(v[qb::pair_k<kBits>(j, 0)]) |
                            static_cast<uint32_t>(Half::from_float(v[qb::pair_k<kBits>(j, 1)])) << 16;
        }
        for (int nt = 0; nt < ntiles; ++nt) {
          const int tok = 8 * nt + g;
          if (tok >= T) continue;
          const uint16_t* p = xs.data() + tok * xstride + (rr - r0 + i) * kPack;
          for (int j = 0; j < kPairs; ++j) b[lane][nt][j] = p[2 * j] | static_cast<uint32_t>(p[2 * j + 1]) << 16;
        }
      }
      for (int tt = 0; tt < 2; ++tt)
        for (int m = 0; m < kPairs / 2; ++m)
          for (int nt = 0; nt < ntiles; ++nt) {
            uint32_t a[32][4], bb[32][2];
            float c[32][4];
            for (int lane = 0; lane < 32; ++lane) {
              qb::a_frag(q[lane], tt, m, a[lane]);
              bb[lane][0] = b[lane][nt][2 * m];
              bb[lane][1] = b[lane][nt][2 * m + 1];
              for (int r = 0; r < 4; ++r) c[lane][r] = grp[at(lane, tt, nt, r)];
            }
            mma_emulated(a, bb, c);
            for (int lane = 0; lane < 32; ++lane)
              for (int r = 0; r < 4; ++r) grp[at(lane, tt, nt, r)] = c[lane][r];
          }
    }
    flush();
    for (int lane = 0; lane < 32; ++lane)
      for (int tt = 0; tt < 2; ++tt)
        for (int nt = 0; nt < ntiles; ++nt)
          for (int r = 0; r < 4; ++r) {
            const int tok = 8 * nt + 2 * (lane % 4) + r % 2;
            if (tok < T) y[static_cast<size_t>(tok * N + qb::col_of(lane / 4, tt, r / 2))] += acc[at(lane, tt, nt, r)];
          }
  }
  return y;
}

template <int kBits>
void check_warp(int K, int gs, int rps, int T, std::mt19937& rng) {
  constexpr int kPack = 32 / kBits, N = 32;
  const uint32_t mask = (1u << kBits) - 1;
  std::vector<uint32_t> codes(static_cast<size_t>(N) * K), qweight(static_cast<size_t>(K / kPack) * N, 0),
      zeros(static_cast<size_t>(K / gs) * N);
  for (auto& v : codes) v = rng() & mask;
  for (auto& v : zeros) v = rng() & mask;
  std::vector<float> scales(zeros.size()), x(static_cast<size_t>(T) * K);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (auto& v : scales) v = Half::to_float(Half::from_float(0.01f + 0.02f * std::fabs(u(rng))));
  for (auto& v : x) v = Half::to_float(Half::from_float(u(rng)));
  for (int n = 0; n < N; ++n)
    for (int k = 0; k < K; ++k)
      qweight[static_cast<size_t>((k / kPack) * N + n)] |= codes[static_cast<size_t>(n * K + k)] << (kBits * (k % kPack));
  const auto y = warp_emulated<kBits>(qweight, zeros, scales, x, T, K, gs, rps);
  for (int t = 0; t < T; ++t)
    for (int n = 0; n < N; ++n) {
      double want = 0, mag = 0;
      for (int k = 0; k < K; ++k) {
        const size_t g = static_cast<size_t>(k / gs * N + n);
        const double w = scales[g] * (static_cast<double>(codes[static_cast<size_t>(n * K + k)]) - zeros[g]);
        want += x[static_cast<size_t>(t * K + k)] * w;
        mag += std::fabs(x[static_cast<size_t>(t * K + k)] * w);
      }
      // The emulation sums in float: a wrong index is off by ~mag / sqrt(K), not 1e-5 of it.
      ASSERT_NEAR(y[static_cast<size_t>(t * N + n)], want, 1e-5 * mag + 1e-6)
          << "int" << kBits << " K " << K << " group " << gs << " rows/slice " << rps << " T " << T << " t " << t
          << " n " << n;
    }
}

TEST(LlmQuantBits, WarpOfTheMmaKernelMatchesTheProduct) {
  std::mt19937 rng(9);
  for (int T : {1, 2, 3, 8, 9, 16}) {
    check_warp<4>(256, 32, 8, T, rng);    // one group per step, slices of two groups
    check_warp<4>(256, 128, 12, T, rng);  // slices that end inside a group
    check_warp<8>(128, 16, 4, T, rng);
    check_warp<8>(192, 64, 20, T, rng);
  }
}

}  // namespace
}  // namespace gpuopt::llm
