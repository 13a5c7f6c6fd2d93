// Load-time shape inference with unknown/symbolic dims, FLOP estimates, and the once-rounded
// half-precision output path shared by every NN kernel.
#include "ops/common/nn_util.h"
#include "nn_test_util.h"

namespace gpuopt {
namespace {

using namespace testing_nn;

constexpr int64_t kN = kFirstSymbolDim;  // symbolic batch "N"

ValueInfo vi(DType dt, Shape s) {
  return ValueInfo{dt, true, std::move(s), nullptr};
}

Shape infer1(const Node& n, std::vector<ValueInfo> ins, int opset = 17, size_t out = 0) {
  std::vector<const ValueInfo*> p;
  for (auto& v : ins) p.push_back(&v);
  auto r = infer_node(n, p, opset);
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  return r.ok() ? (*r)[out].shape : Shape{};
}

TEST(LoadTimeInference, SymbolicBatchPropagates) {
  AttributeMap pool;
  pool["kernel_shape"] = attr_ints({3, 3});
  pool["strides"] = attr_ints({2, 2});
  pool["pads"] = attr_ints({1, 1, 1, 1});
  EXPECT_EQ(infer1(make_node(Op::MaxPool, 1, 2, pool), {vi(DType::F32, {kN, 64, 112, 112})}), (Shape{kN, 64, 56, 56}));
  EXPECT_EQ(infer1(make_node(Op::MaxPool, 1, 2, pool), {vi(DType::F32, {kN, 64, kUnknownDim, 112})}, 17, 1),
            (Shape{kN, 64, kUnknownDim, 56}));
  EXPECT_EQ(infer1(make_node(Op::GlobalAveragePool, 1, 1), {vi(DType::F32, {kN, 2048, 7, 7})}),
            (Shape{kN, 2048, 1, 1}));
  EXPECT_EQ(
      infer1(make_node(Op::BatchNormalization, 5, 1), {vi(DType::F32, {kN, 8, 4, 4}), vi(DType::F32, {8}),
                                                       vi(DType::F32, {8}), vi(DType::F32, {8}), vi(DType::F32, {8})}),
      (Shape{kN, 8, 4, 4}));
  EXPECT_EQ(infer1(make_node(Op::LayerNormalization, 3, 3),
                   {vi(DType::F16, {kN, kN - 1, 768}), vi(DType::F16, {768}), vi(DType::F16, {768})}, 17, 1),
            (Shape{kN, kN - 1, 1}));
  EXPECT_EQ(
      infer1(make_node(Op::Gemm, 3, 1), {vi(DType::F32, {kN, 512}), vi(DType::F32, {512, 10}), vi(DType::F32, {10})}),
      (Shape{kN, 10}));
  AttributeMap eq;
  eq["equation"] = attr_s("bhqd,bhkd->bhqk");
  EXPECT_EQ(infer1(make_node(Op::Einsum, 2, 1, eq),
                   {vi(DType::F32, {kN, 12, kN - 1, 64}), vi(DType::F32, {kN, 12, kN - 1, 64})}),
            (Shape{kN, 12, kN - 1, kN - 1}));
  EXPECT_EQ(
      infer1(make_node(Op::QuantizeLinear, 3, 1), {vi(DType::F32, {kN, 3}), vi(DType::F32, {}), vi(DType::I8, {})}, 13),
      (Shape{kN, 3}));
  EXPECT_EQ(infer1(make_node(Op::MatMulInteger, 2, 1), {vi(DType::U8, {kN, 7, 16}), vi(DType::I8, {16, 5})}, 10),
            (Shape{kN, 7, 5}));
}

TEST(LoadTimeInference, LayerNormStatsDtypeIsStashType) {
  std::vector<ValueInfo> ins = {vi(DType::F16, {2, 8}), vi(DType::F16, {8})};
  std::vector<const ValueInfo*> p = {&ins[0], &ins[1]};
  auto r = infer_node(make_node(Op::LayerNormalization, 2, 3), p, 17);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)[0].dtype, DType::F16);
  EXPECT_EQ((*r)[1].dtype, DType::F32);
  EXPECT_EQ((*r)[2].dtype, DType::F32);
}

