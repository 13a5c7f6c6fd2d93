// Ops of src/ir/ops_misc.inc (in src/ops/<family>/) on small hand-checked cases; the ONNX
// node tests (gpuopt_conformance) are the main oracle, these pin the edge rules each kernel
// documents and the error messages for bad input.
#include "op_test_util.h"

#include <cmath>
#include <numbers>

namespace gpuopt {
namespace {

using namespace gpuopt::testing;

Tensor f32(Shape s, std::vector<float> v) { return Tensor::from_vector<float>(DType::F32, std::move(s), v); }
Tensor i64(Shape s, std::vector<int64_t> v) { return Tensor::from_vector<int64_t>(DType::I64, std::move(s), v); }
std::vector<double> values(const Tensor& t) {
  std::vector<double> v;
  for (int64_t i = 0; i < t.numel(); ++i) v.push_back(t.get_f64(i));
  return v;
}
void expect_near_all(const Tensor& t, const std::vector<double>& want, double tol = 1e-6) {
  ASSERT_EQ(t.numel(), static_cast<int64_t>(want.size()));
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(t.get_f64(static_cast<int64_t>(i)), want[i], tol) << "element " << i;
}

TEST(MiscTensor, OneHotWrapsNegativeIndicesAndHonoursAxis) {
  Tensor idx = i64({3}, {0, -1, 2});
  Tensor depth = i64({}, {3});
  Tensor vals = f32({2}, {-1, 5});
  std::vector<Tensor> y = run(make_node(Op::OneHot, 3), {&idx, &depth, &vals}, 11);
  ASSERT_EQ(y[0].shape(), (Shape{3, 3}));
  // rows: class 0, class 2 (-1 mod 3), class 2
  EXPECT_EQ(values(y[0]), (std::vector<double>{5, -1, -1, -1, -1, 5, -1, -1, 5}));
  y = run(make_node(Op::OneHot, 3, 1, {{"axis", attr_i(0)}}), {&idx, &depth, &vals}, 11);
  ASSERT_EQ(y[0].shape(), (Shape{3, 3}));
  EXPECT_EQ(values(y[0]), (std::vector<double>{5, -1, -1, -1, -1, -1, -1, 5, 5}));  // transposed
}

TEST(MiscTensor, EyeLikeOffDiagonalAndDtype) {
  Tensor x = Tensor::zeros(DType::I32, {3, 4});
  std::vector<Tensor> y = run(make_node(Op::EyeLike, 1, 1, {{"k", attr_i(1)}, {"dtype", attr_i(11)}}), {&x}, 22);
  ASSERT_EQ(y[0].dtype(), DType::F64);
  EXPECT_EQ(values(y[0]), (std::vector<double>{0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1}));
  Tensor v = Tensor::zeros(DType::F32, {3});
  EXPECT_NE(run_error(make_node(Op::EyeLike, 1), {&v}, 22).find("must be 2-D"), std::string::npos);
}

TEST(MiscTensor, CompressWithAndWithoutAxis) {
  Tensor x = f32({3, 2}, {1, 2, 3, 4, 5, 6});
  Tensor c = Tensor::from_vector<int64_t>(DType::Bool, {3}, {0, 1, 1});
  std::vector<Tensor> y = run(make_node(Op::Compress, 2, 1, {{"axis", attr_i(0)}}), {&x, &c}, 11);
  EXPECT_EQ(y[0].shape(), (Shape{2, 2}));
  EXPECT_EQ(values(y[0]), (std::vector<double>{3, 4, 5, 6}));
  y = run(make_node(Op::Compress, 2), {&x, &c}, 11);  // flattened: condition shorter than the input
  EXPECT_EQ(values(y[0]), (std::vector<double>{2, 3}));
  Tensor c2 = Tensor::from_vector<int64_t>(DType::Bool, {4}, {0, 0, 0, 1});
  EXPECT_NE(run_error(make_node(Op::Compress, 2, 1, {{"axis", attr_i(0)}}), {&x, &c2}, 11).find("index 3"),
            std::string::npos);
}

TEST(MiscTensor, ReverseSequenceReversesOnlyThePrefix) {
  // time-major [T=3, B=2]: batch 0 reverses 3 steps, batch 1 only 2
  Tensor x = f32({3, 2}, {0, 10, 1, 11, 2, 12});
  Tensor lens = i64({2}, {3, 2});
  std::vector<Tensor> y = run(make_node(Op::ReverseSequence, 2), {&x, &lens}, 11);
  EXPECT_EQ(values(y[0]), (std::vector<double>{2, 11, 1, 10, 0, 12}));
}

TEST(MiscTensor, CenterCropPadOddDifferences) {
  Tensor x = f32({5}, {0, 1, 2, 3, 4});
  Tensor to2 = i64({1}, {2}), to8 = i64({1}, {8});
  // crop 5 -> 2: start (5-2)/2 = 1; pad 5 -> 8: 1 zero before, 2 after
  EXPECT_EQ(values(run(make_node(Op::CenterCropPad, 2), {&x, &to2}, 18)[0]), (std::vector<double>{1, 2}));
  EXPECT_EQ(values(run(make_node(Op::CenterCropPad, 2), {&x, &to8}, 18)[0]),
            (std::vector<double>{0, 0, 1, 2, 3, 4, 0, 0}));
}

TEST(MiscTensor, BitCastKeepsBits) {
  Tensor x = f32({2}, {1.0f, -2.0f});
  std::vector<Tensor> y = run(make_node(Op::BitCast, 1, 1, {{"to", attr_i(6)}}), {&x}, 26);
  ASSERT_EQ(y[0].dtype(), DType::I32);
  EXPECT_EQ(y[0].data<int32_t>()[0], 0x3f800000);
  EXPECT_EQ(static_cast<uint32_t>(y[0].data<int32_t>()[1]), 0xc0000000u);
  EXPECT_NE(run_error(make_node(Op::BitCast, 1, 1, {{"to", attr_i(7)}}), {&x}, 26).find("differ in width"),
            std::string::npos);
}

TEST(MiscTensor, TensorScatterLinearAndCircular) {
  Tensor past = Tensor::zeros(DType::F32, {1, 4, 1});  // axis -2 = sequence
  Tensor upd = f32({1, 2, 1}, {7, 8});
  Tensor w = i64({1}, {3});
  EXPECT_NE(run_error(make_node(Op::TensorScatter, 3), {&past, &upd, &w}, 24).find("outside the cache"),
            std::string::npos);
  std::vector<Tensor> y =
      run(make_node(Op::TensorScatter, 3, 1, {{"mode", attr_s("circular")}}), {&past, &upd, &w}, 24);
  EXPECT_EQ(values(y[0]), (std::vector<double>{8, 0, 0, 7}));
}

TEST(MiscPoolNorm, LpPoolAndLpNormalization) {
  Tensor x = f32({1, 1, 3}, {3, -4, 0});
  std::vector<Tensor> y = run(make_node(Op::LpPool, 1, 1, {{"kernel_shape", attr_ints({2})}, {"p", attr_i(2)}}), {&x}, 18);
  expect_near_all(y[0], {5, 4});
  Tensor m = f32({2, 2}, {3, -4, 0, 0});
  expect_near_all(run(make_node(Op::LpNormalization, 1, 1, {{"p", attr_i(1)}}), {&m}, 22)[0],
                  {3.0 / 7, -4.0 / 7, 0, 0});  // zero row stays zero
  expect_near_all(run(make_node(Op::LpNormalization, 1), {&m}, 22)[0], {0.6, -0.8, 0, 0});
}

TEST(MiscPoolNorm, LrnWindowIsAsymmetricForEvenSize) {
  // size 2: channel c sums c-0..c+1 (floor and ceil of (size-1)/2)
  Tensor x = f32({1, 3, 1, 1}, {1, 2, 3});
  std::vector<Tensor> y = run(
      make_node(Op::LRN, 1, 1, {{"size", attr_i(2)}, {"alpha", attr_f(2)}, {"beta", attr_f(1)}, {"bias", attr_f(1)}}),
      {&x}, 13);
  expect_near_all(y[0], {1.0 / (1 + 5), 2.0 / (1 + 13), 3.0 / (1 + 9)});
}

TEST(MiscPoolNorm, MaxUnpoolPlacesValuesAndPads) {
  Tensor x = f32({1, 1, 1, 1}, {9});
  Tensor ind = i64({1, 1, 1, 1}, {3});
  Tensor shape = i64({4}, {1, 1, 3, 3});
  std::vector<Tensor> y = run(make_node(Op::MaxUnpool, 3, 1, {{"kernel_shape", attr_ints({2, 2})}}), {&x, &ind, &shape}, 11);
  ASSERT_EQ(y[0].shape(), (Shape{1, 1, 3, 3}));
  // index 3 in the default 2x2 output is (1, 1); it keeps those coordinates in the 3x3 output
  EXPECT_EQ(values(y[0]), (std::vector<double>{0, 0, 0, 0, 9, 0, 0, 0, 0}));
}

TEST(MiscSignal, WindowsAndDft) {
  Tensor n = Tensor::from_vector<int64_t>(DType::I32, {}, {4});
  expect_near_all(run(make_node(Op::HannWindow, 1), {&n}, 17)[0], {0, 0.5, 1, 0.5});
  expect_near_all(run(make_node(Op::HannWindow, 1, 1, {{"periodic", attr_i(0)}}), {&n}, 17)[0], {0, 0.75, 0.75, 0});
  expect_near_all(run(make_node(Op::BlackmanWindow, 1), {&n}, 17)[0], {0, 0.34, 1, 0.34});
  // DFT of [1, 2, 3, 4] (real): [10, -2+2i, -2, -2-2i]; onesided keeps 3 bins
  Tensor x = f32({1, 4, 1}, {1, 2, 3, 4});
  std::vector<Tensor> y = run(make_node(Op::DFT, 1, 1, {{"axis", attr_i(1)}}), {&x}, 19);
  ASSERT_EQ(y[0].shape(), (Shape{1, 4, 2}));
  expect_near_all(y[0], {10, 0, -2, 2, -2, 0, -2, -2}, 1e-5);
  // inverse onesided (irfft) of the half spectrum gives the signal back
  Tensor half = f32({1, 3, 2}, {10, 0, -2, 2, -2, 0});
  Tensor axis = i64({}, {1});
  y = run(make_node(Op::DFT, 3, 1, {{"inverse", attr_i(1)}, {"onesided", attr_i(1)}}), {&half, nullptr, &axis}, 20);
  ASSERT_EQ(y[0].shape(), (Shape{1, 4, 1}));
  expect_near_all(y[0], {1, 2, 3, 4}, 1e-5);
}

TEST(MiscQuant, DynamicQuantizeLinear) {
  Tensor x = f32({3}, {0, 2, -3});
  std::vector<Tensor> y = run(make_node(Op::DynamicQuantizeLinear, 1, 3), {&x}, 11);
  // range [-3, 2]: scale 5/255, zero point round(3 / scale) = 153
  EXPECT_FLOAT_EQ(y[1].data<float>()[0], 5.0f / 255.0f);
  EXPECT_EQ(y[2].data<uint8_t>()[0], 153);
  EXPECT_EQ(values(y[0]), (std::vector<double>{153, 255, 0}));
}

TEST(MiscQuant, ConvIntegerSubtractsZeroPoints) {
  Tensor x = Tensor::from_vector<int64_t>(DType::U8, {1, 1, 2, 2}, {10, 11, 12, 13});
  Tensor w = Tensor::from_vector<int64_t>(DType::U8, {1, 1, 2, 2}, {1, 1, 1, 2});
  Tensor xz = Tensor::from_vector<int64_t>(DType::U8, {}, {10});
  Tensor wz = Tensor::from_vector<int64_t>(DType::U8, {}, {1});
  std::vector<Tensor> y = run(make_node(Op::ConvInteger, 4), {&x, &w, &xz, &wz}, 10);
  ASSERT_EQ(y[0].dtype(), DType::I32);
  EXPECT_EQ(values(y[0]), (std::vector<double>{3}));  // (0,1,2,3) . (0,0,0,1)
}

TEST(MiscImage, Col2ImSumsOverlaps) {
  // 1 channel, 1x3 image, 1x2 blocks at stride 1: two blocks overlap on pixel 1
  Tensor x = f32({1, 2, 2}, {1, 2, 10, 20});  // [tap][block]
  Tensor img = i64({2}, {1, 3}), blk = i64({2}, {1, 2});
  std::vector<Tensor> y = run(make_node(Op::Col2Im, 3), {&x, &img, &blk}, 18);
  ASSERT_EQ(y[0].shape(), (Shape{1, 1, 1, 3}));
  EXPECT_EQ(values(y[0]), (std::vector<double>{1, 2 + 10, 20}));
}

TEST(MiscImage, AffineGridIdentityAndGridSample) {
  Tensor theta = f32({1, 2, 3}, {1, 0, 0, 0, 1, 0});
  Tensor size = i64({4}, {1, 1, 2, 2});
  std::vector<Tensor> g = run(make_node(Op::AffineGrid, 2, 1, {{"align_corners", attr_i(1)}}), {&theta, &size}, 20);
  ASSERT_EQ(g[0].shape(), (Shape{1, 2, 2, 2}));
  EXPECT_EQ(values(g[0]), (std::vector<double>{-1, -1, 1, -1, -1, 1, 1, 1}));
  // Identity grid with align_corners samples the input back exactly.
  Tensor x = f32({1, 1, 2, 2}, {1, 2, 3, 4});
  std::vector<Tensor> y = run(make_node(Op::GridSample, 2, 1, {{"align_corners", attr_i(1)}}), {&x, &g[0]}, 20);
  expect_near_all(y[0], {1, 2, 3, 4});
  // The centre (0, 0) averages the four pixels; outside with zeros padding reads 0.
  Tensor c = f32({1, 1, 2, 2}, {0, 0, 5, 5});
  y = run(make_node(Op::GridSample, 2, 1, {{"align_corners", attr_i(1)}}), {&x, &c}, 20);
  expect_near_all(y[0], {2.5, 0});
  y = run(make_node(Op::GridSample, 2, 1, {{"align_corners", attr_i(1)}, {"padding_mode", attr_s("border")}}), {&x, &c}, 20);
  expect_near_all(y[0], {2.5, 4});
}

TEST(MiscDetect, NonMaxSuppressionSuppressesOverlaps) {
  // boxes [y1, x1, y2, x2]: 0 and 1 overlap (IoU 0.81), 2 is apart
  Tensor boxes = f32({1, 3, 4}, {0, 0, 1, 1, 0, 0.1f, 1, 1.1f, 0, 5, 1, 6});
  Tensor scores = f32({1, 1, 3}, {0.8f, 0.9f, 0.3f});
  Tensor maxb = i64({1}, {3});
  Tensor iou = f32({1}, {0.5f});
  std::vector<Tensor> y = run(make_node(Op::NonMaxSuppression, 4), {&boxes, &scores, &maxb, &iou}, 11);
  ASSERT_EQ(y[0].shape(), (Shape{2, 3}));
  EXPECT_EQ(y[0].to_i64_vector(), (std::vector<int64_t>{0, 0, 1, 0, 0, 2}));
  Tensor thr = f32({1}, {0.5f});
  y = run(make_node(Op::NonMaxSuppression, 5), {&boxes, &scores, &maxb, &iou, &thr}, 11);
  EXPECT_EQ(y[0].to_i64_vector(), (std::vector<int64_t>{0, 0, 1}));
}

TEST(MiscDetect, UniqueSortedAndUnsorted) {
  Tensor x = f32({6}, {2, 1, 1, 3, 4, 3});
  std::vector<Tensor> y = run(make_node(Op::Unique, 1, 4), {&x}, 11);
  EXPECT_EQ(values(y[0]), (std::vector<double>{1, 2, 3, 4}));
  EXPECT_EQ(y[1].to_i64_vector(), (std::vector<int64_t>{1, 0, 3, 4}));
  EXPECT_EQ(y[2].to_i64_vector(), (std::vector<int64_t>{1, 0, 0, 2, 3, 2}));
  EXPECT_EQ(y[3].to_i64_vector(), (std::vector<int64_t>{2, 1, 2, 1}));
  y = run(make_node(Op::Unique, 1, 4, {{"sorted", attr_i(0)}}), {&x}, 11);
  EXPECT_EQ(values(y[0]), (std::vector<double>{2, 1, 3, 4}));
  EXPECT_EQ(y[2].to_i64_vector(), (std::vector<int64_t>{0, 1, 1, 2, 3, 2}));
  Tensor m = f32({3, 2}, {1, 0, 0, 1, 1, 0});
  y = run(make_node(Op::Unique, 1, 4, {{"axis", attr_i(0)}}), {&m}, 11);
  EXPECT_EQ(y[0].shape(), (Shape{2, 2}));
  EXPECT_EQ(values(y[0]), (std::vector<double>{0, 1, 1, 0}));
  EXPECT_EQ(y[3].to_i64_vector(), (std::vector<int64_t>{1, 2}));
}

TEST(MiscImage, DeformConvZeroOffsetIsConvAndHalfPixelShift) {
  Tensor x = f32({1, 1, 2, 2}, {1, 2, 3, 4});
  Tensor w = f32({1, 1, 2, 2}, {1, 1, 1, 1});
  Tensor off = Tensor::zeros(DType::F32, {1, 8, 1, 1});
  EXPECT_EQ(values(run(make_node(Op::DeformConv, 3), {&x, &w, &off}, 19)[0]), (std::vector<double>{10}));
  // dx = +0.5 for every tap: (1+2)/2 + 2/2 + (3+4)/2 + 4/2, the right column reading zeros outside
  Tensor shift = f32({1, 8, 1, 1}, {0, 0.5f, 0, 0.5f, 0, 0.5f, 0, 0.5f});
  expect_near_all(run(make_node(Op::DeformConv, 3), {&x, &w, &shift}, 19)[0], {8});
}

TEST(MiscSequence, CausalConvWithStateCarriesContext) {
  Tensor x = f32({1, 1, 3}, {1, 2, 3});
  Tensor w = f32({1, 1, 2}, {1, 10});
  std::vector<Tensor> y = run(make_node(Op::CausalConvWithState, 2, 2), {&x, &w}, 27);
  EXPECT_EQ(values(y[0]), (std::vector<double>{10, 21, 32}));  // left context 0
  EXPECT_EQ(values(y[1]), (std::vector<double>{3}));
  Tensor past = f32({1, 1, 1}, {5});
  y = run(make_node(Op::CausalConvWithState, 4, 2), {&x, &w, nullptr, &past}, 27);
  EXPECT_EQ(values(y[0]), (std::vector<double>{15, 21, 32}));
}

TEST(MiscSequence, LinearAttentionLinearAndGated) {
  Tensor q = f32({1, 2, 1}, {1, 1}), k = f32({1, 2, 1}, {2, 3}), v = f32({1, 2, 1}, {4, 5});
  AttributeMap a = {{"q_num_heads", attr_i(1)}, {"kv_num_heads", attr_i(1)}, {"scale", attr_f(1)},
                    {"update_rule", attr_s("linear")}};
  std::vector<Tensor> y = run(make_node(Op::LinearAttention, 3, 2, a), {&q, &k, &v}, 27);
  EXPECT_EQ(values(y[0]), (std::vector<double>{8, 23}));  // S = 2*4, then 8 + 3*5
  EXPECT_EQ(values(y[1]), (std::vector<double>{23}));
  a["update_rule"] = attr_s("gated");
  Tensor decay = f32({1, 2, 1}, {0, std::log(0.5f)});
  y = run(make_node(Op::LinearAttention, 5, 2, a), {&q, &k, &v, nullptr, &decay}, 27);
  expect_near_all(y[0], {8, 19});  // 8 * 0.5 + 15
  EXPECT_NE(run_error(make_node(Op::LinearAttention, 3, 2, a), {&q, &k, &v}, 27).find("requires the decay"),
            std::string::npos);
}

TEST(MiscRnn, ReluRnnForwardAndReverse) {
  Tensor x = f32({2, 1, 1}, {1, -1});  // [seq, batch, input]
  Tensor w = f32({1, 1, 1}, {2}), r = f32({1, 1, 1}, {3}), b = f32({1, 2}, {0.5f, 0.5f}), h0 = f32({1, 1, 1}, {1});
  Attribute acts;
  acts.kind = Attribute::Kind::kStrings;
  acts.strings = {"Relu"};
  AttributeMap a = {{"hidden_size", attr_i(1)}, {"activations", acts}};
  std::vector<Tensor> y = run(make_node(Op::RNN, 6, 2, a), {&x, &w, &r, &b, nullptr, &h0}, 14);
  EXPECT_EQ(values(y[0]), (std::vector<double>{6, 17}));  // relu(2 + 3 + 1), relu(-2 + 18 + 1)
  EXPECT_EQ(values(y[1]), (std::vector<double>{17}));
  a["direction"] = attr_s("reverse");
  y = run(make_node(Op::RNN, 6, 2, a), {&x, &w, &r, &b, nullptr, &h0}, 14);
  EXPECT_EQ(values(y[0]), (std::vector<double>{9, 2}));  // t=1 first: relu(-2 + 3 + 1), then relu(2 + 6 + 1)
  EXPECT_EQ(values(y[1]), (std::vector<double>{9}));
  Tensor lens = Tensor::from_vector<int64_t>(DType::I32, {1}, {1});  // forward, only the first step
  a["direction"] = attr_s("forward");
  y = run(make_node(Op::RNN, 6, 2, a), {&x, &w, &r, &b, &lens, &h0}, 14);
  EXPECT_EQ(values(y[0]), (std::vector<double>{6, 0}));
  EXPECT_EQ(values(y[1]), (std::vector<double>{6}));
}

Tensor strs(Shape s, std::vector<std::string> v) {
  Tensor t = Tensor::empty(DType::String, std::move(s));
  t.strings() = std::move(v);
  return t;
}

TEST(MiscString, ConcatSplitNormalizeRegex) {
  Tensor a = strs({2}, {"a", "b"}), bang = strs({1}, {"!"});
  EXPECT_EQ(run(make_node(Op::StringConcat, 2), {&a, &bang}, 20)[0].strings(), (std::vector<std::string>{"a!", "b!"}));
  Tensor s = strs({2}, {" a  b ", "c"});
  std::vector<Tensor> y = run(make_node(Op::StringSplit, 1, 2), {&s}, 20);
  EXPECT_EQ(y[0].shape(), (Shape{2, 2}));
  EXPECT_EQ(y[0].strings(), (std::vector<std::string>{"a", "b", "c", ""}));
  EXPECT_EQ(y[1].to_i64_vector(), (std::vector<int64_t>{2, 1}));
  Tensor d = strs({1}, {"a-b-c"});
  y = run(make_node(Op::StringSplit, 1, 2, {{"delimiter", attr_s("-")}, {"maxsplit", attr_i(1)}}), {&d}, 20);
  EXPECT_EQ(y[0].strings(), (std::vector<std::string>{"a", "b-c"}));
  Attribute stop;
  stop.kind = Attribute::Kind::kStrings;
  stop.strings = {"mon"};
  Tensor days = strs({2}, {"Mon", "tue"});
  y = run(make_node(Op::StringNormalizer, 1, 1, {{"case_change_action", attr_s("UPPER")}, {"stopwords", stop}}), {&days}, 10);
  EXPECT_EQ(y[0].strings(), (std::vector<std::string>{"TUE"}));  // case-insensitive stop word
  Tensor r = strs({2}, {"aab", "ab c"});
  y = run(make_node(Op::RegexFullMatch, 1, 1, {{"pattern", attr_s("a+b")}}), {&r}, 20);
  EXPECT_EQ(y[0].to_i64_vector(), (std::vector<int64_t>{1, 0}));
  EXPECT_NE(run_error(make_node(Op::RegexFullMatch, 1, 1, {{"pattern", attr_s("(a")}}), {&r}, 20).find("not a valid"),
            std::string::npos);
}

TEST(MiscText, TfIdfCountsUnigramsAndBigrams) {
  // pool: unigrams 2, 3, 5 then the bigram (2, 3)
  AttributeMap a = {{"min_gram_length", attr_i(1)}, {"max_gram_length", attr_i(2)}, {"max_skip_count", attr_i(0)},
                    {"mode", attr_s("TF")}, {"ngram_counts", attr_ints({0, 3})}, {"ngram_indexes", attr_ints({0, 1, 2, 3})},
                    {"pool_int64s", attr_ints({2, 3, 5, 2, 3})}};
  Tensor x = i64({5}, {2, 3, 2, 3, 5});
  EXPECT_EQ(values(run(make_node(Op::TfIdfVectorizer, 1, 1, a), {&x}, 9)[0]), (std::vector<double>{2, 2, 1, 2}));
  a["mode"] = attr_s("IDF");
  EXPECT_EQ(values(run(make_node(Op::TfIdfVectorizer, 1, 1, a), {&x}, 9)[0]), (std::vector<double>{1, 1, 1, 1}));
}

TEST(MiscRobustness, BadValuesGiveErrorsOrZerosNotCrashes) {
  // irfft of a single bin has no default length
  Tensor one = f32({1, 1, 2}, {1, 0});
  Tensor axis = i64({}, {1});
  EXPECT_NE(run_error(make_node(Op::DFT, 3, 1, {{"inverse", attr_i(1)}, {"onesided", attr_i(1)}}), {&one, nullptr, &axis}, 20)
                .find("give dft_length"),
            std::string::npos);
  // NaN and huge grid coordinates sample 0 (zeros) or stay inside (reflection)
  Tensor x = f32({1, 1, 2, 2}, {1, 2, 3, 4});
  Tensor g = f32({1, 1, 2, 2}, {std::nanf(""), 0, 1e30f, -1e30f});
  expect_near_all(run(make_node(Op::GridSample, 2), {&x, &g}, 20)[0], {0, 0});
  std::vector<Tensor> y = run(make_node(Op::GridSample, 2, 1, {{"padding_mode", attr_s("reflection")}}), {&x, &g}, 20);
  EXPECT_EQ(y[0].get_f64(0), 0.0);
  EXPECT_TRUE(std::isfinite(y[0].get_f64(1)));
  // MaxUnpool's output_shape must have the input's rank
  Tensor v = f32({1, 1, 1, 1}, {9});
  Tensor ind = i64({1, 1, 1, 1}, {0});
  Tensor bad = i64({3}, {1, 1, 3});
  EXPECT_NE(run_error(make_node(Op::MaxUnpool, 3, 1, {{"kernel_shape", attr_ints({2, 2})}}), {&v, &ind, &bad}, 11).find("rank"),
            std::string::npos);
}

Tensor bytes_u8(const std::vector<int>& v) {
  Tensor t = Tensor::empty(DType::U8, {static_cast<int64_t>(v.size())});
  for (size_t i = 0; i < v.size(); ++i) t.data<uint8_t>()[i] = static_cast<uint8_t>(v[i]);
  return t;
}

// Position of the value byte of tag 259 (compression) in a little-endian TIFF built below.
size_t entry_compression_index(const std::vector<int>& t) {
  for (size_t i = 13; i + 12 <= t.size(); i += 12)
    if (t[i] == (259 & 255) && t[i + 1] == (259 >> 8)) return i + 8;
  return 0;
}

TEST(MiscImage, ImageDecoderFormatsAndErrors) {
  // 2x1 24-bit BMP: pixels (1, 2, 3) and (10, 20, 30), stored B, G, R with the row padded to 8 bytes
  std::vector<int> bmp = {'B', 'M', 62, 0, 0, 0, 0, 0, 0, 0, 54, 0, 0, 0, 40, 0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 1, 0, 24, 0};
  bmp.resize(54, 0);
  for (int v : {3, 2, 1, 30, 20, 10, 0, 0}) bmp.push_back(v);
  Tensor b = bytes_u8(bmp);
  std::vector<Tensor> y = run(make_node(Op::ImageDecoder, 1), {&b}, 20);
  ASSERT_EQ(y[0].shape(), (Shape{1, 2, 3}));
  EXPECT_EQ(y[0].to_i64_vector(), (std::vector<int64_t>{1, 2, 3, 10, 20, 30}));
  y = run(make_node(Op::ImageDecoder, 1, 1, {{"pixel_format", attr_s("BGR")}}), {&b}, 20);
  EXPECT_EQ(y[0].to_i64_vector(), (std::vector<int64_t>{3, 2, 1, 30, 20, 10}));
  y = run(make_node(Op::ImageDecoder, 1, 1, {{"pixel_format", attr_s("Grayscale")}}), {&b}, 20);
  EXPECT_EQ(y[0].to_i64_vector(), (std::vector<int64_t>{2, 18}));  // (19595 R + 38470 G + 7471 B + 2^15) >> 16
  std::vector<int> pnm;
  for (char c : std::string("P5\n# grey\n2 1\n255\n")) pnm.push_back(c);
  pnm.push_back(7);
  pnm.push_back(9);
  Tensor p = bytes_u8(pnm);
  EXPECT_EQ(run(make_node(Op::ImageDecoder, 1), {&p}, 20)[0].to_i64_vector(), (std::vector<int64_t>{7, 7, 7, 9, 9, 9}));
  // 2x1 RGB PNG, one stored deflate block, Sub filter: (1, 2, 3) then (1+9, 2+18, 3+27)
  std::vector<int> png = {0x89, 'P', 'N', 'G', 13, 10, 26, 10,
                          0, 0, 0, 13, 'I', 'H', 'D', 'R', 0, 0, 0, 2, 0, 0, 0, 1, 8, 2, 0, 0, 0, 0, 0, 0, 0,
                          0, 0, 0, 18, 'I', 'D', 'A', 'T', 0x78, 0x01, 0x01, 7, 0, 0xF8, 0xFF, 1, 1, 2, 3, 9, 18, 27,
                          0, 0, 0, 0, 0, 0, 0, 0,
                          0, 0, 0, 0, 'I', 'E', 'N', 'D', 0, 0, 0, 0};
  Tensor pn = bytes_u8(png);
  EXPECT_EQ(run(make_node(Op::ImageDecoder, 1), {&pn}, 20)[0].to_i64_vector(), (std::vector<int64_t>{1, 2, 3, 10, 20, 30}));
  Tensor webp = bytes_u8({'R', 'I', 'F', 'F', 0, 0, 0, 0, 'W', 'E', 'B', 'P'});
  EXPECT_NE(run_error(make_node(Op::ImageDecoder, 1), {&webp}, 20).find("WebP images are not supported"), std::string::npos);
  // 1x1 uncompressed RGB TIFF: one strip at offset 8, then a 7-entry directory
  std::vector<int> tif = {'I', 'I', 42, 0, 11, 0, 0, 0, 5, 6, 7, 7, 0};
  auto entry = [&](int tag, int type, int value) {
    for (int v : {tag & 255, tag >> 8, type, 0, 1, 0, 0, 0, value & 255, value >> 8, 0, 0}) tif.push_back(v);
  };
  entry(256, 3, 1);  // width
  entry(257, 3, 1);  // height
  entry(259, 3, 1);  // no compression
  entry(262, 3, 2);  // RGB
  entry(273, 4, 8);  // strip offset
  entry(277, 3, 3);  // samples per pixel
  entry(279, 4, 3);  // strip bytes
  for (int v : {0, 0, 0, 0}) tif.push_back(v);
  Tensor tf = bytes_u8(tif);
  EXPECT_EQ(run(make_node(Op::ImageDecoder, 1), {&tf}, 20)[0].to_i64_vector(), (std::vector<int64_t>{5, 6, 7}));
  tif[entry_compression_index(tif)] = 5;  // LZW
  Tensor lzw = bytes_u8(tif);
  EXPECT_NE(run_error(make_node(Op::ImageDecoder, 1), {&lzw}, 20).find("compressed TIFF"), std::string::npos);
  // JPEG: baseline only (the node tests check decoded pixels); a progressive frame is refused by name
  Tensor prog = bytes_u8({0xFF, 0xD8, 0xFF, 0xC2, 0, 11, 8, 0, 1, 0, 1, 1, 1, 0x11, 0, 0xFF, 0xD9});
  EXPECT_NE(run_error(make_node(Op::ImageDecoder, 1), {&prog}, 20).find("progressive JPEG"), std::string::npos);
  Tensor jpeg = bytes_u8({0xFF, 0xD8, 0xFF, 0xE0, 0, 0});
  EXPECT_NE(run_error(make_node(Op::ImageDecoder, 1), {&jpeg}, 20).find("JPEG"), std::string::npos);
  bmp.resize(60);  // truncated pixel data
  Tensor t = bytes_u8(bmp);
  EXPECT_NE(run_error(make_node(Op::ImageDecoder, 1), {&t}, 20).find("truncated"), std::string::npos);
}

TEST(MiscOptional, TensorsHaveAnElementAbsentInputsDoNot) {
  Tensor x = f32({2}, {1, 2});
  EXPECT_TRUE(run(make_node(Op::OptionalHasElement, 1), {&x}, 18)[0].data<bool>()[0]);
  EXPECT_FALSE(run(make_node(Op::OptionalHasElement, 0), {}, 18)[0].data<bool>()[0]);
  EXPECT_EQ(values(run(make_node(Op::OptionalGetElement, 1), {&x}, 18)[0]), (std::vector<double>{1, 2}));
  EXPECT_NE(run_error(make_node(Op::OptionalGetElement, 1), {nullptr}, 18).find("empty"), std::string::npos);
}

}  // namespace
}  // namespace gpuopt
