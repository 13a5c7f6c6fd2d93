// The channels-last max pool's plan and per-thread code (ops/pool/cuda/maxpool_nhwc*.h) and the
// small-channel transpose's plan (ops/tensor/cuda/layout_plan.h), on the host: no GPU needed.
// The pool's thread function is the kernel's own body, replayed here for every thread index over
// f32 data against a plain loop over the window (the CPU reference's rule: padded taps left out).
#include "ops/pool/cuda/maxpool_nhwc.h"
#include "ops/pool/cuda/maxpool_nhwc_thread.h"
#include "ops/tensor/cuda/layout_plan.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

namespace gpuopt::cuda {
namespace {

MaxPoolNhwcArgs args(Shape x, int64_t k, int64_t s, int64_t p, int64_t oh, int64_t ow) {
  return {x[0], x[1], x[2], x[3], oh, ow, k, k, s, s, p, p, 1, 1};
}

TEST(MaxPoolNhwcPlan, PicksTheColumnLoopAndVectorWidth) {
  // ResNet-50's stem pool at batch 256: 8 f16 channels per access, 4 outputs per thread.
  MaxPoolNhwcPlan p = plan_maxpool_nhwc(args({256, 112, 112, 64}, 3, 2, 1, 56, 56), 2, 16);
  ASSERT_TRUE(p.ok) << p.why;
  EXPECT_EQ(p.cols, MaxPoolCols::kK3S2);
  EXPECT_EQ(p.vec_bytes, 16);
  EXPECT_EQ(p.outs, 4);
  EXPECT_EQ(p.vecs, 8u);
  EXPECT_EQ(p.groups, 14u);
  EXPECT_EQ(p.threads, 256u * 56 * 14 * 8);
  EXPECT_EQ(plan_maxpool_nhwc(args({2, 8, 8, 16}, 2, 2, 0, 4, 4), 4, 16).cols, MaxPoolCols::kK2S2);
  EXPECT_EQ(plan_maxpool_nhwc(args({2, 8, 8, 16}, 3, 1, 1, 8, 8), 2, 16).cols, MaxPoolCols::kK3S1);
  // C not a multiple of 8 (f16): narrower vectors, the general loop.
  p = plan_maxpool_nhwc(args({2, 9, 11, 12}, 3, 2, 1, 5, 6), 2, 16);
  EXPECT_EQ(p.vec_bytes, 8);
  EXPECT_EQ(p.cols, MaxPoolCols::kGeneral);
  EXPECT_EQ(p.outs, 1);
  EXPECT_EQ(plan_maxpool_nhwc(args({2, 9, 11, 6}, 3, 2, 1, 5, 6), 2, 16).vec_bytes, 4);
  EXPECT_EQ(plan_maxpool_nhwc(args({2, 9, 11, 3}, 3, 2, 1, 5, 6), 2, 16).vec_bytes, 2);
  EXPECT_EQ(plan_maxpool_nhwc(args({2, 9, 11, 3}, 3, 2, 1, 5, 6), 4, 16).vec_bytes, 4);
  // Pointers aligned to 8 only: 8-byte accesses.
  EXPECT_EQ(plan_maxpool_nhwc(args({2, 8, 8, 64}, 3, 2, 1, 4, 4), 2, 8).vec_bytes, 8);
  // Dilation and other widths take the general loop.
  MaxPoolNhwcArgs dil = args({2, 9, 11, 16}, 3, 1, 2, 9, 11);
  dil.dw = 2;
  EXPECT_EQ(plan_maxpool_nhwc(dil, 2, 16).cols, MaxPoolCols::kGeneral);
  EXPECT_EQ(plan_maxpool_nhwc(args({1, 12, 12, 16}, 5, 3, 2, 4, 4), 2, 16).cols, MaxPoolCols::kGeneral);
  // Past 2^31 threads: not this kernel.
  EXPECT_FALSE(plan_maxpool_nhwc(args({4096, 1024, 1024, 8}, 1, 1, 0, 1024, 1024), 4, 16).ok);
}

TEST(MaxPoolNhwcPlan, CommonAlignment) {
  alignas(16) static char buf[64];
  EXPECT_EQ(common_alignment(buf, buf + 32), 16);
  EXPECT_EQ(common_alignment(buf + 8, buf + 32), 8);
  EXPECT_EQ(common_alignment(buf, buf + 2), 2);
  EXPECT_EQ(common_alignment(buf + 1, buf), 1);
}

// A plain max over the in-bounds taps of each window: [n, h, w, c] -> [n, oh, ow, c].
std::vector<float> reference(const std::vector<float>& x, const MaxPoolNhwcArgs& a) {
  std::vector<float> y(static_cast<size_t>(a.n * a.oh * a.ow * a.c));
  for (int64_t n = 0; n < a.n; ++n)
    for (int64_t oy = 0; oy < a.oh; ++oy)
      for (int64_t ox = 0; ox < a.ow; ++ox)
        for (int64_t c = 0; c < a.c; ++c) {
          float best = -std::numeric_limits<float>::infinity();
          for (int64_t ky = 0; ky < a.kh; ++ky)
            for (int64_t kx = 0; kx < a.kw; ++kx) {
              const int64_t iy = oy * a.sh - a.ph + ky * a.dh, ix = ox * a.sw - a.pw + kx * a.dw;
              if (iy >= 0 && iy < a.h && ix >= 0 && ix < a.w)
                best = std::max(best, x[static_cast<size_t>(((n * a.h + iy) * a.w + ix) * a.c + c)]);
            }
          y[static_cast<size_t>(((n * a.oh + oy) * a.ow + ox) * a.c + c)] = best;
        }
  return y;
}

// Every thread of the plan's kernel, run on the host.
std::vector<float> replay(const std::vector<float>& x, const MaxPoolNhwcArgs& a, const MaxPoolNhwcPlan& p) {
  std::vector<float> y(static_cast<size_t>(a.n * a.oh * a.ow * a.c), std::nanf(""));
  auto i = [](int64_t v) { return static_cast<int>(v); };
  const MaxPoolDims d{i(a.h),  i(a.w),  i(a.c),  i(a.oh), i(a.ow), i(a.kh),   i(a.kw),   i(a.sh),
                      i(a.sw), i(a.ph), i(a.pw), i(a.dh), i(a.dw), p.vecs, p.groups, p.threads};
  for (uint32_t t = 0; t < p.threads; ++t) {
    switch (p.cols) {
      case MaxPoolCols::kK3S2: maxpool_nhwc_thread<float, 4, 3, 2, 4>(x.data(), y.data(), d, t); break;
      case MaxPoolCols::kK2S2: maxpool_nhwc_thread<float, 4, 2, 2, 4>(x.data(), y.data(), d, t); break;
      case MaxPoolCols::kK3S1: maxpool_nhwc_thread<float, 4, 3, 1, 4>(x.data(), y.data(), d, t); break;
      case MaxPoolCols::kGeneral:
        if (p.vec_bytes == 16) maxpool_nhwc_thread<float, 4, 0, 0, 1>(x.data(), y.data(), d, t);
        else if (p.vec_bytes == 8) maxpool_nhwc_thread<float, 2, 0, 0, 1>(x.data(), y.data(), d, t);
        else maxpool_nhwc_thread<float, 1, 0, 0, 1>(x.data(), y.data(), d, t);
        break;
    }
  }
  return y;
}

TEST(MaxPoolNhwcThread, EveryColumnLoopMatchesAPlainLoop) {
  struct C {
    MaxPoolNhwcArgs a;
    MaxPoolCols cols;
  };
  std::vector<C> cases = {
      {args({2, 13, 15, 16}, 3, 2, 1, 7, 8), MaxPoolCols::kK3S2},
      {args({1, 11, 21, 8}, 3, 2, 1, 6, 11), MaxPoolCols::kK3S2},   // a partial group of 4
      {args({2, 10, 10, 4}, 3, 2, 0, 5, 5), MaxPoolCols::kK3S2},    // ceil_mode's output size
      {args({1, 9, 9, 8}, 3, 2, 2, 6, 6), MaxPoolCols::kK3S2},      // pads of 2
      {args({2, 7, 9, 4}, 2, 2, 0, 4, 5), MaxPoolCols::kK2S2},      // ceil_mode
      {args({1, 6, 13, 12}, 3, 1, 1, 6, 13), MaxPoolCols::kK3S1},
      {args({1, 12, 12, 8}, 5, 3, 2, 4, 4), MaxPoolCols::kGeneral},
      {args({2, 9, 11, 6}, 3, 2, 1, 5, 6), MaxPoolCols::kGeneral},  // 8-byte vectors
      {args({2, 9, 11, 3}, 3, 2, 1, 5, 6), MaxPoolCols::kGeneral},  // one channel per access
  };
  MaxPoolNhwcArgs dil = args({2, 9, 11, 4}, 3, 1, 2, 9, 11);
  dil.dh = dil.dw = 2;
  cases.push_back({dil, MaxPoolCols::kGeneral});
  MaxPoolNhwcArgs rect = args({2, 8, 11, 8}, 3, 2, 1, 8, 6);  // a 2x3 window, stride 1x2, top pad 0
  rect.kh = 2;
  rect.sh = 1;
  rect.ph = 0;
  cases.push_back({rect, MaxPoolCols::kK3S2});
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-3.f, -1.f);  // all negative: a padded 0 would win
  for (const C& c : cases) {
    const MaxPoolNhwcArgs& a = c.a;
    std::vector<float> x(static_cast<size_t>(a.n * a.h * a.w * a.c));
    for (float& v : x) v = u(rng);
    const MaxPoolNhwcPlan p = plan_maxpool_nhwc(a, sizeof(float), 16);
    ASSERT_TRUE(p.ok) << p.why;
    EXPECT_EQ(p.cols, c.cols) << "C=" << a.c << " k" << a.kw << " s" << a.sw;
    EXPECT_EQ(replay(x, a, p), reference(x, a)) << "C=" << a.c << " k" << a.kw << " s" << a.sw << " ow " << a.ow;
  }
}

TEST(SmallSideTranspose, RunsWhenThePlaneAndPointersAllow) {
  TransposePlan p = plan_transpose({256, 3, 224, 224}, {0, 2, 3, 1});  // ResNet's input
  ASSERT_EQ(p.kind, TransposeKind::kInterleave) << p.why;
  SmallSideArgs g = make_small_side(p, 2, 16);
  EXPECT_EQ(g.m, 3u);
  EXPECT_EQ(g.n, 224u * 224);
  EXPECT_EQ(g.batch, 256u);
  EXPECT_TRUE(g.vec);
  EXPECT_FALSE(make_small_side(p, 2, 8).vec);  // pointers 8-byte aligned only
  p = plan_transpose({2, 3, 7, 9}, {0, 2, 3, 1});
  EXPECT_FALSE(make_small_side(p, 2, 16).vec);  // 63 pixels: no whole runs of 8
  EXPECT_TRUE(make_small_side(plan_transpose({2, 5, 6, 6}, {0, 2, 3, 1}), 4, 16).vec);  // runs of 4 f32
  p = plan_transpose({1, 4, 5, 24}, {0, 2, 3, 1});  // N = 1: [4, 120] -> [120, 4]
  ASSERT_EQ(p.kind, TransposeKind::kInterleave);
  EXPECT_EQ(make_small_side(p, 2, 16).batch, 1u);
}

}  // namespace
}  // namespace gpuopt::cuda
