// Unary math and activations against formulas written here in double (a separate code path from
// the kernels: no shared helpers), for every float dtype and a mix of shapes.
#include "op_test_util.h"

namespace gpuopt {
namespace {

using namespace gpuopt::testing;

struct UnaryCase {
  Op op;
  std::string name;
  std::function<double(double)> oracle;
  double lo = -4, hi = 4;
  AttributeMap attrs = {};
};

double erf_gelu(double x) {
  return x * 0.5 * std::erfc(-x / std::sqrt(2.0));
}

std::vector<UnaryCase> cases() {
  const double pi = std::acos(-1.0);
  return {
      {Op::Relu, "Relu", [](double x) { return std::max(x, 0.0); }},
      {Op::LeakyRelu, "LeakyRelu", [](double x) { return x < 0 ? 0.25 * x : x; }, -4, 4, {{"alpha", attr_f(0.25f)}}},
      {Op::LeakyRelu, "LeakyReluDefault",
       [](double x) { return x < 0 ? double(0.01f) * x : x; }},  // alpha is a float attribute,
      {Op::Elu, "Elu", [](double x) { return x < 0 ? 2.0 * (std::exp(x) - 1) : x; }, -4, 4, {{"alpha", attr_f(2.0f)}}},
      {Op::Selu, "Selu",
       [](double x) {
         // the spec's defaults are float attributes, so the oracle uses the float-rounded constants
         return double(1.05070102214813232421875f) *
                (x > 0 ? x : double(1.67326319217681884765625f) * (std::exp(x) - 1));
       }},
      {Op::Sigmoid, "Sigmoid", [](double x) { return 1.0 / (1.0 + std::exp(-x)); }, -30, 30},
      {Op::HardSigmoid,
       "HardSigmoid",
       [](double x) { return std::clamp(0.5 * x + 0.25, 0.0, 1.0); },
       -4,
       4,
       {{"alpha", attr_f(0.5f)}, {"beta", attr_f(0.25f)}}},
      {Op::HardSwish, "HardSwish", [](double x) { return x * std::clamp(x / 6 + 0.5, 0.0, 1.0); }, -8, 8},
      {Op::Tanh, "Tanh", [](double x) { return std::tanh(x); }},
      {Op::Softplus, "Softplus", [](double x) { return std::log(1.0 + std::exp(x)); }, -20, 20},
      {Op::Gelu, "GeluExact", erf_gelu},
      {Op::Gelu,
       "GeluTanh",
       [pi](double x) { return 0.5 * x * (1 + std::tanh(std::sqrt(2 / pi) * (x + 0.044715 * std::pow(x, 3)))); },
       -4,
       4,
       {{"approximate", attr_s("tanh")}}},
      {Op::Erf, "Erf", [](double x) { return std::erf(x); }},
      {Op::Sqrt, "Sqrt", [](double x) { return std::sqrt(x); }, 0.01, 100},
      {Op::Exp, "Exp", [](double x) { return std::exp(x); }},
      {Op::Log, "Log", [](double x) { return std::log(x); }, 0.01, 100},
      {Op::Neg, "Neg", [](double x) { return -x; }},
      {Op::Abs, "Abs", [](double x) { return std::fabs(x); }},
      {Op::Reciprocal, "Reciprocal", [](double x) { return 1 / x; }, 0.1, 10},
      {Op::Floor, "Floor", [](double x) { return std::floor(x); }},
      {Op::Ceil, "Ceil", [](double x) { return std::ceil(x); }},
      {Op::Round, "Round",
       [](double x) {  // half to even, written out
         const double f = std::floor(x), d = x - f;
         if (d != 0.5) return d < 0.5 ? f : f + 1;
         return std::fmod(f, 2.0) == 0 ? f : f + 1;
       }},
      {Op::Sign, "Sign", [](double x) { return x > 0 ? 1.0 : (x < 0 ? -1.0 : 0.0); }},
      {Op::Sin, "Sin", [](double x) { return std::sin(x); }, -10, 10},
      {Op::Cos, "Cos", [](double x) { return std::cos(x); }, -10, 10},
      {Op::Tan, "Tan", [](double x) { return std::sin(x) / std::cos(x); }, -1.5, 1.5},
      {Op::Asin, "Asin", [](double x) { return std::asin(x); }, -1, 1},
      {Op::Acos, "Acos", [](double x) { return std::acos(x); }, -1, 1},
      {Op::Atan, "Atan", [](double x) { return std::atan(x); }},
      {Op::Sinh, "Sinh", [](double x) { return (std::exp(x) - std::exp(-x)) / 2; }},
      {Op::Cosh, "Cosh", [](double x) { return (std::exp(x) + std::exp(-x)) / 2; }},
      {Op::Asinh, "Asinh", [](double x) { return std::log(x + std::sqrt(x * x + 1)); }},
      {Op::Acosh, "Acosh", [](double x) { return std::log(x + std::sqrt(x * x - 1)); }, 1, 10},
      {Op::Atanh, "Atanh", [](double x) { return 0.5 * std::log((1 + x) / (1 - x)); }, -0.99, 0.99},
      {Op::Softsign, "Softsign", [](double x) { return x / (1 + std::fabs(x)); }},
      {Op::Mish, "Mish", [](double x) { return x * std::tanh(std::log(1 + std::exp(x))); }},
      {Op::ThresholdedRelu,
       "ThresholdedRelu",
       [](double x) { return x > 1.5 ? x : 0; },
       -4,
       4,
       {{"alpha", attr_f(1.5f)}}},
      {Op::Celu,
       "Celu",
       [](double x) { return x > 0 ? x : 2.0 * (std::exp(x / 2.0) - 1); },
       -4,
       4,
       {{"alpha", attr_f(2.0f)}}},
      {Op::Shrink,
       "Shrink",
       [](double x) { return x < -1 ? x + 0.5 : (x > 1 ? x - 0.5 : 0); },
       -4,
       4,
       {{"lambd", attr_f(1.0f)}, {"bias", attr_f(0.5f)}}},
  };
}

TEST(Unary, AllOpsAllFloatTypes) {
  for (const UnaryCase& c : cases()) {
    for (DType dt : float_dtypes()) {
      for (const Shape& shape : test_shapes()) {
        Node n = make_node(c.op, 1, 1, c.attrs);
        Tensor x = random_tensor(dt, shape, c.lo, c.hi);
        std::vector<Tensor> out = run(n, {&x});
        ASSERT_EQ(out.size(), 1u) << c.name;
        ASSERT_EQ(out[0].dtype(), dt) << c.name;
        ASSERT_EQ(out[0].shape(), shape) << c.name;
        Tolerance tol = tolerance(dt);
        // bf16/f16 outputs are the exact value rounded once: half an ulp of the dtype, relative
        if (c.op == Op::Tan || c.op == Op::Sinh || c.op == Op::Cosh) tol.rel *= 2;
        expect_all_close(
            out[0], [&](int64_t i) { return c.oracle(x.get_f64(i)); }, tol,
            fmt::format("{} {} {}", c.name, dtype_name(dt), shape_to_string(shape)));
      }
    }
  }
}

TEST(Unary, RoundHalvesToEven) {
  Tensor x = Tensor::from_vector<double>(DType::F32, {8}, {0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 2.4999, 3.5});
  std::vector<Tensor> out = run(make_node(Op::Round, 1), {&x});
  const std::vector<double> want = {0, 2, 2, -0.0, -2, -2, 2, 4};
  for (int64_t i = 0; i < 8; ++i) EXPECT_EQ(out[0].get_f64(i), want[i]) << i;
}

TEST(Unary, IntegerTypes) {
  for (DType dt : {DType::I8, DType::I32, DType::I64}) {
    Tensor x = random_tensor(dt, {5, 7}, -100, 100);
    for (Op op : {Op::Relu, Op::Neg, Op::Abs, Op::Sign}) {
      std::vector<Tensor> out = run(make_node(op, 1), {&x});
      ASSERT_EQ(out[0].dtype(), dt);
      for (int64_t i = 0; i < x.numel(); ++i) {
        const int64_t v = x.get_i64(i);
        const int64_t want = op == Op::Relu  ? std::max<int64_t>(v, 0)
                             : op == Op::Neg ? -v
                             : op == Op::Abs ? (v < 0 ? -v : v)
                                             : (v > 0) - (v < 0);
        ASSERT_EQ(out[0].get_i64(i), want) << op_name(op) << " " << dtype_name(dt);
      }
    }
  }
  // -128 negates to itself in int8 (two's complement wrap), no UB
  Tensor m = Tensor::from_vector<int64_t>(DType::I8, {1}, {-128});
  EXPECT_EQ(run(make_node(Op::Neg, 1), {&m})[0].get_i64(0), -128);
}

TEST(Unary, IsNaNIsInf) {
  const double inf = INFINITY;
  Tensor x = Tensor::from_vector<double>(DType::F16, {6}, {1.0, NAN, inf, -inf, 0.0, -2.0});
  std::vector<Tensor> nan = run(make_node(Op::IsNaN, 1), {&x});
  ASSERT_EQ(nan[0].dtype(), DType::Bool);
  EXPECT_EQ(nan[0].to_i64_vector(), (std::vector<int64_t>{0, 1, 0, 0, 0, 0}));
  EXPECT_EQ(run(make_node(Op::IsInf, 1), {&x})[0].to_i64_vector(), (std::vector<int64_t>{0, 0, 1, 1, 0, 0}));
  EXPECT_EQ(run(make_node(Op::IsInf, 1, 1, {{"detect_negative", attr_i(0)}}), {&x})[0].to_i64_vector(),
            (std::vector<int64_t>{0, 0, 1, 0, 0, 0}));
  EXPECT_EQ(run(make_node(Op::IsInf, 1, 1, {{"detect_positive", attr_i(0)}}), {&x})[0].to_i64_vector(),
            (std::vector<int64_t>{0, 0, 0, 1, 0, 0}));
}

TEST(Unary, PReluBroadcastsSlope) {
  for (DType dt : float_dtypes()) {
    Tensor x = random_tensor(dt, {2, 3, 5, 7});
    Tensor s = random_tensor(dt, {3, 1, 1}, 0.1, 1);
    std::vector<Tensor> out = run(make_node(Op::PRelu, 2), {&x, &s});
    expect_all_close(
        out[0],
        [&](int64_t i) {
          const double v = x.get_f64(i);
          return v < 0 ? v * s.get_f64(bcast_index({3, 1, 1}, {2, 3, 5, 7}, i)) : v;
        },
        tolerance(dt), "PRelu");
  }
  Tensor x = random_tensor(DType::F32, {2, 3});
  Tensor bad = random_tensor(DType::F32, {2, 3, 1});
  EXPECT_NE(run_error(make_node(Op::PRelu, 2), {&x, &bad}).find("does not broadcast"), std::string::npos);
}

TEST(Unary, ClipForms) {
  Tensor x = random_tensor(DType::F32, {5, 7, 11}, -10, 10);
  // opset 6: attributes
  std::vector<Tensor> a = run(make_node(Op::Clip, 1, 1, {{"min", attr_f(-1.5f)}, {"max", attr_f(2.0f)}}), {&x}, 6);
  expect_all_close(
      a[0], [&](int64_t i) { return std::clamp(x.get_f64(i), -1.5, 2.0); }, {0, 0}, "Clip attr");
  // opset 13: inputs, max only
  Tensor hi = Tensor::scalar_f32(3.0f);
  std::vector<Tensor> b = run(make_node(Op::Clip, 3), {&x, nullptr, &hi}, 13);
  expect_all_close(
      b[0], [&](int64_t i) { return std::min(x.get_f64(i), 3.0); }, {0, 0}, "Clip max");
  // min > max gives max everywhere
  Tensor lo = Tensor::scalar_f32(5.0f);
  std::vector<Tensor> c = run(make_node(Op::Clip, 3), {&x, &lo, &hi}, 13);
  expect_all_close(
      c[0], [&](int64_t) { return 3.0; }, {0, 0}, "Clip min>max");
  // integers
  Tensor xi = random_tensor(DType::I8, {64}, -100, 100);
  Tensor li = Tensor::from_vector<int64_t>(DType::I8, {}, {-7});
  std::vector<Tensor> d = run(make_node(Op::Clip, 2), {&xi, &li}, 13);
  for (int64_t i = 0; i < 64; ++i) ASSERT_EQ(d[0].get_i64(i), std::max<int64_t>(xi.get_i64(i), -7));
  // errors: non-scalar bound, mixed dtypes
  Tensor v = random_tensor(DType::F32, {2});
  EXPECT_NE(run_error(make_node(Op::Clip, 2), {&x, &v}, 13).find("must be a scalar"), std::string::npos);
  Tensor d64 = Tensor::from_vector<double>(DType::F64, {}, {1.0});
  EXPECT_NE(run_error(make_node(Op::Clip, 2), {&x, &d64}, 13).find("different dtypes"), std::string::npos);
}

TEST(Unary, Errors) {
  Tensor xi = random_tensor(DType::I32, {3});
  const std::string e = run_error(make_node(Op::Sqrt, 1, 1, {}, "sq1"), {&xi});
  EXPECT_EQ(e, "[Sqrt] node 'sq1': input 0 has dtype i32; expected float types");
  Tensor x = random_tensor(DType::F32, {3});
  EXPECT_NE(run_error(make_node(Op::Gelu, 1, 1, {{"approximate", attr_s("fast")}}), {&x}).find("approximate"),
            std::string::npos);
}

TEST(Unary, LoadTimeShapeKeepsSymbols) {
  ValueInfo in;
  in.dtype = DType::F16;
  in.rank_known = true;
  in.shape = {kFirstSymbolDim, 3, kUnknownDim};
  Result<std::vector<ValueInfo>> r = infer_node(make_node(Op::Gelu, 1), {&in}, 20);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ((*r)[0].shape, in.shape);
  EXPECT_EQ((*r)[0].dtype, DType::F16);
}

}  // namespace
}  // namespace gpuopt
