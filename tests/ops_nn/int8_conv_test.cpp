// Int8Conv (ai.gpuopt, fold_qdq's int8 convolution) against an f64 Conv of the same integers with
// the epilogue written per element (scale, bias, Relu, then divide by y_scale, round half to
// even and saturate); its channels-last form against the NCHW one; and its shape/type errors.
// Int8Add against the per-element formula.
#include "nn_test_util.h"

namespace gpuopt {
namespace {

using namespace testing_nn;

AttributeMap conv_attrs(bool relu, bool channels_last) {
  AttributeMap at;
  at["pads"] = attr_ints({1, 0, 1, 0});
  at["strides"] = attr_ints({2, 1});
  at["kernel_shape"] = attr_ints({3, 2});
  at["channels_last"] = attr_i(channels_last ? 1 : 0);
  if (relu) at["activation"] = attr_s("Relu");
  return at;
}

TEST(Int8Conv, MatchesIntegerConvWithEpilogue) {
  const Shape xs = {2, 5, 7, 6}, ws = {4, 5, 3, 2};
  const Tensor x = random_tensor(DType::I8, xs, -128, 128), w = random_tensor(DType::I8, ws, -127, 128);
  const Tensor sx = scalar_f32(0.02), sw = random_tensor(DType::F32, {4}, 0.001, 0.004);
  const Tensor b = random_tensor(DType::F32, {4}, -0.5, 0.5), sy = scalar_f32(0.05);
  // Oracle: the exact sums as an f64 Conv.
  Tensor xd = Tensor::empty(DType::F64, xs), wd = Tensor::empty(DType::F64, ws);
  for (int64_t i = 0; i < x.numel(); ++i) xd.set_f64(i, x.get_f64(i));
  for (int64_t i = 0; i < w.numel(); ++i) wd.set_f64(i, w.get_f64(i));
  AttributeMap plain = conv_attrs(false, false);
  plain.erase("channels_last");
  auto c = run(make_node(Op::Conv, 2, 1, plain), {&xd, &wd});
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  const Tensor& acc = (*c)[0];
  const int64_t O = acc.numel() / (2 * 4);
  for (bool relu : {false, true})
    for (bool requant : {false, true}) {
      std::vector<const Tensor*> in{&x, &w, &sx, &sw, &b};
      if (requant) in.push_back(&sy);
      auto r = run(make_node(Op::Int8Conv, in.size(), 1, conv_attrs(relu, false)), in);
      ASSERT_TRUE(r.ok()) << r.status().to_string();
      ASSERT_EQ((*r)[0].dtype(), requant ? DType::I8 : DType::F32);
      std::vector<double> want;
      for (int64_t i = 0; i < acc.numel(); ++i) {
        const int64_t m = (i / O) % 4;
        double v = acc.get_f64(i) * sx.get_f64(0) * sw.get_f64(m) + b.get_f64(m);
        if (relu) v = std::max(v, 0.0);
        if (requant) v = std::clamp(std::nearbyint(v / sy.get_f64(0)), -128.0, 127.0);
        want.push_back(v);
      }
      const std::string what = std::string("Int8Conv") + (relu ? " relu" : "") + (requant ? " int8" : " f32");
      expect_close((*r)[0], want, acc.shape(), what);
      // Channels-last: the same values, transposed.
      const Tensor xn = to_nhwc(x), wn = to_nhwc(w);
      std::vector<const Tensor*> in_cl = in;
      in_cl[0] = &xn;
      in_cl[1] = &wn;
      auto rc = run(make_node(Op::Int8Conv, in_cl.size(), 1, conv_attrs(relu, true)), in_cl);
      ASSERT_TRUE(rc.ok()) << rc.status().to_string();
      const Tensor want_cl = to_nhwc((*r)[0]);
      ASSERT_EQ((*rc)[0].shape(), want_cl.shape());
      for (int64_t i = 0; i < want_cl.numel(); ++i) ASSERT_EQ((*rc)[0].get_f64(i), want_cl.get_f64(i)) << what << " nhwc " << i;
    }
}

TEST(Int8Conv, PerTensorScaleNoBias) {
  const Tensor x = random_tensor(DType::I8, {1, 16, 5, 5}, -128, 128), w = random_tensor(DType::I8, {8, 16, 1, 1}, -127, 128);
  const Tensor sx = scalar_f32(0.5), sw = scalar_f32(0.25);
  AttributeMap at;
  at["kernel_shape"] = attr_ints({1, 1});
  auto r = run(make_node(Op::Int8Conv, 4, 1, at), {&x, &w, &sx, &sw});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  std::vector<double> want;
  for (int64_t m = 0; m < 8; ++m)
    for (int64_t p = 0; p < 25; ++p) {
      double s = 0;
      for (int64_t c = 0; c < 16; ++c) s += x.get_f64(c * 25 + p) * w.get_f64(m * 16 + c);
      want.push_back(s * 0.125);
    }
  expect_close((*r)[0], want, {1, 8, 5, 5}, "Int8Conv per-tensor");
}

TEST(Int8Add, DequantizedSumReluRequantized) {
  const Tensor a = random_tensor(DType::I8, {2, 3, 4, 5}, -128, 128), b = random_tensor(DType::I8, {2, 3, 4, 5}, -128, 128);
  const Tensor sa = scalar_f32(0.02), sb = scalar_f32(0.03), sy = scalar_f32(0.04);
  for (bool relu : {false, true})
    for (bool requant : {false, true}) {
      AttributeMap at;
      if (relu) at["activation"] = attr_s("Relu");
      std::vector<const Tensor*> in{&a, &sa, &b, &sb};
      if (requant) in.push_back(&sy);
      auto r = run(make_node(Op::Int8Add, in.size(), 1, at), in);
      ASSERT_TRUE(r.ok()) << r.status().to_string();
      std::vector<double> want;
      for (int64_t i = 0; i < a.numel(); ++i) {
        double v = a.get_f64(i) * sa.get_f64(0) + b.get_f64(i) * sb.get_f64(0);
        if (relu) v = std::max(v, 0.0);
        if (requant) v = std::clamp(std::nearbyint(v / sy.get_f64(0)), -128.0, 127.0);
        want.push_back(v);
      }
      expect_close((*r)[0], want, a.shape(), std::string("Int8Add") + (relu ? " relu" : "") + (requant ? " int8" : ""));
    }
  const Tensor c = random_tensor(DType::I8, {2, 3, 4, 1}, -128, 128);
  auto bad = run(make_node(Op::Int8Add, 4, 1, {}, "iadd"), {&a, &sa, &c, &sb});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("differ in shape"), std::string::npos) << bad.status().to_string();
}

TEST(Int8Conv, RejectsBadInputs) {
  const Tensor x = random_tensor(DType::I8, {1, 4, 5, 5}, -128, 128), w = random_tensor(DType::I8, {4, 4, 3, 3}, -127, 128);
  const Tensor xf = random_tensor(DType::F32, {1, 4, 5, 5}), sx = scalar_f32(0.1), sw = scalar_f32(0.1);
  const Tensor sw3 = random_tensor(DType::F32, {3}, 0.1, 0.2);
  AttributeMap bad_act;
  bad_act["activation"] = attr_s("Gelu");
  AttributeMap bad_cl;
  bad_cl["channels_last"] = attr_i(2);
  struct Bad {
    std::vector<const Tensor*> in;
    AttributeMap at;
    const char* want;
  };
  const Bad cases[] = {{{&xf, &w, &sx, &sw}, {}, "expected i8"},
                       {{&x, &w, &sx, &sw}, bad_act, "activation 'Gelu'"},
                       {{&x, &w, &sx, &sw}, bad_cl, "channels_last 2"},
                       {{&x, &w, &sx, &sw3}, {}, "w_scale has 3 values"}};
  for (const Bad& c : cases) {
    auto r = run(make_node(Op::Int8Conv, c.in.size(), 1, c.at, "iconv"), c.in);
    ASSERT_FALSE(r.ok()) << c.want;
    EXPECT_NE(r.status().message().find(c.want), std::string::npos) << r.status().to_string();
    EXPECT_NE(r.status().message().find("iconv"), std::string::npos) << r.status().to_string();
  }
}

}  // namespace
}  // namespace gpuopt
