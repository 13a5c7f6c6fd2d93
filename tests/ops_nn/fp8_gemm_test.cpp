// The e4m3fn conversions (ops/quant/fp8_e4m3.h) against the format's definition, value by value
// (every bit pattern, every rounding tie), and Fp8Gemm's schema checks. The NumPy / ml_dtypes
// oracle of the same conversions and of Fp8Gemm's numerics is tests/python/test_fp8.py.
#include "nn_test_util.h"
#include "ops/quant/fp8_e4m3.h"

#include <cmath>

namespace gpuopt {
namespace {

using namespace testing_nn;

// The value of a bit pattern from the definition: (-1)^s * 2^(e-7) * (1 + m/8), subnormal
// (e == 0) 2^-6 * m/8, S.1111.111 NaN.
double definition(int c) {
  const int s = c >> 7, e = (c >> 3) & 15, m = c & 7;
  if (e == 15 && m == 7) return NAN;
  const double v = e == 0 ? std::ldexp(m / 8.0, -6) : std::ldexp(1 + m / 8.0, e - 7);
  return s ? -v : v;
}

TEST(Fp8E4M3, EveryBitPattern) {
  for (int c = 0; c < 256; ++c) {
    const double want = definition(c);
    const float got = fp8::e4m3_to_f32(static_cast<uint8_t>(c));
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got)) << c;
      EXPECT_EQ(fp8::f32_to_e4m3(got) & 0x7F, 0x7F) << "NaN stays NaN: " << c;
      continue;
    }
    EXPECT_EQ(static_cast<double>(got), want) << c;
    EXPECT_EQ(std::signbit(got), c >= 128) << c;
    EXPECT_EQ(fp8::f32_to_e4m3(got), c) << "round trip of " << want;  // -0 keeps its sign too
  }
  EXPECT_EQ(fp8::e4m3_to_f32(0x7E), 448.0f);
  EXPECT_EQ(fp8::e4m3_to_f32(0x01), std::ldexp(1.0f, -9));
}

TEST(Fp8E4M3, TiesRoundToEvenAndOthersToNearest) {
  // Consecutive non-negative values v[c] < v[c + 1] (c = 0..125): the midpoint goes to the even
  // pattern, a hair either side of it to the nearer one.
  for (int c = 0; c < 126; ++c) {
    const float lo = fp8::e4m3_to_f32(static_cast<uint8_t>(c)), hi = fp8::e4m3_to_f32(static_cast<uint8_t>(c + 1));
    const float mid = (lo + hi) / 2;  // exact: both have few significant bits
    ASSERT_EQ(static_cast<double>(mid), (static_cast<double>(lo) + hi) / 2);
    const int even = c % 2 == 0 ? c : c + 1;
    EXPECT_EQ(fp8::f32_to_e4m3(mid), even) << "tie between " << lo << " and " << hi;
    EXPECT_EQ(fp8::f32_to_e4m3(-mid), 0x80 | even) << "negative tie between " << lo << " and " << hi;
    EXPECT_EQ(fp8::f32_to_e4m3(std::nextafter(mid, 0.0f)), c);
    EXPECT_EQ(fp8::f32_to_e4m3(std::nextafter(mid, 1e9f)), c + 1);
  }
}

TEST(Fp8E4M3, SaturatesAndKeepsNaN) {
  for (float x : {448.0f, 449.0f, 464.0f, 480.0f, 1e6f, INFINITY}) {
    EXPECT_EQ(fp8::f32_to_e4m3(x), 0x7E) << x;
    EXPECT_EQ(fp8::f32_to_e4m3(-x), 0xFE) << -x;
  }
  EXPECT_EQ(fp8::f32_to_e4m3(NAN) & 0x7F, 0x7F);
  EXPECT_EQ(fp8::f32_to_e4m3(1e-30f), 0);   // below half the smallest subnormal: +0
  EXPECT_EQ(fp8::f32_to_e4m3(-1e-30f), 0x80);
  EXPECT_EQ(fp8::f32_to_e4m3(std::ldexp(1.0f, -10)), 0);  // the tie 2^-10 between 0 and 2^-9 goes to 0
}