double flops_of(const Node& n, std::vector<ValueInfo> ins, int opset = 17) {
  std::vector<const ValueInfo*> p;
  for (auto& v : ins) p.push_back(&v);
  auto r = infer_node(n, p, opset);
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  std::vector<const ValueInfo*> o;
  for (auto& v : *r) o.push_back(&v);
  FlopsContext ctx{n, p, o};
  return op_def(n.op).flops(ctx);
}

TEST(Flops, CountsMultiplyAddsAsTwo) {
  // ResNet-50 first conv at 224: 118.0 M MACs -> 2x plus one bias add per output.
  AttributeMap c;
  c["strides"] = attr_ints({2, 2});
  c["pads"] = attr_ints({3, 3, 3, 3});
  const double conv = flops_of(make_node(Op::Conv, 3, 1, c),
                               {vi(DType::F32, {1, 3, 224, 224}), vi(DType::F32, {64, 3, 7, 7}), vi(DType::F32, {64})});
  EXPECT_DOUBLE_EQ(conv, 64.0 * 112 * 112 * (2 * 3 * 49 + 1));
  EXPECT_DOUBLE_EQ(flops_of(make_node(Op::MatMul, 2, 1), {vi(DType::F32, {4, 128, 768}), vi(DType::F32, {768, 3072})}),
                   2.0 * 4 * 128 * 3072 * 768);
  // A dynamic batch counts as 1: the per-sample figure.
  EXPECT_DOUBLE_EQ(flops_of(make_node(Op::MatMul, 2, 1), {vi(DType::F32, {kN, 128, 768}), vi(DType::F32, {768, 64})}),
                   2.0 * 128 * 64 * 768);
  AttributeMap eq;
  eq["equation"] = attr_s("bij,bjk->bik");
  EXPECT_DOUBLE_EQ(flops_of(make_node(Op::Einsum, 2, 1, eq), {vi(DType::F32, {2, 3, 5}), vi(DType::F32, {2, 5, 7})}),
                   2.0 * 2 * 3 * 5 * 7);
  AttributeMap g;
  g["group"] = attr_i(32);
  EXPECT_DOUBLE_EQ(
      flops_of(make_node(Op::Conv, 2, 1, g), {vi(DType::F32, {1, 32, 10, 10}), vi(DType::F32, {32, 1, 3, 3})}),
      32.0 * 8 * 8 * 2 * 9);
}

TEST(Flops, WindowOpsAndTheOtherConvolutions) {
  // The pools: one op per kernel tap per output (LpPool two: |x|^p and the sum).
  AttributeMap pool;
  pool["kernel_shape"] = attr_ints({3, 3});
  pool["strides"] = attr_ints({2, 2});
  pool["pads"] = attr_ints({1, 1, 1, 1});
  const std::vector<ValueInfo> x = {vi(DType::F32, {kN, 64, 112, 112})};
  EXPECT_DOUBLE_EQ(flops_of(make_node(Op::MaxPool, 1, 1, pool), x), 64.0 * 56 * 56 * 9);
  EXPECT_DOUBLE_EQ(flops_of(make_node(Op::AveragePool, 1, 1, pool), x), 64.0 * 56 * 56 * 9);
  EXPECT_DOUBLE_EQ(flops_of(make_node(Op::LpPool, 1, 1, pool), x), 64.0 * 56 * 56 * 9 * 2);
  // ConvTranspose: every input element meets M/group x kernel taps.
  EXPECT_DOUBLE_EQ(
      flops_of(make_node(Op::ConvTranspose, 2, 1), {vi(DType::F32, {1, 8, 5, 5}), vi(DType::F32, {8, 4, 3, 3})}),
      2.0 * 8 * 25 * 4 * 9);
  // The integer convolutions: output elements x C/group x taps multiply-adds, no bias term.
  const double qconv = 2.0 * 4 * 6 * 6 * 3 * 9;
  EXPECT_DOUBLE_EQ(flops_of(make_node(Op::ConvInteger, 2, 1), {vi(DType::U8, {1, 3, 8, 8}), vi(DType::U8, {4, 3, 3, 3})}, 10),
                   qconv);
  EXPECT_DOUBLE_EQ(flops_of(make_node(Op::QLinearConv, 8, 1),
                            {vi(DType::U8, {1, 3, 8, 8}), vi(DType::F32, {}), vi(DType::U8, {}), vi(DType::U8, {4, 3, 3, 3}),
                             vi(DType::F32, {}), vi(DType::U8, {}), vi(DType::F32, {}), vi(DType::U8, {})},
                            10),
                   qconv);
}

