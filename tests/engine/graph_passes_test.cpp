// Graph (topological sort, inference driver) and the passes (folding, Identity/Dropout, dead nodes).
#include "backends/backend.h"
#include "ir/graph.h"
#include "passes/passes.h"

#include <gtest/gtest.h>

#include <cstdlib>

namespace gpuopt {
namespace {

TEST(Graph, TopoSortReordersAndKeepsSortedGraphs) {
  Graph g;
  ValueId x = g.add_input("x", DType::F32, {2});
  ValueId a = g.add_value("a");
  ValueId b = g.add_value("b");
  // b = relu(a) written before a = neg(x).
  Node n1;
  n1.op = Op::Relu; n1.name = "second"; n1.op_type = "Relu"; n1.inputs = {a}; n1.outputs = {b};
  Node n0;
  n0.op = Op::Neg; n0.name = "first"; n0.op_type = "Neg"; n0.inputs = {x}; n0.outputs = {a};
  g.nodes().push_back(n1);
  g.nodes().push_back(n0);
  g.mark_output(b);
  ASSERT_TRUE(g.topo_sort().ok());
  EXPECT_EQ(g.nodes()[0].name, "first");
  EXPECT_EQ(g.nodes()[1].name, "second");
  ASSERT_TRUE(g.infer_shapes().ok());
  EXPECT_EQ(g.value(b).info.shape, (Shape{2}));
  EXPECT_EQ(g.value(b).info.dtype, DType::F32);
}

TEST(Graph, CycleAndMissingProducerAreErrors) {
  Graph g;
  ValueId a = g.add_value("a");
  ValueId b = g.add_value("b");
  Node n0;
  n0.op = Op::Relu; n0.name = "r0"; n0.op_type = "Relu"; n0.inputs = {b}; n0.outputs = {a};
  Node n1;
  n1.op = Op::Relu; n1.name = "r1"; n1.op_type = "Relu"; n1.inputs = {a}; n1.outputs = {b};
  g.nodes() = {n0, n1};
  g.mark_output(b);
  Status st = g.topo_sort();
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("cycle"), std::string::npos) << st.to_string();

  Graph h;
  ValueId orphan = h.add_value("orphan");
  ValueId y = h.add_node(Op::Relu, "r", {orphan}, 1)[0];
  h.mark_output(y);
  Status st2 = h.topo_sort();
  ASSERT_FALSE(st2.ok());
  EXPECT_NE(st2.message().find("'orphan'"), std::string::npos) << st2.to_string();
}

TEST(Passes, FoldsConstantsAndShapeChains) {
  Graph g;
  ValueId x = g.add_input("x", DType::F32, {2, 3});
  ValueId c = g.add_constant("c", Tensor::from_vector(DType::F32, {3}, std::vector<float>{-1, 2, -3}));
  ValueId rc = g.add_node(Op::Relu, "relu_c", {c}, 1)[0];       // all-constant: folds
  ValueId sh = g.add_node(Op::Shape, "shape_x", {x}, 1)[0];     // concrete shape: folds
  ValueId r = g.add_node(Op::Reshape, "reshape", {x, sh}, 1)[0];
  ValueId y = g.add_node(Op::Neg, "neg", {r}, 1)[0];
  g.mark_output(y);
  g.mark_output(rc);
  ASSERT_TRUE(g.infer_shapes().ok());
  ASSERT_TRUE(run_default_passes(&g).ok());
  ASSERT_TRUE(g.value(rc).constant.has_value());
  EXPECT_EQ(g.value(rc).constant->get_f64(0), 0.0);
  EXPECT_EQ(g.value(rc).constant->get_f64(1), 2.0);
  ASSERT_TRUE(g.value(sh).constant.has_value());
  EXPECT_EQ(g.value(sh).constant->to_i64_vector(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(g.nodes().size(), 2u);  // reshape, neg
  EXPECT_EQ(g.value(r).info.shape, (Shape{2, 3}));
}

TEST(Passes, IdentityDropoutAndDeadNodes) {
  Graph g;
  ValueId x = g.add_input("x", DType::F32, {4});
  ValueId i1 = g.add_node(Op::Identity, "id1", {x}, 1)[0];
  ValueId d1 = g.add_node(Op::Dropout, "drop", {i1}, 1)[0];
  ValueId y = g.add_node(Op::Relu, "relu", {d1}, 1)[0];
  g.add_node(Op::Neg, "unused", {x}, 1);  // reaches no output
  g.mark_output(y);
  ASSERT_TRUE(g.infer_shapes().ok());
  ASSERT_TRUE(run_default_passes(&g).ok());
  ASSERT_EQ(g.nodes().size(), 1u);
  EXPECT_EQ(g.nodes()[0].name, "relu");
  EXPECT_EQ(g.nodes()[0].inputs[0], x);

  // The graph still computes the same thing on the CPU backend.
  auto backend = create_backend("cpu");
  ASSERT_TRUE(backend.ok());
  auto exe = (*backend)->compile(g, {});
  ASSERT_TRUE(exe.ok()) << exe.status().to_string();
  auto out = (*exe)->run({Tensor::from_vector(DType::F32, {4}, std::vector<float>{-1, 2, -3, 4})}, {});
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  EXPECT_EQ(out->at(0).get_f64(0), 0.0);
  EXPECT_EQ(out->at(0).get_f64(3), 4.0);
}

TEST(CpuBackend, FreesIntermediatesAfterLastUse) {
  // GPUOPT_MEMORY_PLAN=pool. x -> neg -> relu -> neg -> y, 4 KiB each: freeing after last use keeps at most two
  // intermediates alive (the one being read and the one being written), never all three.
  Graph g;
  ValueId x = g.add_input("x", DType::F32, {1024});
  ValueId a = g.add_node(Op::Neg, "n1", {x}, 1)[0];
  ValueId b = g.add_node(Op::Relu, "r", {a}, 1)[0];
  ValueId y = g.add_node(Op::Neg, "n2", {b}, 1)[0];
  g.mark_output(y);
  ASSERT_TRUE(g.infer_shapes().ok());
  auto backend = create_backend("cpu");
  setenv("GPUOPT_MEMORY_PLAN", "pool", 1);  // tensor by tensor (the static plan holds its arena all run)
  auto exe = (*backend)->compile(g, {});
  unsetenv("GPUOPT_MEMORY_PLAN");
  ASSERT_TRUE(exe.ok());
  RunProfile prof;
  RunOptions ro;
  ro.profile = &prof;
  auto out = (*exe)->run({Tensor::zeros(DType::F32, {1024})}, ro);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(prof.peak_intermediate_bytes, 2 * 4096);
  EXPECT_EQ(out->at(0).shape(), (Shape{1024}));
}

}  // namespace
}  // namespace gpuopt