Node fp8_node(float sa, float sb, const std::string& act = "", size_t inputs = 3) {
  AttributeMap a;
  a["a_scale"] = op_test::attr_f(sa);
  a["b_scale"] = op_test::attr_f(sb);
  if (!act.empty()) a["activation"] = attr_s(act);
  Node n = make_node(Op::Fp8Gemm, inputs, 1, std::move(a));
  n.op_type = "Fp8Gemm";
  n.domain = "ai.gpuopt";
  return n;
}

// Y = act(sum_k e4m3(A / sa) * e4m3(B) * sa * sb + bias), act none, Relu or (erf) Gelu, written out per element with the
// definition above (not the header's decoder) for B.
TEST(Fp8Gemm, MatchesPerElementFormula) {
  const int64_t m = 3, k = 32, n = 16;
  const Tensor a = random_tensor(DType::F32, {m, k}, -6, 6);
  Tensor b = Tensor::empty(DType::U8, {n, k});
  std::uniform_int_distribution<int> code(0, 255);
  for (int64_t i = 0; i < b.numel(); ++i) {
    int c = code(rng());
    if ((c & 0x7F) == 0x7F) c = 0x3A;  // no NaN weights here
    b.data<uint8_t>()[i] = static_cast<uint8_t>(c);
  }
  const Tensor bias = random_tensor(DType::F32, {n}, -1, 1);
  const float sa = 6.0f / 448, sb = 0.01f;
  for (const std::string act : {"", "Relu", "Gelu"}) {
    auto r = run(fp8_node(sa, sb, act), {&a, &b, &bias});
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    std::vector<double> want;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double acc = 0;
        for (int64_t q = 0; q < k; ++q)
          acc += static_cast<double>(fp8::round_e4m3(static_cast<float>(a.get_f64(i * k + q)) / sa)) *
                 definition(b.data<uint8_t>()[j * k + q]);
        double v = acc * sa * sb + bias.get_f64(j);
        want.push_back(act == "Relu" ? std::max(v, 0.0) : act == "Gelu" ? 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))) : v);
      }
    expect_close((*r)[0], want, {m, n}, "Fp8Gemm " + act);
  }
}

