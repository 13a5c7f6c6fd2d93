// Quantized ops against formulas written per element (float32 division, rint, saturate) and
// exact integer products; QLinearConv against an f64 Conv of the zero-point-shifted integers.
#include "nn_test_util.h"

namespace gpuopt {
namespace {

using namespace testing_nn;

double clampd(double v, DType t) {
  const double lo = t == DType::U8 ? 0 : t == DType::I8 ? -128 : t == DType::U16 ? 0 : -32768;
  const double hi = t == DType::U8 ? 255 : t == DType::I8 ? 127 : t == DType::U16 ? 65535 : 32767;
  return std::min(std::max(v, lo), hi);
}

Tensor scalar_of(DType dt, double v) {
  return Tensor::from_vector<double>(dt, {}, {v});
}

TEST(QuantizeLinear, PerTensorAndZeroPointDtypes) {
  const Tensor x = random_tensor(DType::F32, {3, 17}, -40, 40);
  for (DType qt : {DType::U8, DType::I8, DType::U16, DType::I16}) {
    const Tensor s = scalar_of(DType::F32, 0.173), z = scalar_of(qt, qt == DType::U8 || qt == DType::U16 ? 128 : -3);
    auto r = run(make_node(Op::QuantizeLinear, 3, 1), {&x, &s, &z}, 21);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    ASSERT_EQ((*r)[0].dtype(), qt);
    std::vector<double> want;
    for (int64_t i = 0; i < x.numel(); ++i)
      want.push_back(clampd(std::nearbyint(static_cast<float>(x.get_f64(i)) / 0.173f) + z.get_f64(0), qt));
    expect_close((*r)[0], want, x.shape(), std::string("QuantizeLinear ") + std::string(dtype_name(qt)));
  }
  // No zero point: u8 output, zero point 0; values saturate at 0 and 255.
  const Tensor s = scalar_of(DType::F32, 0.1);
  auto r = run(make_node(Op::QuantizeLinear, 2, 1), {&x, &s}, 13);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)[0].dtype(), DType::U8);
  for (int64_t i = 0; i < x.numel(); ++i)
    EXPECT_EQ((*r)[0].get_f64(i), clampd(std::nearbyint(static_cast<float>(x.get_f64(i)) / 0.1f), DType::U8));
}

TEST(QuantizeLinear, HalfToEvenTies) {
  const Tensor x = Tensor::from_vector<double>(DType::F32, {6}, {0.5, 1.5, 2.5, -0.5, -1.5, 3.5});
  const Tensor s = scalar_of(DType::F32, 1.0), z = scalar_of(DType::I8, 0);
  auto r = run(make_node(Op::QuantizeLinear, 3, 1), {&x, &s, &z}, 13);
  ASSERT_TRUE(r.ok());
  expect_close((*r)[0], {0, 2, 2, 0, -2, 4}, {6}, "ties");
}

TEST(QuantizeLinear, PerAxisAndBlocked) {
  const Tensor x = random_tensor(DType::F32, {2, 5, 6}, -10, 10);
  const Tensor s = random_tensor(DType::F32, {5}, 0.05, 0.2), z = random_tensor(DType::I8, {5}, -10, 10);
  AttributeMap a;
  a["axis"] = attr_i(1);
  auto r = run(make_node(Op::QuantizeLinear, 3, 1, a), {&x, &s, &z}, 13);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  std::vector<double> want;
  for (int64_t i = 0; i < x.numel(); ++i) {
    const int64_t c = (i / 6) % 5;
    want.push_back(clampd(
        std::nearbyint(static_cast<float>(x.get_f64(i)) / static_cast<float>(s.get_f64(c))) + z.get_f64(c), DType::I8));
  }
  expect_close((*r)[0], want, x.shape(), "per-axis");
  // blocks of 4 along the last axis (6 -> 2 blocks, the last one short)
  const Tensor sb = random_tensor(DType::F32, {2, 5, 2}, 0.05, 0.2), zb = random_tensor(DType::U8, {2, 5, 2}, 100, 150);
  AttributeMap b;
  b["axis"] = attr_i(-1);
  b["block_size"] = attr_i(4);
  auto rb = run(make_node(Op::QuantizeLinear, 3, 1, b), {&x, &sb, &zb}, 21);
  ASSERT_TRUE(rb.ok()) << rb.status().to_string();
  want.clear();
  for (int64_t i = 0; i < x.numel(); ++i) {
    const int64_t p = (i / 6) * 2 + (i % 6) / 4;
    want.push_back(
        clampd(std::nearbyint(static_cast<float>(x.get_f64(i)) / static_cast<float>(sb.get_f64(p))) + zb.get_f64(p),
               DType::U8));
  }
  expect_close((*rb)[0], want, x.shape(), "blocked");
}

