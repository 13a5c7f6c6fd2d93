// Host-side logic of the elementwise and layout fast paths, no GPU needed: magic-number
// division against `/` and `%`, the path chosen per broadcast pattern and alignment, and the
// kernels' own index functions (the same inline code the device runs) replayed on the host
// against plain 64-bit reference index math.
#include "ops/elementwise/cuda/elementwise_plan.h"
#include "ops/tensor/cuda/layout_plan.h"

#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <random>

namespace gpuopt::cuda {
namespace {

TEST(FastDivmod, MatchesIntegerDivisionOverTheWholeRange) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<uint32_t> any(0, static_cast<uint32_t>(kMax32));
  std::vector<uint32_t> divisors;
  for (uint32_t d = 1; d <= 3000; ++d) divisors.push_back(d);
  for (int s = 12; s <= 31; ++s) {
    const uint32_t p = 1u << s;
    divisors.insert(divisors.end(), {p - 1, p, p / 3 * 2 + 1});
    if (s < 31) divisors.push_back(p + 1);
  }
  divisors.insert(divisors.end(), {768, 3072, 4096 * 768, 65535, 1000003, 2147483647u});
  for (uint32_t d : divisors) {
    const FastDivmod f(d);
    std::vector<uint32_t> ns = {0,
                                1,
                                d - 1,
                                d,
                                d + 1,
                                2 * d - 1,
                                2 * d,
                                static_cast<uint32_t>(kMax32),
                                static_cast<uint32_t>(kMax32) - 1,
                                static_cast<uint32_t>(kMax32 / d * d),
                                static_cast<uint32_t>(kMax32 / d * d - 1)};
    for (int i = 0; i < 200; ++i) ns.push_back(any(rng));
    for (uint32_t n : ns) {
      if (n > static_cast<uint32_t>(kMax32)) continue;
      uint32_t q, r;
      f.divmod(n, &q, &r);
      ASSERT_EQ(q, n / d) << n << " / " << d;
      ASSERT_EQ(r, n % d) << n << " % " << d;
    }
  }
}

TEST(FastDivmod, ZeroDivisorIsTreatedAsOne) {
  const FastDivmod f(0);
  EXPECT_EQ(f.divisor, 1u);
  EXPECT_EQ(f.div(12345), 12345u);
}

TEST(VecWidth, SixteenBytesAtMostEightElements) {
  EXPECT_EQ(vec_width(4), 4);
  EXPECT_EQ(vec_width(2), 8);
  EXPECT_EQ(vec_width(8), 2);
  EXPECT_EQ(vec_width(1), 8);
}

// Fake device addresses: only their alignment matters to the plan.
const void* at(uintptr_t a) {
  return reinterpret_cast<const void*>(a);
}
const void *kA = at(0x10000), *kB = at(0x20000), *kY = at(0x30000);

BinaryPlan plan(const Shape& a, const Shape& b, size_t in = 2, size_t out = 2, const void* pa = kA, const void* pb = kB,
                const void* py = kY) {
  auto d = make_broadcast(a, b);
  EXPECT_TRUE(d.ok());
  return plan_binary(*d, in, out, pa, pb, py);
}

// 64-bit reference offsets straight from the broadcast descriptor.
void reference_offsets(const BroadcastDesc& d, int64_t i, int64_t* ia, int64_t* ib) {
  *ia = *ib = 0;
  for (int k = d.rank - 1; k >= 0; --k) {
    const int64_t c = i % d.out_dims[k];
    i /= d.out_dims[k];
    *ia += c * d.a_strides[k];
    *ib += c * d.b_strides[k];
  }
}

TEST(PlanBinary, PicksTheFastPathOfEachPattern) {
  BinaryPlan p = plan({32, 128, 768}, {32, 128, 768});
  EXPECT_EQ(p.path, BinaryPath::kVector);
  EXPECT_EQ(p.mode, VecMode::kSame);
  EXPECT_EQ(p.vec, 8);

  p = plan({32, 128, 768}, {768});  // bias: contiguous row, vector loads of the bias too
  EXPECT_EQ(p.path, BinaryPath::kVector);
  EXPECT_EQ(p.mode, VecMode::kMidB);
  EXPECT_EQ(p.mid, 768);
  EXPECT_EQ(p.inner, 1);
  EXPECT_TRUE(p.small_vector);

  p = plan({768}, {32, 128, 768});  // the mirror
  EXPECT_EQ(p.mode, VecMode::kMidA);
  EXPECT_TRUE(p.small_vector);

  p = plan({32, 128, 768}, {32, 128, 1});  // LayerNorm's mean: one element per vector
  EXPECT_EQ(p.path, BinaryPath::kVector);
  EXPECT_EQ(p.mode, VecMode::kMidB);
  EXPECT_EQ(p.mid, 32 * 128);
  EXPECT_EQ(p.inner, 768);
  EXPECT_FALSE(p.small_vector);

  p = plan({3, 8, 5, 16}, {8, 1, 1}, 4, 4);  // channel bias, f32
  EXPECT_EQ(p.path, BinaryPath::kVector);
  EXPECT_EQ(p.mid, 8);
  EXPECT_EQ(p.inner, 80);

  p = plan({5, 7, 11, 13}, {});
  EXPECT_EQ(p.mode, VecMode::kScalarB);
  p = plan({1}, {5, 7, 11, 13});
  EXPECT_EQ(p.path, BinaryPath::kVector);
  EXPECT_EQ(p.mode, VecMode::kScalarA);

  p = plan({5, 7, 11, 13}, {5, 7, 11, 13}, 1, 1);  // odd numel: vector path plus tail
  EXPECT_EQ(p.path, BinaryPath::kVector);
  EXPECT_EQ(p.vec, 8);
}

TEST(PlanBinary, VectorisesAnyBroadcastOfWholeInnermostVectors) {
  BinaryPlan p = plan({32, 12, 128, 128}, {32, 1, 1, 128});  // BERT's attention mask
  EXPECT_EQ(p.path, BinaryPath::kVector);
  EXPECT_EQ(p.mode, VecMode::kBroadcast);
  EXPECT_TRUE(p.a_vector);
  EXPECT_TRUE(p.b_vector);
  p = plan({6, 1, 32}, {5, 1});  // both broadcast; b one element per vector
  EXPECT_EQ(p.mode, VecMode::kBroadcast);
  EXPECT_TRUE(p.a_vector);
  EXPECT_FALSE(p.b_vector);
  EXPECT_EQ(plan({32, 12, 128, 128}, {32, 1, 1, 128}, 2, 2, kA, at(0x20004)).path, BinaryPath::kGeneral32);
}

// kBroadcast: the offsets the kernel computes once per vector, plus 0..V-1 for a vector operand
// or nothing for a repeated element, are the reference offsets of each element.
TEST(PlanBinary, BroadcastVectorOffsetsMatchReference) {
  const std::pair<Shape, Shape> cases[] = {{{4, 3, 8, 16}, {4, 1, 1, 16}},
                                           {{6, 1, 32}, {5, 1}},
                                           {{5, 1, 11, 16}, {7, 1, 16}},
                                           {{2, 1, 8}, {1, 3, 1}},
                                           {{3, 1, 2, 8}, {1, 4, 2, 1}}};
  for (const auto& [as, bs] : cases) {
    auto d = make_broadcast(as, bs);
    ASSERT_TRUE(d.ok());
    const BinaryPlan p = plan_binary(*d, 2, 2, kA, kB, kY);
    ASSERT_EQ(p.mode, VecMode::kBroadcast) << shape_to_string(as) << " " << shape_to_string(bs) << ": " << p.why;
    ASSERT_EQ(d->numel % p.vec, 0);
    const Index32 g = make_index32(p.shape);
    for (int64_t i = 0; i < d->numel; i += p.vec) {
      uint32_t ia, ib;
      index32_offsets(g, static_cast<uint32_t>(i), &ia, &ib);
      if (p.a_vector) { ASSERT_EQ(ia % p.vec, 0u); }  // aligned vector loads
      if (p.b_vector) { ASSERT_EQ(ib % p.vec, 0u); }
      for (int e = 0; e < p.vec; ++e) {
        int64_t ra, rb;
        reference_offsets(*d, i + e, &ra, &rb);
        ASSERT_EQ(ia + (p.a_vector ? e : 0), ra)
            << shape_to_string(as) << " " << shape_to_string(bs) << " element " << i + e;
        ASSERT_EQ(ib + (p.b_vector ? e : 0), rb)
            << shape_to_string(as) << " " << shape_to_string(bs) << " element " << i + e;
      }
    }
  }
}

TEST(PlanBinary, FallsBackToGeneral32WhenVectorsDoNotFit) {
  EXPECT_EQ(plan({5, 7, 11, 13}, {13}, 4, 4).path, BinaryPath::kGeneral32);        // 13 % 4
  EXPECT_EQ(plan({5, 7, 11, 13}, {11, 1}, 4, 4).path, BinaryPath::kGeneral32);     // inner 13
  EXPECT_EQ(plan({5, 1, 11, 13}, {7, 1, 13}, 4, 4).path, BinaryPath::kGeneral32);  // both broadcast
  // Misaligned operands, output (bool output of an f16 comparison needs 8-byte alignment).
  EXPECT_EQ(plan({64, 64}, {64, 64}, 2, 2, at(0x10002)).path, BinaryPath::kGeneral32);
  EXPECT_EQ(plan({64, 64}, {64, 64}, 2, 2, kA, at(0x20008)).path, BinaryPath::kGeneral32);
  EXPECT_EQ(plan({64, 64}, {64, 64}, 2, 1, kA, kB, at(0x30004)).path, BinaryPath::kGeneral32);
  EXPECT_EQ(plan({64, 64}, {64, 64}, 2, 1, kA, kB, at(0x30008)).path, BinaryPath::kVector);
  // A misaligned bias row can still be one element per vector, but not a vector load.
  EXPECT_EQ(plan({64, 64}, {64}, 2, 2, kA, at(0x20002)).path, BinaryPath::kGeneral32);
  // A misaligned scalar is fine: it is read one element at a time.
  EXPECT_EQ(plan({64, 64}, {}, 2, 2, kA, at(0x20002)).path, BinaryPath::kVector);
  // 2^31 elements: the 64-bit kernel.
  EXPECT_EQ(plan({int64_t{1} << 31}, {int64_t{1} << 31}).path, BinaryPath::kGeneral64);
  EXPECT_EQ(plan({int64_t{1} << 16, int64_t{1} << 15}, {1}).path, BinaryPath::kGeneral64);
}

TEST(PlanBinary, IndexMathMatchesReferenceForEveryElement) {
  const std::pair<Shape, Shape> cases[] = {
      {{5, 7, 11, 13}, {11, 1}},
      {{5, 1, 11, 13}, {7, 1, 13}},
      {{3, 1, 8}, {1, 4, 1}},
      {{2, 3, 4, 5, 6}, {3, 1, 5, 1}},
      {{1, 9, 1, 7}, {4, 1, 1, 1}},
      {{6, 1}, {1, 5}},
      {{5, 7, 11, 13}, {}},
      {{17}, {1}},
      {{2, 1, 3, 1, 2, 1, 2, 3}, {1, 5, 1, 2, 1, 2, 1, 3}},
  };
  for (const auto& [as, bs] : cases) {
    auto d = make_broadcast(as, bs);
    ASSERT_TRUE(d.ok());
    const CollapsedBroadcast c = collapse_broadcast(*d);
    const Index32 g = make_index32(c);
    for (int64_t i = 0; i < d->numel; ++i) {
      int64_t ra, rb;
      reference_offsets(*d, i, &ra, &rb);
      uint32_t ia, ib;
      index32_offsets(g, static_cast<uint32_t>(i), &ia, &ib);
      ASSERT_EQ(ia, ra) << shape_to_string(as) << " " << shape_to_string(bs) << " element " << i;
      ASSERT_EQ(ib, rb) << shape_to_string(as) << " " << shape_to_string(bs) << " element " << i;
    }
  }
}

TEST(PlanBinary, MidIndexMatchesReference) {
  const std::pair<Shape, Shape> cases[] = {{{32, 16, 24}, {24}},
                                           {{32, 16, 24}, {32, 16, 1}},
                                           {{3, 8, 5, 16}, {8, 1, 1}},
                                           {{4, 6, 8}, {6, 8}},
                                           {{24}, {4, 6, 24}}};
  for (const auto& [as, bs] : cases) {
    auto d = make_broadcast(as, bs);
    ASSERT_TRUE(d.ok());
    const BinaryPlan p = plan_binary(*d, 2, 2, kA, kB, kY);
    ASSERT_EQ(p.path, BinaryPath::kVector) << shape_to_string(as) << " " << shape_to_string(bs) << ": " << p.why;
    const bool small_is_a = p.mode == VecMode::kMidA;
    const FastDivmod inner(static_cast<uint32_t>(p.inner)), mid(static_cast<uint32_t>(p.mid));
    for (int64_t i = 0; i < d->numel; ++i) {
      int64_t ra, rb;
      reference_offsets(*d, i, &ra, &rb);
      ASSERT_EQ(mid_index(inner, mid, static_cast<uint32_t>(i)), small_is_a ? ra : rb) << "element " << i;
    }
  }
}

// Reference transpose of `in` (element = its flat index) into a vector, 64-bit math.
std::vector<int64_t> reference_transpose(const Shape& in, const std::vector<int64_t>& perm) {
  const int r = static_cast<int>(in.size());
  const auto st = shape_strides(in);
  Shape out(in.size());
  for (int q = 0; q < r; ++q) out[q] = in[perm[q]];
  std::vector<int64_t> y(static_cast<size_t>(shape_numel(in)));
  for (int64_t i = 0; i < static_cast<int64_t>(y.size()); ++i) {
    int64_t rem = i, off = 0;
    for (int q = r - 1; q >= 0; --q) {
      off += (rem % out[q]) * st[perm[q]];
      rem /= out[q];
    }
    y[static_cast<size_t>(i)] = off;
  }
  return y;
}

// Replays the kernel of the plan's kind through its index functions on flat-index data.
std::vector<int64_t> replay(const TransposePlan& p, size_t es) {
  std::vector<int64_t> in(static_cast<size_t>(p.numel)), out(in.size(), -1);
  std::iota(in.begin(), in.end(), 0);
  switch (p.kind) {
    case TransposeKind::kCopy:
      out = in;
      break;
    case TransposeKind::kRows: {
      // Chunks of w bytes over elements of es bytes: element e of chunk j is element j*ce + e.
      const int w = row_chunk_bytes(es, p.dims[p.rank - 1], at(0x10000), at(0x20000));
      const int64_t ce = w / static_cast<int64_t>(es);
      const RowsArgs g = make_rows(p, es, w);
      EXPECT_EQ(static_cast<int64_t>(g.chunks) * ce, p.numel);
      for (uint32_t j = 0; j < g.chunks; ++j)
        for (int64_t e = 0; e < ce; ++e)
          out[static_cast<size_t>(j * ce + e)] = in[static_cast<size_t>(rows_source(g, j) * ce + e)];
      break;
    }
    case TransposeKind::kTiled: {
      const TileArgs g = make_tiles(p);
      EXPECT_EQ(static_cast<int64_t>(g.batch) * g.m * g.n, p.numel);
      for (uint32_t b = 0; b < g.batch; ++b) {
        uint32_t ib, ob;
        tile_batch_offsets(g, b, &ib, &ob);
        for (uint32_t m = 0; m < g.m; ++m)
          for (uint32_t n = 0; n < g.n; ++n) out[ob + n * g.out_col_stride + m] = in[ib + m * g.in_row_stride + n];
      }
      break;
    }
    case TransposeKind::kInterleave: {
      const SmallSideArgs g = make_small_side(p, es, 16);
      EXPECT_EQ(static_cast<int64_t>(g.batch) * g.m * g.n, p.numel);
      for (uint32_t b = 0; b < g.batch; ++b)
        for (uint32_t r = 0; r < g.m; ++r)
          for (uint32_t j = 0; j < g.n; ++j) out[(b * g.n + j) * g.m + r] = in[(b * g.m + r) * g.n + j];
      break;
    }
    case TransposeKind::kGeneral: {
      const StridedDesc c = collapse_strided(transpose_as_strided(p));
      EXPECT_TRUE(strided_fits_32(c));
      const Strided32 g = make_strided32(c);
      for (uint32_t i = 0; i < g.n; ++i) out[i] = in[static_cast<size_t>(strided32_offset(g, i))];
      break;
    }
  }
  return out;
}

struct TransposeCase {
  Shape shape;
  std::vector<int64_t> perm;
  TransposeKind kind;
};

TEST(PlanTranspose, EveryKindMatchesTheReference) {
  const TransposeCase cases[] = {
      {{32, 128, 12, 64}, {0, 2, 1, 3}, TransposeKind::kRows},  // BERT's heads
      {{3, 5, 7, 13}, {0, 2, 1, 3}, TransposeKind::kRows},      // odd rows: narrow chunks
      {{2, 3, 4, 5, 6}, {1, 0, 3, 2, 4}, TransposeKind::kRows},
      {{4, 12, 32, 16}, {0, 1, 3, 2}, TransposeKind::kTiled},  // K^T: batch axes merge
      {{33, 65}, {1, 0}, TransposeKind::kTiled},               // partial tiles
      {{5, 9, 11, 13}, {0, 2, 3, 1}, TransposeKind::kTiled},
      {{9, 10, 11, 12}, {3, 1, 0, 2}, TransposeKind::kTiled},   // two batch axes in swapped order
      {{128, 2, 2, 2}, {3, 2, 1, 0}, TransposeKind::kGeneral},  // sides of 2: strided copy
      {{1, 5, 1, 7}, {3, 2, 1, 0}, TransposeKind::kInterleave}, // size-1 axes dropped: [5,7] -> [7,5]
      {{2, 3, 8, 16}, {0, 2, 3, 1}, TransposeKind::kInterleave},  // NCHW -> NHWC, C=3
      {{3, 7, 40}, {0, 2, 1}, TransposeKind::kInterleave},
      {{2, 3, 4}, {0, 2, 1}, TransposeKind::kInterleave},         // a short plane too
      {{2, 9, 4}, {0, 2, 1}, TransposeKind::kGeneral},            // 9 rows: past the interleave, a tile side of 4
      {{2, 3, 4, 5}, {0, 3, 2, 1}, TransposeKind::kGeneral},      // more than the last two axes move
      {{6, 1, 4}, {1, 0, 2}, TransposeKind::kCopy},             // only a size-1 axis moves
      {{3, 4, 5}, {0, 1, 2}, TransposeKind::kCopy},
      {{2, 3, 4}, {}, TransposeKind::kGeneral},  // empty perm: reverse
  };
  for (const TransposeCase& tc : cases) {
    const TransposePlan p = plan_transpose(tc.shape, tc.perm);
    std::vector<int64_t> perm = tc.perm;
    if (perm.empty())
      for (int i = static_cast<int>(tc.shape.size()) - 1; i >= 0; --i) perm.push_back(i);
    const std::string what = shape_to_string(tc.shape) + " perm " + std::to_string(perm[0]) + "...: " + p.why;
    EXPECT_EQ(p.kind, tc.kind) << what;
    const auto want = reference_transpose(tc.shape, perm);
    for (size_t es : {1, 2, 4, 8}) EXPECT_EQ(replay(p, es), want) << what << " es " << es;
  }
}

TEST(PlanTranspose, CollapsesBertHeadsAndKeyTranspose) {
  TransposePlan p = plan_transpose({32, 12, 128, 64}, {0, 1, 3, 2});
  ASSERT_EQ(p.kind, TransposeKind::kTiled);
  EXPECT_EQ(p.rank, 3);  // [384, 128, 64] perm [0, 2, 1]
  EXPECT_EQ(p.dims[0], 384);
  const TileArgs g = make_tiles(p);
  EXPECT_EQ(g.m, 128u);
  EXPECT_EQ(g.n, 64u);
  EXPECT_EQ(g.batch, 384u);
  p = plan_transpose({32, 128, 12, 64}, {0, 2, 1, 3});
  ASSERT_EQ(p.kind, TransposeKind::kRows);
  EXPECT_EQ(row_chunk_bytes(2, 64, at(0x10000), at(0x20000)), 16);  // 128-byte rows, 16-byte accesses
  EXPECT_EQ(row_chunk_bytes(2, 13, at(0x10000), at(0x20000)), 2);   // 26-byte rows
  EXPECT_EQ(row_chunk_bytes(2, 64, at(0x10004), at(0x20000)), 4);   // alignment limits the width
  EXPECT_EQ(row_chunk_bytes(8, 3, at(0x10000), at(0x20000)), 8);    // never below the element
}

TEST(StridedCopy, CollapseAndFitKeepEveryOffset) {
  StridedDesc d;  // Slice with a negative step on axis 1 and Expand-style zero stride on axis 2
  d.rank = 4;
  const int64_t dims[] = {3, 4, 5, 6}, strides[] = {240, -12, 0, 1};
  d.numel = 3 * 4 * 5 * 6;
  d.in_offset = 36;
  for (int k = 0; k < 4; ++k) {
    d.out_dims[k] = dims[k];
    d.in_strides[k] = strides[k];
  }
  ASSERT_TRUE(strided_fits_32(d));
  const StridedDesc c = collapse_strided(d);
  const Strided32 g = make_strided32(c);
  for (int64_t i = 0; i < d.numel; ++i) {
    int64_t rem = i, off = d.in_offset;
    for (int k = 3; k >= 0; --k) {
      off += (rem % dims[k]) * strides[k];
      rem /= dims[k];
    }
    ASSERT_EQ(strided32_offset(g, static_cast<uint32_t>(i)), off) << i;
  }
  StridedDesc big = d;
  big.in_strides[0] = int64_t{1} << 30;  // offsets past 2^31: the 64-bit kernel
  EXPECT_FALSE(strided_fits_32(big));
  StridedDesc bcast;  // Expand [1, 7] -> [5, 7]: merges to nothing but the 7
  bcast.rank = 2;
  bcast.numel = 35;
  bcast.out_dims[0] = 5;
  bcast.out_dims[1] = 7;
  bcast.in_strides[1] = 1;
  EXPECT_EQ(collapse_strided(bcast).rank, 2);
}

// Numpy broadcast offset of output element i in an operand of shape s.
int64_t broadcast_offset(const Shape& out, const Shape& s, int64_t i) {
  const int r = static_cast<int>(out.size());
  int64_t off = 0, run = 1;
  for (int k = r - 1; k >= 0; --k) {
    const int ks = k - (r - static_cast<int>(s.size()));
    const int64_t d = ks >= 0 ? s[ks] : 1;
    const int64_t c = i % out[k];
    i /= out[k];
    if (d != 1) off += c * run;
    run *= d;
  }
  return off;
}

TEST(Where32, OffsetsMatchReference) {
  struct W {
    Shape out, c, a, b;
  };
  const W cases[] = {{{5, 7, 11, 13}, {7, 1, 13}, {5, 7, 11, 13}, {11, 13}},
                     {{32, 12, 128, 128}, {32, 1, 1, 128}, {}, {32, 12, 128, 128}},
                     {{4, 1, 6}, {4, 1, 6}, {1}, {6}},
                     {{2, 3, 4, 5, 6, 7}, {3, 1, 5, 1, 7}, {2, 1, 4, 1, 6, 1}, {}}};
  for (const W& w : cases) {
    const Where32 g = make_where32(w.out, w.c, w.a, w.b);
    const int64_t n = shape_numel(w.out);
    ASSERT_EQ(g.n, static_cast<uint32_t>(n));
    const int64_t step = n > 200000 ? 997 : 1;  // the attention-size case: a sample
    for (int64_t i = 0; i < n; i += step) {
      uint32_t oc, oa, ob;
      where32_offsets(g, static_cast<uint32_t>(i), &oc, &oa, &ob);
      ASSERT_EQ(oc, broadcast_offset(w.out, w.c, i)) << shape_to_string(w.out) << " element " << i;
      ASSERT_EQ(oa, broadcast_offset(w.out, w.a, i)) << shape_to_string(w.out) << " element " << i;
      ASSERT_EQ(ob, broadcast_offset(w.out, w.b, i)) << shape_to_string(w.out) << " element " << i;
    }
  }
}

// Gather32: the chunk split replayed on flat-index data against a plain gather.
TEST(Gather32, ChunkSplitMatchesPlainGather) {
  struct G {
    int64_t outer, axis_dim, inner, es;
    std::vector<int64_t> idx;
  };
  const G cases[] = {{1, 50, 768, 2, {3, 49, 0, 7, 7}},
                     {4, 9, 13, 4, {8, 0, 2}},
                     {6, 5, 1, 8, {4, 1, 0, 3, 2, 2}},
                     {2, 30, 24, 1, {29, 11}}};
  for (const G& t : cases) {
    const int w = row_chunk_bytes(static_cast<size_t>(t.es), t.inner, at(0x10000), at(0x20000));
    const int64_t per = w / t.es, nidx = static_cast<int64_t>(t.idx.size());
    Gather32 g;
    g.total = static_cast<uint32_t>(t.outer * nidx * t.inner / per);
    g.inner = FastDivmod(static_cast<uint32_t>(t.inner / per));
    g.nidx = FastDivmod(static_cast<uint32_t>(nidx));
    g.axis_dim = static_cast<uint32_t>(t.axis_dim);
    std::vector<int64_t> got(static_cast<size_t>(t.outer * nidx * t.inner)), want(got.size());
    for (uint32_t i = 0; i < g.total; ++i) {
      uint32_t o, j, c;
      gather32_split(g, i, &o, &j, &c);
      const int64_t src = (o * t.axis_dim + t.idx[j]) * (t.inner / per) + c;
      for (int64_t e = 0; e < per; ++e) got[static_cast<size_t>(i * per + e)] = src * per + e;
    }
    for (int64_t o = 0, y = 0; o < t.outer; ++o)
      for (int64_t j = 0; j < nidx; ++j)
        for (int64_t e = 0; e < t.inner; ++e, ++y)
          want[static_cast<size_t>(y)] = (o * t.axis_dim + t.idx[j]) * t.inner + e;
    EXPECT_EQ(got, want) << "inner " << t.inner << " es " << t.es << " chunk " << w;
  }
}

}  // namespace
}  // namespace gpuopt::cuda
