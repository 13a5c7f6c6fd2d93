// Broadcast shape rules (partial and concrete) and the row iterator, against a per-element
// unravel/modulo oracle.
#include "ops/common/broadcast.h"
#include "op_test_util.h"

#include <gtest/gtest.h>

#include <random>

namespace gpuopt {
namespace {

constexpr int64_t kU = kUnknownDim;
constexpr int64_t kN = kFirstSymbolDim;      // symbol "N"
constexpr int64_t kM = kFirstSymbolDim - 1;  // symbol "M"

TEST(BroadcastShape, Concrete) {
  EXPECT_EQ(*broadcast_shapes(Shape{2, 3}, Shape{3}), (Shape{2, 3}));
  EXPECT_EQ(*broadcast_shapes(Shape{5, 1, 7}, Shape{4, 1}), (Shape{5, 4, 7}));
  EXPECT_EQ(*broadcast_shapes(Shape{}, Shape{2, 3}), (Shape{2, 3}));
  EXPECT_EQ(*broadcast_shapes(Shape{0, 3}, Shape{1, 3}), (Shape{0, 3}));
  EXPECT_FALSE(broadcast_shapes(Shape{2, 3}, Shape{4}).has_value());
  EXPECT_FALSE(broadcast_shapes(Shape{0}, Shape{2}).has_value());
  EXPECT_EQ(*broadcast_shapes(std::vector<Shape>{{2, 1, 1}, {1, 3, 1}, {5}}), (Shape{2, 3, 5}));
  EXPECT_FALSE(broadcast_shapes(std::vector<Shape>{{2}, {1}, {3}}).has_value());
}

TEST(BroadcastShape, Partial) {
  EXPECT_EQ(*broadcast_shapes(Shape{kN, 3}, Shape{1, 3}), (Shape{kN, 3}));
  EXPECT_EQ(*broadcast_shapes(Shape{kN, 3}, Shape{kN, 1}), (Shape{kN, 3}));
  EXPECT_EQ(*broadcast_shapes(Shape{kN}, Shape{kM}), (Shape{kU}));
  EXPECT_EQ(*broadcast_shapes(Shape{kN}, Shape{kU}), (Shape{kU}));
  EXPECT_EQ(*broadcast_shapes(Shape{kN}, Shape{5}), (Shape{5}));
  EXPECT_EQ(*broadcast_shapes(Shape{kU}, Shape{1}), (Shape{kU}));
  EXPECT_EQ(*broadcast_shapes(Shape{kU, 4}, Shape{7, kU}), (Shape{7, 4}));
  EXPECT_TRUE(broadcastable_to(Shape{1, kN}, Shape{3, 4}));
  EXPECT_TRUE(broadcastable_to(Shape{4}, Shape{kN, 4}));
  EXPECT_FALSE(broadcastable_to(Shape{3}, Shape{2, 4}));
  EXPECT_FALSE(broadcastable_to(Shape{2, 4}, Shape{4}));
}

// Oracle: unravel the output index and take each coordinate modulo the input extent.
int64_t oracle_offset(const Shape& in, const Shape& out, int64_t linear) { return testing::bcast_index(in, out, linear); }

TEST(BroadcastLoop, MatchesOracle) {
  const std::vector<std::vector<Shape>> cases = {
      {{128, 2, 2, 2}, {128, 2, 2, 2}},
      {{5, 7, 11, 13}, {13}},
      {{5, 7, 11, 13}, {7, 1, 1}},
      {{5, 1, 11, 1}, {1, 7, 1, 13}},
      {{3, 1}, {1, 4}, {3, 4}},
      {{}, {2, 3}},
      {{1, 1}, {16, 1, 9}},
      {{4, 0, 3}, {1, 3}},
      {{2, 3, 4, 5}, {2, 1, 4, 1}, {1, 3, 1, 5}},
  };
  for (const auto& ins : cases) {
    const Shape out = *broadcast_shapes(ins);
    const BroadcastLoop loop = make_broadcast_loop(out, ins);
    EXPECT_EQ(loop.numel, shape_numel(out));
    int64_t visited = 0;
    loop.for_each_row([&](const int64_t* off, int64_t oo) {
      for (int64_t i = 0; i < loop.inner; ++i) {
        for (size_t k = 0; k < ins.size(); ++k)
          ASSERT_EQ(off[k] + i * loop.inner_strides[k], oracle_offset(ins[k], out, oo + i))
              << shape_to_string(ins[k]) << " -> " << shape_to_string(out) << " at " << oo + i;
        ++visited;
      }
    });
    EXPECT_EQ(visited, loop.numel) << shape_to_string(out);
    for (const Shape& in : ins) {
      const std::vector<int64_t> offs = broadcast_offsets(in, out);
      for (int64_t i = 0; i < loop.numel; ++i) ASSERT_EQ(offs[i], oracle_offset(in, out, i));
    }
  }
}

TEST(BroadcastLoop, MergesContiguousDims) {
  // Same shapes: one row; bias over the last dim: rows of the last extent.
  BroadcastLoop same = make_broadcast_loop({5, 7, 11}, {{5, 7, 11}, {5, 7, 11}});
  EXPECT_EQ(same.inner, 385);
  EXPECT_EQ(same.rows(), 1);
  BroadcastLoop bias = make_broadcast_loop({5, 7, 11}, {{5, 7, 11}, {11}});
  EXPECT_EQ(bias.inner, 11);
  EXPECT_EQ(bias.outer_dims, (std::vector<int64_t>{35}));
}

TEST(BroadcastKernel, BinaryMixedTypes) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-4.f, 4.f);
  const Shape sa{5, 1, 13}, sb{7, 1};
  Tensor a = Tensor::empty(DType::F32, sa), b = Tensor::empty(DType::I32, sb);
  for (int64_t i = 0; i < a.numel(); ++i) a.data<float>()[i] = u(rng);
  for (int64_t i = 0; i < b.numel(); ++i) b.data<int32_t>()[i] = static_cast<int32_t>(u(rng) * 10);
  const Shape so = *broadcast_shapes(sa, sb);
  Tensor o = Tensor::empty(DType::F64, so);
  binary_broadcast<float, int32_t, double>(a, b, o, [](float x, int32_t y) { return double(x) * y; });
  for (int64_t i = 0; i < o.numel(); ++i)
    ASSERT_EQ(o.data<double>()[i],
              double(a.data<float>()[oracle_offset(sa, so, i)]) * b.data<int32_t>()[oracle_offset(sb, so, i)]);
  Tensor c = Tensor::empty(DType::Bool, {13});
  for (int64_t i = 0; i < 13; ++i) c.data<bool>()[i] = i % 3 == 0;
  Tensor w = Tensor::empty(DType::F32, so);
  ternary_broadcast<bool, float, int32_t, float>(c, a, b, w,
                                                 [](bool k, float x, int32_t y) { return k ? x : float(y); });
  for (int64_t i = 0; i < w.numel(); ++i) {
    const bool k = c.data<bool>()[oracle_offset({13}, so, i)];
    const float want =
        k ? a.data<float>()[oracle_offset(sa, so, i)] : float(b.data<int32_t>()[oracle_offset(sb, so, i)]);
    ASSERT_EQ(w.data<float>()[i], want);
  }
}

}  // namespace
}  // namespace gpuopt