TEST(DequantizeLinear, PerTensorAxisBlocked) {
  const Tensor x = random_tensor(DType::I8, {4, 6}, -128, 128);
  const Tensor s = scalar_of(DType::F32, 0.05), z = scalar_of(DType::I8, 7);
  auto r = run(make_node(Op::DequantizeLinear, 3, 1), {&x, &s, &z}, 13);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  std::vector<double> want;
  for (int64_t i = 0; i < x.numel(); ++i)
    want.push_back(static_cast<float>((x.get_f64(i) - 7) * static_cast<float>(0.05)));
  expect_close((*r)[0], want, x.shape(), "per-tensor");
  const Tensor sa = random_tensor(DType::F32, {6}, 0.01, 0.1), za = random_tensor(DType::I8, {6}, -5, 5);
  AttributeMap a;
  a["axis"] = attr_i(1);
  auto ra = run(make_node(Op::DequantizeLinear, 3, 1, a), {&x, &sa, &za}, 13);
  ASSERT_TRUE(ra.ok());
  want.clear();
  for (int64_t i = 0; i < x.numel(); ++i) want.push_back((x.get_f64(i) - za.get_f64(i % 6)) * sa.get_f64(i % 6));
  expect_close((*ra)[0], want, x.shape(), "per-axis");
  const Tensor sb = random_tensor(DType::F16, {2, 6}, 0.01, 0.1);
  AttributeMap b;
  b["axis"] = attr_i(0);
  b["block_size"] = attr_i(2);
  auto rb = run(make_node(Op::DequantizeLinear, 2, 1, b), {&x, &sb}, 21);
  ASSERT_TRUE(rb.ok()) << rb.status().to_string();
  EXPECT_EQ((*rb)[0].dtype(), DType::F16);
  want.clear();
  for (int64_t i = 0; i < x.numel(); ++i) want.push_back(x.get_f64(i) * sb.get_f64((i / 6) / 2 * 6 + i % 6));
  expect_close((*rb)[0], want, x.shape(), "blocked f16");
}

TEST(Quant, Errors) {
  const Tensor x = random_tensor(DType::F32, {2, 5});
  const Tensor s3 = random_tensor(DType::F32, {3}, 0.1, 0.2), z3 = random_tensor(DType::U8, {3}, 0, 9);
  EXPECT_NE(error_of(make_node(Op::QuantizeLinear, 3, 1), {&x, &s3, &z3}, 13)
                .find("scale has 3 values for axis 1 of extent 5"),
            std::string::npos);
  const Tensor s = scalar_of(DType::F32, 0.1), zi = scalar_of(DType::I32, 0);
  EXPECT_NE(error_of(make_node(Op::QuantizeLinear, 3, 1), {&x, &s, &zi}, 13).find("not supported"), std::string::npos);
  const Tensor a = random_tensor(DType::U8, {2, 3}, 0, 255), b = random_tensor(DType::U8, {4, 2}, 0, 255);
  EXPECT_NE(error_of(make_node(Op::MatMulInteger, 2, 1), {&a, &b}).find("inner dimensions"), std::string::npos);
  const Tensor af = random_tensor(DType::F32, {2, 3});
  EXPECT_NE(error_of(make_node(Op::MatMulInteger, 2, 1), {&af, &b}).find("expected u8 or i8"), std::string::npos);
}

