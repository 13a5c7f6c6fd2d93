// space_to_depth_as_transpose: the Concat of the four parity Slices of two axes becomes
// Reshape -> Transpose -> Reshape, bit-equal to the unrewritten graph on the CPU reference:
// Swin's patch merging (NHWC, the H slice shared by two inputs, symbolic batch), YOLOv5's Focus
// (NCHW, concat on channels) with the other input order and one two-axis Slice per input.
// Look-alikes stay: a parity twice (one missing), step 3 (every third column), the Concat on a
// sliced axis.
#include "pass_test_util.h"
#include "passes/passes.h"
#include "passes/window_attention.h"

#include <limits>

namespace gpuopt {
namespace {

using testing::count;
using testing::expect_same_bits;
using testing::finish;
using testing::run_cpu;
using testing::uniform;

constexpr int64_t kBig = std::numeric_limits<int64_t>::max();

ValueId i64s(Graph& g, const std::string& name, std::vector<int64_t> v) {
  const int64_t n = static_cast<int64_t>(v.size());
  return g.add_constant(name, Tensor::from_vector<int64_t>(DType::I64, {n}, std::move(v)));
}

ValueId slice(Graph& g, const std::string& n, ValueId x, std::vector<int64_t> starts, std::vector<int64_t> axes, int64_t step = 2) {
  const size_t k = starts.size();
  return g.add_node(Op::Slice, n, {x, i64s(g, n + "/s", starts), i64s(g, n + "/e", std::vector<int64_t>(k, kBig)), i64s(g, n + "/a", axes),
                                   i64s(g, n + "/t", std::vector<int64_t>(k, step))},
                    1)[0];
}

// torchvision's PatchMerging on [B, 6, 4, 3]: x0 = x[:, 0::2, 0::2], x1 = x[:, 1::2, 0::2],
// x2 = x[:, 0::2, 1::2], x3 = x[:, 1::2, 1::2] (each two Slices, the H ones shared).
Graph patch_merging(int variant) {
  Graph g;
  g.opset = 17;
  ValueId x = g.add_input("x", DType::F32, {kFirstSymbolDim, 6, 4, 3});
  ValueId h0 = slice(g, "h0", x, {0}, {1}), h1 = slice(g, "h1", x, {1}, {1});
  const int64_t step = variant == 2 ? 3 : 2;
  std::vector<ValueId> parts{slice(g, "x0", h0, {0}, {2}, step), slice(g, "x1", h1, {0}, {2}), slice(g, "x2", h0, {1}, {2}),
                             slice(g, "x3", h1, {1}, {2})};
  if (variant == 1) parts[3] = slice(g, "x3", h0, {1}, {2});  // (0, 1) twice, (1, 1) missing
  int64_t axis = variant == 3 ? 2 : -1;
  ValueId y = g.add_node(Op::Concat, "merge", parts, 1, {{"axis", int_attr(axis)}}, {"y"})[0];
  g.mark_output(y);
  return g;
}

TEST(SpaceToDepth, SwinPatchMergingIsOneTranspose) {
  Graph g = patch_merging(0);
  finish(g);
  std::mt19937 rng(31);
  const std::vector<Tensor> in{uniform({2, 6, 4, 3}, rng)};
  Graph r = g;
  auto st = space_to_depth_as_transpose(&r);
  ASSERT_TRUE(st.ok()) << st.status().to_string();
  EXPECT_EQ(st->rewritten, 1);
  finish(r);
  EXPECT_EQ(count(r, "Slice"), 0);
  EXPECT_EQ(count(r, "Concat"), 0);
  EXPECT_EQ(count(r, "Transpose"), 1);
  EXPECT_EQ(r.value(r.outputs()[0]).info.shape, (Shape{kFirstSymbolDim, 3, 2, 12}));
  expect_same_bits(run_cpu(r, in), run_cpu(g, in));
}

TEST(SpaceToDepth, YoloFocusOnNchwInItsOwnOrder) {
  Graph g;
  g.opset = 17;
  ValueId x = g.add_input("x", DType::F32, {2, 3, 4, 6});
  // k = 2 * (H parity) + (W parity): (0,0), (0,1), (1,0), (1,1).
  std::vector<ValueId> parts;
  const char* const names[] = {"p00", "p01", "p10", "p11"};
  for (int64_t k = 0; k < 4; ++k) parts.push_back(slice(g, names[k], x, {k / 2, k % 2}, {2, 3}));
  g.mark_output(g.add_node(Op::Concat, "focus", parts, 1, {{"axis", int_attr(1)}}, {"y"})[0]);
  finish(g);
  std::mt19937 rng(32);
  const std::vector<Tensor> in{uniform({2, 3, 4, 6}, rng)};
  Graph r = g;
  ASSERT_TRUE(space_to_depth_as_transpose(&r).ok());
  finish(r);
  EXPECT_EQ(count(r, "Slice"), 0);
  EXPECT_EQ(count(r, "Transpose"), 1);
  expect_same_bits(run_cpu(r, in), run_cpu(g, in));
}

TEST(SpaceToDepth, LookAlikesStay) {
  std::mt19937 rng(33);
  for (int variant : {1, 2, 3}) {
    Graph g = patch_merging(variant);
    finish(g);
    Graph r = g;
    auto st = space_to_depth_as_transpose(&r);
    ASSERT_TRUE(st.ok()) << st.status().to_string();
    EXPECT_EQ(st->rewritten, 0) << variant;
    EXPECT_EQ(count(r, "Concat"), 1);
    const std::vector<Tensor> in{uniform({2, 6, 4, 3}, rng)};
    finish(r);
    expect_same_bits(run_cpu(r, in), run_cpu(g, in));
  }
}

}  // namespace
}  // namespace gpuopt