TEST(LoadTimeInference, PoolWindowShapes) {
  AttributeMap pool;
  pool["kernel_shape"] = attr_ints({2, 2});
  pool["ceil_mode"] = attr_i(1);
  pool["strides"] = attr_ints({2, 2});
  // LpPool and MaxPool read one window: ceil_mode rounds 7/2 up, symbolic and unknown dims pass through.
  EXPECT_EQ(infer1(make_node(Op::LpPool, 1, 1, pool), {vi(DType::F32, {kN, 3, 7, kUnknownDim})}),
            (Shape{kN, 3, 4, kUnknownDim}));
  EXPECT_EQ(infer1(make_node(Op::MaxPool, 1, 1, pool), {vi(DType::F32, {kN, 3, 7, kUnknownDim})}),
            (Shape{kN, 3, 4, kUnknownDim}));
  // Input rank unknown: the kernel's rank + 2.
  EXPECT_EQ(infer1(make_node(Op::LpPool, 1, 1, pool), {ValueInfo{DType::F32, false, {}, nullptr}}),
            (Shape{kUnknownDim, kUnknownDim, kUnknownDim, kUnknownDim}));
  for (Op op : {Op::LpPool, Op::AveragePool}) {
    std::vector<ValueInfo> ins = {vi(DType::F32, {1, 3, 7})};
    std::vector<const ValueInfo*> p = {&ins[0]};
    auto r = infer_node(make_node(op, 1, 1, pool), p, 17);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("kernel_shape [2,2] has rank 2; input has 1 spatial dims"), std::string::npos)
        << r.status().to_string();
    auto missing = infer_node(make_node(op, 1, 1), p, 17);
    ASSERT_FALSE(missing.ok());
    EXPECT_NE(missing.status().message().find("missing required attribute 'kernel_shape'"), std::string::npos)
        << missing.status().to_string();
  }
}

TEST(HalfOutput, RoundedOnceFromDouble) {
  // 1 + 2^-11 + 2^-40 lies just above the midpoint between the f16 neighbours 1 and 1 + 2^-10.
  // Rounding through float first lands exactly on the midpoint and ties to 1 (wrong).
  const double d = 1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40);
  Tensor h = Tensor::empty(DType::F16, {1});
  nn::from_doubles(h, &d);
  EXPECT_EQ(h.get_f64(0), 1.0 + std::ldexp(1.0, -10));
  const double e = 1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -45);  // same for bf16 (7 fraction bits)
  Tensor b = Tensor::empty(DType::BF16, {1});
  nn::from_doubles(b, &e);
  EXPECT_EQ(b.get_f64(0), 1.0 + std::ldexp(1.0, -7));
  const double exact = 1.5;
  nn::from_doubles(h, &exact);
  EXPECT_EQ(h.get_f64(0), 1.5);
}

}  // namespace
}  // namespace gpuopt
