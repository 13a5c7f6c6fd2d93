// rolls_as_gathers: torch.roll as the exporters write it (Concat of Slice [c, end) and Slice
// [0, c) of one axis) becomes one Gather; Swin's roll over H and W of [B, H, W, C] becomes one
// Gather over H*W between two Reshapes. The oracle is the CPU reference on the graph before the
// pass (a Gather copies: the results are bit-equal). Concats of Slices that are not a rotation
// (a gap, the halves in order, two different sources) stay.
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

// Concat(Slice(x, [s1, e1)), Slice(y, [s2, e2))) along `axis`, as torch.onnx's roll writes it.
ValueId pair(Graph& g, const std::string& n, ValueId x, ValueId y, int64_t axis, int64_t s1, int64_t e1, int64_t s2,
             int64_t e2) {
  ValueId a = g.add_node(Op::Slice, n + "/hi", {x, i64s(g, n + "/s1", {s1}), i64s(g, n + "/e1", {e1}), i64s(g, n + "/a1", {axis})}, 1)[0];
  ValueId b = g.add_node(Op::Slice, n + "/lo", {y, i64s(g, n + "/s2", {s2}), i64s(g, n + "/e2", {e2}), i64s(g, n + "/a2", {axis})}, 1)[0];
  return g.add_node(Op::Concat, n, {a, b}, 1, {{"axis", int_attr(axis)}})[0];
}

TEST(RollsAsGathers, SwinShiftOverHAndWIsOneGather) {
  Graph g;
  g.opset = 17;
  ValueId x = g.add_input("x", DType::F32, {kFirstSymbolDim, 6, 5, 3});
  // torch.roll(x, (-2, 1), (1, 2)): starts -shift.
  ValueId h = pair(g, "roll_h", x, x, 1, 2, kBig, 0, 2);
  ValueId w = pair(g, "roll_w", h, h, 2, -1, kBig, 0, -1);
  ValueId y = g.add_node(Op::Relu, "after", {w}, 1, {}, {"y"})[0];
  g.mark_output(y);
  // One axis only, the batch-first layout's last axis (negative Concat axis).
  ValueId c = pair(g, "roll_c", x, x, 3, 1, kBig, 0, 1);
  g.nodes().back().attrs["axis"] = int_attr(-1);
  g.mark_output(g.add_node(Op::Neg, "neg", {c}, 1, {}, {"z"})[0]);
  finish(g);
  std::mt19937 rng(9);
  const std::vector<Tensor> in{uniform({2, 6, 5, 3}, rng)};
  const auto want = run_cpu(g, in);
  Graph r = g;
  auto st = rolls_as_gathers(&r);
  ASSERT_TRUE(st.ok()) << st.status().to_string();
  finish(r);
  EXPECT_EQ(count(r, "Slice"), 0);
  EXPECT_EQ(count(r, "Concat"), 0);
  EXPECT_EQ(count(r, "Gather"), 2);   // H and W merged into one; the last-axis roll
  EXPECT_EQ(count(r, "Reshape"), 2);  // around the merged one
  expect_same_bits(run_cpu(r, in), want);
}

TEST(RollsAsGathers, ConcatsOfSlicesThatAreNoRotationStay) {
  Graph g;
  g.opset = 17;
  ValueId x = g.add_input("x", DType::F32, {2, 6, 5});
  ValueId x2 = g.add_input("x2", DType::F32, {2, 6, 5});
  const std::vector<ValueId> outs{
      pair(g, "gap", x, x, 1, 3, kBig, 0, 2),    // drops row 2
      pair(g, "in_order", x, x, 1, 0, 2, 2, kBig),  // the halves as they are (not a rotation)
      pair(g, "two_sources", x, x2, 1, 2, kBig, 0, 2),
      pair(g, "stepped", x, x, 1, 2, kBig, 0, 2),
  };
  // The last pair's second Slice walks with step 2.
  for (Node& n : g.nodes())
    if (n.name == "stepped/lo") n.inputs.push_back(i64s(g, "st", {2}));
  const char* const names[] = {"y0", "y1", "y2", "y3"};
  for (size_t i = 0; i < outs.size(); ++i) g.mark_output(g.add_node(Op::Identity, names[i], {outs[i]}, 1, {}, {names[i]})[0]);
  finish(g);
  std::mt19937 rng(10);
  const std::vector<Tensor> in{uniform({2, 6, 5}, rng), uniform({2, 6, 5}, rng)};
  Graph r = g;
  auto st = rolls_as_gathers(&r);
  ASSERT_TRUE(st.ok()) << st.status().to_string();
  EXPECT_EQ(st->rewritten, 0);
  finish(r);
  EXPECT_EQ(count(r, "Gather"), 0);
  EXPECT_EQ(count(r, "Concat"), 4);
  expect_same_bits(run_cpu(r, in), run_cpu(g, in));
}

}  // namespace
}  // namespace gpuopt