// The chained forms: an e4m3 output (y_scale) read back as an e4m3 A gives the same next GEMM as
// the float output quantized by the next GEMM's a_scale (up to x / s against x * (1 / s)).
TEST(Fp8Gemm, E4m3OutputAndInput) {
  const int64_t m = 5, k = 32, n = 16;
  const Tensor a = random_tensor(DType::F32, {m, k}, -3, 3);
  Tensor b = Tensor::empty(DType::U8, {n, k});
  for (int64_t i = 0; i < b.numel(); ++i) b.data<uint8_t>()[i] = fp8::f32_to_e4m3(static_cast<float>((i * 7) % 23) - 11.f);
  const Tensor bias = random_tensor(DType::F32, {n}, -1, 1);
  const float sa = 3.0f / 448, sb = 0.05f, sy = 0.02f;
  Node plain = fp8_node(sa, sb, "Relu");
  Node to_fp8 = plain;
  to_fp8.attrs["y_scale"] = op_test::attr_f(sy);
  auto f = run(plain, {&a, &b, &bias});
  auto q = run(to_fp8, {&a, &b, &bias});
  ASSERT_TRUE(f.ok() && q.ok()) << q.status().to_string();
  ASSERT_EQ((*q)[0].dtype(), DType::U8);
  for (int64_t i = 0; i < f->at(0).numel(); ++i)
    EXPECT_EQ((*q)[0].data<uint8_t>()[i], fp8::f32_to_e4m3(static_cast<float>(f->at(0).get_f64(i)) * (1.0f / sy))) << i;
  // The next GEMM (K = n) on the e4m3 codes, and on the float output with a_scale = sy.
  Tensor b2 = Tensor::empty(DType::U8, {16, n});
  for (int64_t i = 0; i < b2.numel(); ++i) b2.data<uint8_t>()[i] = fp8::f32_to_e4m3(static_cast<float>((i * 5) % 17) - 8.f);
  const Tensor bias2 = random_tensor(DType::F32, {16}, -1, 1);
  auto from_codes = run(fp8_node(sy, sb), {&(*q)[0], &b2, &bias2});
  auto from_float = run(fp8_node(sy, sb), {&(*f)[0], &b2, &bias2});
  ASSERT_TRUE(from_codes.ok() && from_float.ok()) << from_codes.status().to_string();
  ASSERT_EQ(from_codes->at(0).dtype(), DType::F32);  // the bias's dtype
  expect_close(from_codes->at(0), values(from_float->at(0)), {m, 16}, "e4m3 A");
  // Output 1: the e4m3 codes of A it multiplied, for siblings reading the same activation.
  Node two = fp8_node(sa, sb, "Relu");
  two.outputs.push_back(static_cast<ValueId>(4));
  auto both = run(two, {&a, &b, &bias});
  ASSERT_TRUE(both.ok()) << both.status().to_string();
  ASSERT_EQ(both->size(), 2u);
  ASSERT_EQ(both->at(1).dtype(), DType::U8);
  ASSERT_EQ(both->at(1).shape(), a.shape());
  for (int64_t i = 0; i < a.numel(); ++i)
    EXPECT_EQ(both->at(1).data<uint8_t>()[i], fp8::f32_to_e4m3(static_cast<float>(a.get_f64(i)) / sa)) << i;
  auto sibling = run(fp8_node(sa, sb, "Relu"), {&both->at(1), &b, &bias});
  ASSERT_TRUE(sibling.ok());
  expect_close(sibling->at(0), values(f->at(0)), {m, n}, "sibling on the shared codes");
  // An e4m3 A without a bias has no float dtype for its output.
  EXPECT_NE(error_of(fp8_node(sy, sb, "", 2), {&(*q)[0], &b2}).find("needs a bias"), std::string::npos);
}

TEST(Fp8Gemm, SchemaErrorsNameTheProblem) {
  const Tensor a = random_tensor(DType::F32, {2, 16});
  const Tensor b = Tensor::zeros(DType::U8, {8, 16});
  const Tensor bi8 = Tensor::zeros(DType::I8, {8, 16});
  const Tensor bk = Tensor::zeros(DType::U8, {8, 12});
  EXPECT_NE(error_of(fp8_node(0.f, 1.f, "", 2), {&a, &b}).find("must be finite and > 0"), std::string::npos);
  EXPECT_NE(error_of(fp8_node(1.f, 1.f, "Swish", 2), {&a, &b}).find("activation 'Swish'"), std::string::npos);
  EXPECT_NE(error_of(fp8_node(1.f, 1.f, "", 2), {&a, &bi8}).find("expected u8"), std::string::npos);
  EXPECT_NE(error_of(fp8_node(1.f, 1.f, "", 2), {&a, &bk}).find("differ in K"), std::string::npos);
  Node no_scale = fp8_node(1.f, 1.f, "", 2);
  no_scale.attrs.erase("b_scale");
  EXPECT_NE(error_of(no_scale, {&a, &b}).find("attribute b_scale is missing"), std::string::npos);
  Node bad_y = fp8_node(1.f, 1.f, "", 2);
  bad_y.attrs["y_scale"] = op_test::attr_f(-1.f);
  EXPECT_NE(error_of(bad_y, {&a, &b}).find("y_scale -1 must be finite and > 0"), std::string::npos);
}

}  // namespace
}  // namespace gpuopt
