// Shape arithmetic at load time (ValueInfo::dims_value), op by op: the elements each op computes
// from shape values, with symbols for dynamic dims, and what it refuses to guess. The forms are
// the ones torch's exporter writes (BERT's token-type ids expanded to Shape(input_ids), GPT-2's
// arange over the sequence); the end-to-end check is fuse_attention_test's head splits.
#include "test_util.h"

namespace gpuopt::tensor_test {
namespace {

constexpr int64_t N = kFirstSymbolDim;      // symbolic batch "N"
constexpr int64_t S = kFirstSymbolDim - 1;  // symbolic sequence "S"

ValueInfo shape_value(std::vector<int64_t> dims) {
  ValueInfo v = vi(DType::I64, {static_cast<int64_t>(dims.size())});
  v.dims_value = std::move(dims);
  return v;
}

ValueInfo run(const Node& n, const std::vector<ValueInfo>& in) {
  std::vector<const ValueInfo*> p;
  for (const auto& v : in) p.push_back(&v);
  auto r = infer_node(n, p, 17);
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  return r.ok() ? (*r)[0] : ValueInfo{};
}

using Dims = std::optional<std::vector<int64_t>>;

TEST(ShapeValues, ShapeGatherSliceConcatCarryDimsAndSymbols) {
  const ValueInfo s = run(make_node(Op::Shape, 1), {vi(DType::F32, {N, S, 768})});
  EXPECT_EQ(s.dims_value, (Dims{{N, S, 768}}));
  Tensor i1 = Tensor::scalar_i64(1);
  const ValueInfo g = run(make_node(Op::Gather, 2), {s, vi(DType::I64, {}, &i1)});
  EXPECT_EQ(g.dims_value, (Dims{{S}}));
  Tensor st = ints({0}), en = ints({-1});
  const ValueInfo sl = run(make_node(Op::Slice, 3), {s, vi(DType::I64, {1}, &st), vi(DType::I64, {1}, &en)});
  EXPECT_EQ(sl.dims_value, (Dims{{N, S}}));
  Tensor hd = ints({-1, 64});
  const ValueInfo c = run(make_node(Op::Concat, 2, 1, {{"axis", int_attr(0)}}), {sl, vi(DType::I64, {2}, &hd)});
  EXPECT_EQ(c.dims_value, (Dims{{N, S, -1, 64}}));
  // Reshape by it: the -1 is inferred across the symbols.
  const ValueInfo r = run(make_node(Op::Reshape, 2), {vi(DType::F16, {N, S, 768}), c});
  EXPECT_EQ(r.shape, (Shape{N, S, 12, 64}));
  // An unknown dim makes no shape value.
  EXPECT_FALSE(run(make_node(Op::Shape, 1), {vi(DType::F32, {kUnknownDim, 4})}).dims_value.has_value());
}

// torch's expand(b, s): Expand(x, Where(Equal(t, ConstantOfShape(Shape(t)) * -1), 1, t)), t = [N, S].
TEST(ShapeValues, TorchExpandIdiomKeepsTheBatchSymbol) {
  const ValueInfo t = shape_value({N, S});
  Tensor two = ints({2});
  Tensor one = Tensor::from_vector<int64_t>(DType::I64, {1}, {1});
  Attribute value;
  value.kind = Attribute::Kind::kTensor;
  value.t = one;
  Node cos = make_node(Op::ConstantOfShape, 1, 1, {{"value", value}});
  const ValueInfo ones = run(cos, {vi(DType::I64, {1}, &two)});
  EXPECT_EQ(ones.dims_value, (Dims{{1, 1}}));
  Tensor m1 = Tensor::scalar_i64(-1);
  const ValueInfo neg = run(make_node(Op::Mul, 2), {ones, vi(DType::I64, {}, &m1)});
  EXPECT_EQ(neg.dims_value, (Dims{{-1, -1}}));
  const ValueInfo eq = run(make_node(Op::Equal, 2), {t, neg});
  EXPECT_EQ(eq.dims_value, (Dims{{0, 0}}));  // a dim is never -1
  const ValueInfo target = run(make_node(Op::Where, 3), {eq, ones, t});
  EXPECT_EQ(target.dims_value, (Dims{{N, S}}));
  EXPECT_EQ(run(make_node(Op::Expand, 2), {vi(DType::I64, {1, S}), target}).shape, (Shape{N, S}));
  // Equal of a symbol and a known dim could go either way: no shape value.
  EXPECT_FALSE(run(make_node(Op::Equal, 2), {t, shape_value({4, 4})}).dims_value.has_value());
  // Mul of two symbols is no dim gpuopt can name.
  EXPECT_FALSE(run(make_node(Op::Mul, 2), {t, t}).dims_value.has_value());
}

TEST(ShapeValues, RangeOverASequenceLengthHasThatLength) {
  Tensor zero = Tensor::scalar_i64(0), step = Tensor::scalar_i64(1), two = Tensor::scalar_i64(2);
  ValueInfo len = vi(DType::I64, {});
  len.dims_value = std::vector<int64_t>{S};
  EXPECT_EQ(run(make_node(Op::Range, 3), {vi(DType::I64, {}, &zero), len, vi(DType::I64, {}, &step)}).shape, (Shape{S}));
  // Another step: unknown.
  EXPECT_EQ(run(make_node(Op::Range, 3), {vi(DType::I64, {}, &zero), len, vi(DType::I64, {}, &two)}).shape,
            (Shape{kUnknownDim}));
}

}  // namespace
}  // namespace gpuopt::tensor_test
