// Shape inference on partial information (symbolic batch dims, unknown values) and the error
// messages of bad nodes: what the importer and constant folding rely on.
#include "test_util.h"

namespace gpuopt::tensor_test {
namespace {

constexpr int64_t N = kFirstSymbolDim;      // symbolic batch "N"
constexpr int64_t S = kFirstSymbolDim - 1;  // symbolic sequence "S"

Result<std::vector<ValueInfo>> infer(const Node& n, const std::vector<ValueInfo>& in, int opset = 17) {
  std::vector<const ValueInfo*> p;
  for (const auto& v : in) p.push_back(v.dtype == DType::Undefined && !v.rank_known ? nullptr : &v);
  return infer_node(n, p, opset);
}

Shape out_shape(const Node& n, const std::vector<ValueInfo>& in, int opset = 17) {
  auto r = infer(n, in, opset);
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  if (!r.ok()) return {999};
  EXPECT_TRUE((*r)[0].rank_known);
  return (*r)[0].shape;
}

std::string error_of(const Node& n, const std::vector<ValueInfo>& in, int opset = 17) {
  auto r = infer(n, in, opset);
  return r.ok() ? std::string("(no error)") : r.status().message();
}

TEST(Infer, ReshapeResolvesMinusOneAcrossSymbols) {
  Node n = make_node(Op::Reshape, 2);
  Tensor t1 = ints({0, 0, 12, 64});
  EXPECT_EQ(out_shape(n, {vi(DType::F32, {N, S, 768}), vi(DType::I64, {4}, &t1)}), (Shape{N, S, 12, 64}));
  Tensor t2 = ints({0, -1});
  EXPECT_EQ(out_shape(n, {vi(DType::F32, {N, 3, 4, 5}), vi(DType::I64, {2}, &t2)}), (Shape{N, 60}));
  Tensor t3 = ints({-1, 64});
  EXPECT_EQ(out_shape(n, {vi(DType::F32, {N, 2, 64}), vi(DType::I64, {2}, &t3)}), (Shape{kUnknownDim, 64}));
  Tensor t4 = ints({-1, 12, 64});
  EXPECT_EQ(out_shape(n, {vi(DType::F32, {N, 768}), vi(DType::I64, {3}, &t4)}), (Shape{N, 12, 64}));
}

TEST(Infer, ReshapeUnknownShapeGivesRank) {
  Node n = make_node(Op::Reshape, 2);
  EXPECT_EQ(out_shape(n, {vi(DType::F32, {N, 8}), vi(DType::I64, {3})}), (Shape{kUnknownDim, kUnknownDim, kUnknownDim}));
  auto r = infer(n, {vi(DType::F32, {N, 8}), vi(DType::I64, {kUnknownDim})});
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE((*r)[0].rank_known);
}

TEST(Infer, ReshapeErrorsNameNode) {
  Node n = make_node(Op::Reshape, 2, 1, {}, "r1");
  Tensor t = ints({4, 2});
  EXPECT_EQ(error_of(n, {vi(DType::F32, {2, 3}), vi(DType::I64, {2}, &t)}), "[Reshape] node 'r1': cannot reshape [2,3] (6 elements) to [4,2]");
  Tensor t2 = ints({-1, -1});
  EXPECT_NE(error_of(n, {vi(DType::F32, {2, 3}), vi(DType::I64, {2}, &t2)}).find("more than one -1"), std::string::npos);
  Tensor t3 = ints({-1, 4});
  EXPECT_NE(error_of(n, {vi(DType::F32, {2, 3}), vi(DType::I64, {2}, &t3)}).find("cannot reshape"), std::string::npos);
}

TEST(Infer, FlattenKeepsSymbolicBatch) {
  Node n = make_node(Op::Flatten, 1);
  EXPECT_EQ(out_shape(n, {vi(DType::F32, {N, 3, 4, 5})}), (Shape{N, 60}));
  n.attrs["axis"] = attr_i(2);
  EXPECT_EQ(out_shape(n, {vi(DType::F32, {N, 3, 4, 5})}), (Shape{kUnknownDim, 20}));
  n.attrs["axis"] = attr_i(5);
  EXPECT_NE(error_of(n, {vi(DType::F32, {N, 3, 4, 5})}).find("out of range"), std::string::npos);
}

TEST(Infer, SqueezeUnsqueeze) {
  Node sq = make_node(Op::Squeeze, 2, 1, {}, "sq");
  Tensor ax = ints({1});
  EXPECT_EQ(out_shape(sq, {vi(DType::F32, {N, 1, 7}), vi(DType::I64, {1}, &ax)}), (Shape{N, 7}));
  Tensor ax2 = ints({2});
  EXPECT_EQ(error_of(sq, {vi(DType::F32, {N, 1, 7}), vi(DType::I64, {1}, &ax2)}),
            "[Squeeze] node 'sq': cannot squeeze axis 2 of shape [?,1,7]: its extent is 7, not 1");
  Tensor none = Tensor::empty(DType::I64, {0});
  EXPECT_EQ(out_shape(sq, {vi(DType::F32, {1, 3, 1}), vi(DType::I64, {0}, &none)}), (Shape{3}));
  Node un = make_node(Op::Unsqueeze, 2);
  Tensor ax3 = ints({0, -1});
  EXPECT_EQ(out_shape(un, {vi(DType::I64, {N, S}), vi(DType::I64, {2}, &ax3)}), (Shape{1, N, S, 1}));
  // Axes not constant: the rank is still known from the axes' length.
  EXPECT_EQ(out_shape(un, {vi(DType::I64, {N, S}), vi(DType::I64, {1})}).size(), 3u);
  // Opset 11: axes attribute.
  Node un11 = make_node(Op::Unsqueeze, 1, 1, {{"axes", attr_ints({1})}});
  EXPECT_EQ(out_shape(un11, {vi(DType::F32, {N, 4})}, 11), (Shape{N, 1, 4}));
}

TEST(Infer, ConcatAndSplitWithSymbols) {
  Node c = make_node(Op::Concat, 2, 1, {{"axis", attr_i(1)}}, "cat");
  EXPECT_EQ(out_shape(c, {vi(DType::F32, {N, 3}), vi(DType::F32, {N, 5})}), (Shape{N, 8}));
  EXPECT_EQ(out_shape(c, {vi(DType::F32, {N, 3}), vi(DType::F32, {4, S})}), (Shape{4, kUnknownDim}));
  EXPECT_NE(error_of(c, {vi(DType::F32, {2, 3}), vi(DType::F32, {4, 3})}).find("does not match"), std::string::npos);
  EXPECT_NE(error_of(c, {vi(DType::F32, {2, 3}), vi(DType::I64, {2, 3})}).find("dtype"), std::string::npos);
  Node s = make_node(Op::Split, 1, 2, {{"axis", attr_i(-1)}});
  EXPECT_EQ(out_shape(s, {vi(DType::F32, {N, 8})}, 13), (Shape{N, 4}));
  EXPECT_NE(error_of(s, {vi(DType::F32, {N, 7})}, 13).find("evenly"), std::string::npos);
}

TEST(Infer, SliceKeepsSymbolForFullRange) {
  Node n = make_node(Op::Slice, 4);
  Tensor st = ints({0, 1}), en = ints({INT64_MAX, -1}), ax = ints({0, 1});
  EXPECT_EQ(out_shape(n, {vi(DType::F32, {N, 10}), vi(DType::I64, {2}, &st), vi(DType::I64, {2}, &en), vi(DType::I64, {2}, &ax)}),
            (Shape{N, 8}));
  // Unknown ends with known axes: only axis 1 becomes unknown.
  Tensor ax1 = ints({1});
  EXPECT_EQ(out_shape(n, {vi(DType::F32, {N, 10}), vi(DType::I64, {1}), vi(DType::I64, {1}), vi(DType::I64, {1}, &ax1)}),
            (Shape{N, kUnknownDim}));
}

TEST(Infer, GatherShapesAndConstantIndexCheck) {
  Node g = make_node(Op::Gather, 2, 1, {{"axis", attr_i(0)}}, "g");
  Tensor idx = Tensor::scalar_i64(1);
  EXPECT_EQ(out_shape(g, {vi(DType::I64, {3}), vi(DType::I64, {}, &idx)}), Shape{});
  EXPECT_EQ(out_shape(g, {vi(DType::F32, {30522, 768}), vi(DType::I64, {N, S})}), (Shape{N, S, 768}));
  Tensor bad = Tensor::scalar_i64(3);
  EXPECT_EQ(error_of(g, {vi(DType::I64, {3}), vi(DType::I64, {}, &bad)}), "[Gather] node 'g': index 3 is out of range for axis 0 of extent 3");
  EXPECT_NE(error_of(g, {vi(DType::I64, {3}), vi(DType::F32, {})}).find("int64 or int32"), std::string::npos);
}

TEST(Infer, ExpandBroadcastsAndRejects) {
  Node e = make_node(Op::Expand, 2, 1, {}, "e");
  Tensor t = ints({2, 1, 6});
  EXPECT_EQ(out_shape(e, {vi(DType::F32, {N, 1}), vi(DType::I64, {3}, &t)}), (Shape{2, N, 6}));
  Tensor bad = ints({4, 5});
  EXPECT_NE(error_of(e, {vi(DType::F32, {3, 2}), vi(DType::I64, {2}, &bad)}).find("cannot expand [3,2] to [4,5]"), std::string::npos);
  EXPECT_EQ(out_shape(e, {vi(DType::F32, {N, 1}), vi(DType::I64, {4})}).size(), 4u);
}

TEST(Infer, DataDependentShapesUnknownUntilValuesKnown) {
  Node nz = make_node(Op::NonZero, 1);
  EXPECT_EQ(out_shape(nz, {vi(DType::F32, {3, 4})}), (Shape{2, kUnknownDim}));
  Node r = make_node(Op::Range, 3);
  EXPECT_EQ(out_shape(r, {vi(DType::I64, {}), vi(DType::I64, {}), vi(DType::I64, {})}), (Shape{kUnknownDim}));
  Tensor a = Tensor::scalar_i64(0), b = Tensor::scalar_i64(10), d = Tensor::scalar_i64(3);
  EXPECT_EQ(out_shape(r, {vi(DType::I64, {}, &a), vi(DType::I64, {}, &b), vi(DType::I64, {}, &d)}), (Shape{4}));
  Node cos = make_node(Op::ConstantOfShape, 1);
  EXPECT_EQ(out_shape(cos, {vi(DType::I64, {3})}).size(), 3u);
  Node tk = make_node(Op::TopK, 2, 2, {}, "tk");
  EXPECT_EQ(out_shape(tk, {vi(DType::F32, {N, 9}), vi(DType::I64, {1})}), (Shape{N, kUnknownDim}));
  Tensor k = ints({10});
  EXPECT_NE(error_of(tk, {vi(DType::F32, {N, 9}), vi(DType::I64, {1}, &k)}).find("k = 10 must be in [0, 9]"), std::string::npos);
}

TEST(Infer, ShapeAndCastTypes) {
  Node s = make_node(Op::Shape, 1, 1, {{"start", attr_i(1)}});
  auto r = infer(s, {vi(DType::F16, {N, S, 4})}, 15);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)[0].dtype, DType::I64);
  EXPECT_EQ((*r)[0].shape, Shape{2});
  Node c = make_node(Op::Cast, 1, 1, {{"to", attr_i(10)}});
  auto rc = infer(c, {vi(DType::F32, {N, 3})});
  ASSERT_TRUE(rc.ok());
  EXPECT_EQ((*rc)[0].dtype, DType::F16);
  EXPECT_EQ((*rc)[0].shape, (Shape{N, 3}));
  Node c8 = make_node(Op::Cast, 1, 1, {{"to", attr_i(17)}}, "c8");  // FLOAT8E4M3FN
  auto r8 = infer(c8, {vi(DType::F32, {2})});
  ASSERT_TRUE(r8.ok());
  EXPECT_EQ((*r8)[0].dtype, DType::F8E4M3FN);
  Node cc = make_node(Op::Cast, 1, 1, {{"to", attr_i(14)}}, "cc");  // COMPLEX64: no gpuopt type
  auto rcc = infer(cc, {vi(DType::F32, {2})});
  ASSERT_FALSE(rcc.ok());
  EXPECT_EQ(rcc.status().code(), StatusCode::kUnimplemented);
}