TEST(MatMulInteger, ZeroPointsPerRowAndColumn) {
  const Tensor a = random_tensor(DType::U8, {2, 5, 7}, 0, 256), b = random_tensor(DType::I8, {7, 3}, -128, 128);
  const Tensor az = random_tensor(DType::U8, {5}, 0, 256), bz = random_tensor(DType::I8, {3}, -128, 128);
  auto r = run(make_node(Op::MatMulInteger, 4, 1), {&a, &b, &az, &bz}, 10);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  ASSERT_EQ((*r)[0].dtype(), DType::I32);
  std::vector<double> want;
  for (int64_t bi = 0; bi < 2; ++bi)
    for (int64_t m = 0; m < 5; ++m)
      for (int64_t n = 0; n < 3; ++n) {
        int64_t s = 0;
        for (int64_t k = 0; k < 7; ++k)
          s += (a.get_i64((bi * 5 + m) * 7 + k) - az.get_i64(m)) * (b.get_i64(k * 3 + n) - bz.get_i64(n));
        want.push_back(static_cast<double>(s));
      }
  expect_close((*r)[0], want, {2, 5, 3}, "MatMulInteger");
}

TEST(QLinearMatMul, U8AndI8) {
  for (DType qt : {DType::U8, DType::I8}) {
    const double lo = qt == DType::U8 ? 0 : -128, hi = qt == DType::U8 ? 256 : 128;
    const Tensor a = random_tensor(qt, {3, 4, 9}, lo, hi), b = random_tensor(qt, {9, 5}, lo, hi);
    const Tensor as = scalar_of(DType::F32, 0.0123), bs = scalar_of(DType::F32, 0.0456),
                 ys = scalar_of(DType::F32, 0.2);
    const Tensor az = scalar_of(qt, qt == DType::U8 ? 113 : -3), bz = scalar_of(qt, qt == DType::U8 ? 97 : 5),
                 yz = scalar_of(qt, qt == DType::U8 ? 120 : 1);
    auto r = run(make_node(Op::QLinearMatMul, 8, 1), {&a, &as, &az, &b, &bs, &bz, &ys, &yz}, 10);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    const double mult = static_cast<float>(static_cast<float>(0.0123f * 0.0456f) / 0.2f);
    std::vector<double> want;
    for (int64_t bi = 0; bi < 3; ++bi)
      for (int64_t m = 0; m < 4; ++m)
        for (int64_t n = 0; n < 5; ++n) {
          int64_t s = 0;
          for (int64_t k = 0; k < 9; ++k)
            s += (a.get_i64((bi * 4 + m) * 9 + k) - az.get_i64(0)) * (b.get_i64(k * 5 + n) - bz.get_i64(0));
          want.push_back(clampd(std::nearbyint(static_cast<double>(s) * mult + yz.get_f64(0)), qt));
        }
    expect_close((*r)[0], want, {3, 4, 5}, "QLinearMatMul");
  }
}

