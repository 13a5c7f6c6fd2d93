// eliminate_identity: Identity, inference Dropout and one-input Concat go; a Transpose of a
// Transpose becomes one Transpose by the composed permutation (or nothing when they cancel).
// The oracle is the CPU reference on the graph before the pass.
#include "pass_test_util.h"
#include "passes/passes.h"

#include <limits>

namespace gpuopt {
namespace {

using testing::count;
using testing::finish;
using testing::max_rel_err;
using testing::run_cpu;
using testing::uniform;

// x [2,3,4,5] -> Transpose(p1) -> Concat(one input) -> Transpose(p2) -> y (and, when `leak`, the
// first Transpose's output is read by a Relu that is a graph output too).
Graph chain(std::vector<int64_t> p1, std::vector<int64_t> p2, bool leak) {
  Graph g;
  g.opset = 17;
  ValueId x = g.add_input("x", DType::F32, {2, 3, 4, 5});
  ValueId t = g.add_node(Op::Transpose, "t1", {x}, 1, {{"perm", ints_attr(std::move(p1))}})[0];
  ValueId c = g.add_node(Op::Concat, "one", {t}, 1, {{"axis", int_attr(-2)}})[0];
  ValueId y = g.add_node(Op::Transpose, "t2", {c}, 1, {{"perm", ints_attr(std::move(p2))}}, {"y"})[0];
  g.mark_output(y);
  if (leak) g.mark_output(g.add_node(Op::Relu, "relu", {t}, 1, {}, {"r"})[0]);
  finish(g);
  return g;
}

TEST(EliminateIdentity, ComposesTransposesThroughAOneInputConcat) {
  std::mt19937 rng(3);
  const std::vector<Tensor> in{uniform({2, 3, 4, 5}, rng, -1, 1)};
  for (const bool leak : {false, true}) {
    const Graph ref = chain({0, 2, 1, 3}, {0, 1, 3, 2}, leak);
    Graph g = ref;
    ASSERT_TRUE(eliminate_identity(&g).ok());
    ASSERT_TRUE(remove_dead_nodes(&g).ok());
    finish(g);
    EXPECT_EQ(count(g, "Concat"), 0);
    EXPECT_EQ(count(g, "Transpose"), leak ? 2 : 1);  // the first stays for the Relu that reads it
    for (const Node& n : g.nodes())
      if (n.name == "t2") {
        EXPECT_EQ(n.attr_ints("perm"), (std::vector<int64_t>{0, 2, 3, 1}));
      }
    EXPECT_EQ(max_rel_err(run_cpu(g, in), run_cpu(ref, in)), 0.0);
  }
}

TEST(EliminateIdentity, TransposesThatCancelGoAltogether) {
  std::mt19937 rng(4);
  const std::vector<Tensor> in{uniform({2, 3, 4, 5}, rng, -1, 1)};
  const Graph ref = chain({0, 2, 3, 1}, {0, 3, 1, 2}, false);
  Graph g = ref;
  ASSERT_TRUE(eliminate_identity(&g).ok());
  ASSERT_TRUE(remove_dead_nodes(&g).ok());
  finish(g);
  EXPECT_EQ(count(g, "Transpose"), 0);
  EXPECT_EQ(max_rel_err(run_cpu(g, in), run_cpu(ref, in)), 0.0);
}

// Swin's window padding and its crop: Pad by zeros and a Slice to the full extent copy their
// input and go; a Pad that pads, a Slice that drops a row, a reversing Slice and a Slice whose
// bounds come at run time stay. The batch dim is symbolic (the Slice runs to INT64_MAX on it).
TEST(EliminateIdentity, ZeroPadsAndFullSlicesGoOthersStay) {
  Graph g;
  g.opset = 17;
  const int64_t big = std::numeric_limits<int64_t>::max();
  ValueId x = g.add_input("x", DType::F32, {kFirstSymbolDim, 4, 6, 3});
  ValueId ends_in = g.add_input("ends", DType::I64, {1});
  auto i64 = [&](const std::string& n, std::vector<int64_t> v) {
    const int64_t len = static_cast<int64_t>(v.size());
    return g.add_constant(n, Tensor::from_vector<int64_t>(DType::I64, {len}, std::move(v)));
  };
  ValueId zero_pads = g.add_node(Op::Pad, "pad0", {x, i64("z", std::vector<int64_t>(8, 0))}, 1, {{"mode", string_attr("constant")}})[0];
  ValueId full = g.add_node(Op::Slice, "crop_full", {zero_pads, i64("s0", {0, 0, 0}), i64("e0", {big, 4, 6}), i64("a0", {0, 1, 2})}, 1)[0];
  ValueId neg = g.add_node(Op::Slice, "crop_neg_start", {full, i64("s1", {-6}), i64("e1", {100}), i64("a1", {-2})}, 1, {},
                           {"y_full"})[0];
  g.mark_output(neg);
  ValueId padded = g.add_node(Op::Pad, "pad1", {x, i64("p", {0, 0, 0, 0, 0, 1, 2, 0})}, 1, {}, {"y_pad"})[0];
  g.mark_output(padded);
  ValueId row = g.add_node(Op::Slice, "drop_row", {x, i64("s2", {0}), i64("e2", {3}), i64("a2", {1})}, 1, {}, {"y_row"})[0];
  g.mark_output(row);
  ValueId rev = g.add_node(Op::Slice, "reverse", {x, i64("s3", {-1}), i64("e3", {-big}), i64("a3", {1}), i64("st3", {-1})}, 1, {},
                           {"y_rev"})[0];
  g.mark_output(rev);
  ValueId dyn = g.add_node(Op::Slice, "runtime_end", {x, i64("s4", {0}), ends_in, i64("a4", {2})}, 1, {}, {"y_dyn"})[0];
  g.mark_output(dyn);
  finish(g);
  std::mt19937 rng(6);
  Tensor ends = Tensor::from_vector<int64_t>(DType::I64, {1}, {5});
  const std::vector<Tensor> in{uniform({2, 4, 6, 3}, rng, -1, 1), ends};
  const auto want = run_cpu(g, in);
  Graph h = g;
  ASSERT_TRUE(eliminate_identity(&h).ok());
  ASSERT_TRUE(remove_dead_nodes(&h).ok());
  finish(h);
  EXPECT_EQ(count(h, "Pad"), 1);    // pad1
  EXPECT_EQ(count(h, "Slice"), 4);  // crop_neg_start writes a graph output; the three that cut stay
  for (const Node& n : h.nodes()) {
    EXPECT_NE(n.name, "crop_full");
  }
  for (const Node& n : h.nodes()) {
    if (n.name == "crop_neg_start") {
      EXPECT_EQ(n.inputs[0], h.inputs()[0]);  // reads x directly now
    }
  }
  const auto got = run_cpu(h, in);
  ASSERT_EQ(got.size(), want.size());
  for (size_t o = 0; o < got.size(); ++o) EXPECT_EQ(max_rel_err({got[o]}, {want[o]}), 0.0) << o;
}

// Twelve layers building the same mask from the same inputs: one Where after CSE, and the same
// results; nodes writing graph outputs stay.
TEST(EliminateCommonSubexpressions, EqualNodesBecomeOne) {
  Graph g;
  g.opset = 17;
  ValueId c = g.add_input("c", DType::Bool, {2, 4});
  ValueId x = g.add_input("x", DType::F32, {2, 4});
  ValueId zero = g.add_constant("zero", Tensor::from_vector<float>(DType::F32, {}, {0.f}));
  ValueId ninf = g.add_constant("ninf", Tensor::from_vector<float>(DType::F32, {}, {-1e4f}));
  ValueId acc = x;
  for (int l = 0; l < 12; ++l) {
    ValueId m = g.add_node(Op::Where, "mask" + std::to_string(l), {c, zero, ninf}, 1)[0];
    acc = g.add_node(Op::Add, "add" + std::to_string(l), {acc, m}, 1)[0];
  }
  ValueId y = g.add_node(Op::Identity, "y", {acc}, 1, {}, {"y"})[0];
  g.mark_output(y);
  ValueId r1 = g.add_node(Op::Relu, "r1", {x}, 1, {}, {"r1"})[0];
  ValueId r2 = g.add_node(Op::Relu, "r2", {x}, 1, {}, {"r2"})[0];
  g.mark_output(r1);
  g.mark_output(r2);
  finish(g);
  std::mt19937 rng(5);
  Tensor cv = Tensor::empty(DType::Bool, {2, 4});
  for (int64_t i = 0; i < 8; ++i) cv.set_f64(i, i % 3 == 0);
  const std::vector<Tensor> in{cv, uniform({2, 4}, rng, -1, 1)};
  const auto want = run_cpu(g, in);
  Graph h = g;
  auto st = eliminate_common_subexpressions(&h);
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->removed, 11);
  finish(h);
  EXPECT_EQ(count(h, "Where"), 1);
  EXPECT_EQ(count(h, "Relu"), 2);  // each writes a graph output of its own
  EXPECT_EQ(max_rel_err(run_cpu(h, in), want), 0.0);
}

}  // namespace
}  // namespace gpuopt