TEST(Infer, PadAndTransposeErrors) {
  Node p = make_node(Op::Pad, 2, 1, {{"mode", attr_s("mirror")}}, "p");
  EXPECT_NE(error_of(p, {vi(DType::F32, {2, 3}), vi(DType::I64, {4})}, 13).find("mode 'mirror'"), std::string::npos);
  Node t = make_node(Op::Transpose, 1, 1, {{"perm", attr_ints({0, 0, 1})}}, "t");
  EXPECT_EQ(error_of(t, {vi(DType::F32, {2, 3, 4})}), "[Transpose] node 't': perm [0,0,1] is not a permutation of 0..2");
  Node d2s = make_node(Op::DepthToSpace, 1, 1, {{"blocksize", attr_i(2)}}, "d");
  EXPECT_NE(error_of(d2s, {vi(DType::F32, {1, 6, 2, 2})}).find("not divisible"), std::string::npos);
}

// Upsample-era Resize (opset 10: X, scales) with an empty scales tensor once read a null sizes
// pointer; it must be an error that says what is missing.
TEST(ResizeErrors, EmptyScalesAtOpset10IsAnError) {
  Node n = make_node(Op::Resize, 2);
  Tensor x = random_tensor(DType::F32, {1, 1, 2, 2});
  Tensor scales = Tensor::empty(DType::F32, {0});
  auto r = run1(n, {&x, &scales}, 10);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("scales or sizes"), std::string::npos) << r.status().to_string();
}

}  // namespace
}  // namespace gpuopt::tensor_test