TEST(QLinearConv, PerChannelWeightScales) {
  const Shape xs = {2, 4, 7, 6}, ws = {6, 2, 3, 3};
  const Tensor x = random_tensor(DType::U8, xs, 0, 256), w = random_tensor(DType::I8, ws, -128, 128);
  const Tensor xsc = scalar_of(DType::F32, 0.02), xz = scalar_of(DType::U8, 130);
  const Tensor wsc = random_tensor(DType::F32, {6}, 0.001, 0.01), wz = scalar_of(DType::I8, 0);
  const Tensor ysc = scalar_of(DType::F32, 0.05), yz = scalar_of(DType::U8, 128);
  const Tensor bias = random_tensor(DType::I32, {6}, -500, 500);
  AttributeMap at;
  at["group"] = attr_i(2);
  at["pads"] = attr_ints({1, 0, 1, 1});
  at["strides"] = attr_ints({2, 1});
  auto r = run(make_node(Op::QLinearConv, 9, 1, at), {&x, &xsc, &xz, &w, &wsc, &wz, &ysc, &yz, &bias}, 10);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  // Oracle: exact integer conv as an f64 Conv of (x - xz) and w, then requantise per channel.
  Tensor xd = Tensor::empty(DType::F64, xs), wd = Tensor::empty(DType::F64, ws), bd = Tensor::empty(DType::F64, {6});
  for (int64_t i = 0; i < x.numel(); ++i) xd.set_f64(i, x.get_f64(i) - 130);
  for (int64_t i = 0; i < w.numel(); ++i) wd.set_f64(i, w.get_f64(i));
  for (int64_t i = 0; i < 6; ++i) bd.set_f64(i, bias.get_f64(i));
  auto c = run(make_node(Op::Conv, 3, 1, at), {&xd, &wd, &bd});
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  const Tensor& acc = (*c)[0];
  const int64_t O = acc.numel() / (2 * 6);
  std::vector<double> want;
  for (int64_t i = 0; i < acc.numel(); ++i) {
    const int64_t m = (i / O) % 6;
    const double mult = static_cast<float>(static_cast<float>(0.02f * static_cast<float>(wsc.get_f64(m))) / 0.05f);
    want.push_back(clampd(std::nearbyint(acc.get_f64(i) * mult + 128), DType::U8));
  }
  expect_close((*r)[0], want, acc.shape(), "QLinearConv");
}

}  // namespace
}  // namespace gpuopt

namespace gpuopt {
namespace {

using namespace testing_nn;

TEST(QLinearMatMul, PerRowAndPerColumnScales) {
  const Tensor a = random_tensor(DType::U8, {4, 9}, 0, 256), b = random_tensor(DType::U8, {9, 5}, 0, 256);
  const Tensor as = random_tensor(DType::F32, {4}, 0.01, 0.03), bs = random_tensor(DType::F32, {5}, 0.02, 0.05);
  const Tensor az = random_tensor(DType::U8, {4}, 100, 150), bz = random_tensor(DType::U8, {5}, 100, 150);
  const Tensor ys = Tensor::from_vector<double>(DType::F32, {}, {0.3}),
               yz = Tensor::from_vector<double>(DType::U8, {}, {128});
  auto r = run(make_node(Op::QLinearMatMul, 8, 1), {&a, &as, &az, &b, &bs, &bz, &ys, &yz}, 21);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  std::vector<double> want;
  for (int64_t m = 0; m < 4; ++m)
    for (int64_t n = 0; n < 5; ++n) {
      int64_t s = 0;
      for (int64_t k = 0; k < 9; ++k)
        s += (a.get_i64(m * 9 + k) - az.get_i64(m)) * (b.get_i64(k * 5 + n) - bz.get_i64(n));
      const float mult = static_cast<float>(as.get_f64(m)) * static_cast<float>(bs.get_f64(n)) / 0.3f;
      want.push_back(std::min(255.0, std::max(0.0, std::nearbyint(static_cast<double>(s) * mult + 128))));
    }
  expect_close((*r)[0], want, {4, 5}, "QLinearMatMul per-row/column");
  const Tensor bad = random_tensor(DType::F32, {3}, 0.01, 0.03);
  EXPECT_NE(error_of(make_node(Op::QLinearMatMul, 8, 1), {&a, &bad, &az, &b, &bs, &bz, &ys, &yz}, 21)
                .find("a_scale has 3 values; expected 1 or 4"),
            std::string::npos);
}

}  // namespace
}  // namespace gpuopt
