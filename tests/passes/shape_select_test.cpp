// Constant folding of the known dims picked from a partly known Shape (shape_select.h): the scale
// torch's SDPA export computes as 1/sqrt(Shape(q)[-1]) folds to a constant with a dynamic batch,
// by Gather or by Slice, and the folded graph computes what the original does; picking the
// symbolic batch dim folds nothing.
#include "pass_test_util.h"
#include "passes/match.h"
#include "passes/passes.h"

#include <algorithm>

namespace gpuopt {
namespace {

using testing::count;
using testing::finish;
using testing::max_rel_err;
using testing::run_cpu;
using testing::uniform;

ValueId i64(Graph& g, const std::string& name, std::vector<int64_t> v, bool scalar = false) {
  const int64_t n = static_cast<int64_t>(v.size());
  return g.add_constant(name, Tensor::from_vector<int64_t>(DType::I64, scalar ? Shape{} : Shape{n}, std::move(v)));
}

// y = x * (1 / sqrt(float(pick(Shape(x))))) with x [N, 4, 8].
Graph scale_graph(bool by_slice, int64_t index) {
  Graph g;
  g.opset = 17;
  ValueId x = g.add_input("x", DType::F32, {g.symbol_dim("N"), 4, 8});
  ValueId shp = g.add_node(Op::Shape, "shape", {x}, 1)[0];
  ValueId d = by_slice ? g.add_node(Op::Slice, "last", {shp, i64(g, "s", {index}), i64(g, "e", {index == -1 ? 1000 : index + 1})}, 1)[0]
                       : g.add_node(Op::Gather, "last", {shp, i64(g, "i", {index}, true)}, 1)[0];
  AttributeMap to;
  to["to"].kind = Attribute::Kind::kInt;
  to["to"].i = static_cast<int64_t>(DType::F32);
  ValueId df = g.add_node(Op::Cast, "cast", {d}, 1, to)[0];
  ValueId sq = g.add_node(Op::Sqrt, "sqrt", {df}, 1)[0];
  ValueId one = g.add_constant("one", Tensor::from_vector<float>(DType::F32, {}, {1.f}));
  ValueId sc = g.add_node(Op::Div, "inv", {one, sq}, 1)[0];
  ValueId y = g.add_node(Op::Mul, "scale", {x, sc}, 1, {}, {"y"})[0];
  g.mark_output(y);
  finish(g);
  return g;
}

TEST(ShapeSelect, KnownDimsOfAPartlyKnownShapeFold) {
  for (bool by_slice : {false, true}) {
    const Graph ref = scale_graph(by_slice, -1);
    Graph g = ref;
    ASSERT_TRUE(run_default_passes(&g).ok());
    EXPECT_EQ(g.nodes().size(), 1u) << by_slice;  // the Mul by a constant 1/sqrt(8)
    EXPECT_EQ(count(g, "Shape") + count(g, "Sqrt") + count(g, "Cast"), 0);
    std::mt19937 rng(5);
    const Tensor x = uniform({3, 4, 8}, rng);
    EXPECT_LE(max_rel_err(run_cpu(g, {x}), run_cpu(ref, {x})), 1e-6);
  }
}

TEST(ShapeSelect, TheSymbolicBatchStaysComputed) {
  for (bool by_slice : {false, true}) {
    Graph g = scale_graph(by_slice, 0);
    ASSERT_TRUE(run_default_passes(&g).ok());
    EXPECT_EQ(count(g, "Shape"), 1) << by_slice;
    EXPECT_EQ(count(g, "Sqrt"), 1);
  }
}

// Every Slice of a [N, 197, 2304] shape that a Reshape target is built from (torch's unflatten:
// shape[:2] + [3, 768] + shape[3:]) folds to what the Slice kernel computes, the empty tail too.
TEST(ShapeSelect, SlicesFoldAsTheKernelComputesThem) {
  const std::vector<std::pair<int64_t, int64_t>> ranges = {{0, 2}, {3, 1000}, {2, 3}, {-1, 1000}, {-2, -1}, {5, 9}, {0, -3}};
  for (auto [start, end] : ranges) {
    Graph g;
    g.opset = 17;
    ValueId x = g.add_input("x", DType::F32, {g.symbol_dim("N"), 197, 2304});
    ValueId shp = g.add_node(Op::Shape, "shape", {x}, 1)[0];
    ValueId sl = g.add_node(Op::Slice, "slice", {shp, i64(g, "s", {start}), i64(g, "e", {end})}, 1)[0];
    ValueId y = g.add_node(Op::Concat, "cat", {sl, i64(g, "tail", {7})}, 1, {{"axis", int_attr(0)}}, {"y"})[0];
    g.mark_output(y);
    finish(g);
    std::mt19937 rng(1);
    const Tensor in = uniform({2, 197, 2304}, rng);
    const auto want = run_cpu(g, {in});
    Graph folded = g;
    ASSERT_TRUE(run_default_passes(&folded).ok());
    const auto got = run_cpu(folded, {in});
    ASSERT_FALSE(want.empty() || got.empty());
    ASSERT_EQ(got[0].shape(), want[0].shape()) << start << ".." << end;
    for (int64_t i = 0; i < want[0].numel(); ++i) EXPECT_EQ(got[0].get_f64(i), want[0].get_f64(i)) << start << ".." << end;
    auto norm = [](int64_t v) { return std::clamp<int64_t>(v < 0 ? v + 3 : v, 0, 3); };
    const bool picks_batch = norm(start) == 0 && norm(end) > 0;  // dim 0 is the symbolic batch
    EXPECT_EQ(count(folded, "Shape"), picks_batch ? 1 : 0) << start << ".." << end;
  }
}

}  // namespace
}  // namespace gpuopt
