// Binary/variadic elementwise ops against oracles computed here per element with the
// unravel/modulo broadcast index (not the library iterator) and std:: math in double.
#include "op_test_util.h"

#include <limits>

namespace gpuopt {
namespace {

using namespace gpuopt::testing;

// Pairs of broadcastable shapes mixing powers of two and odd sizes.
const std::vector<std::pair<Shape, Shape>>& shape_pairs() {
  static const std::vector<std::pair<Shape, Shape>> kPairs = {
      {{128, 2, 2, 2}, {128, 2, 2, 2}},
      {{5, 7, 11, 13}, {13}},
      {{5, 1, 11, 1}, {1, 7, 1, 13}},
      {{3, 4}, {}},
      {{1}, {5, 7, 3}},
      {{4, 0, 3}, {1, 3}},
      {{16, 9}, {16, 1}},
  };
  return kPairs;
}

struct BinCase {
  Op op;
  std::function<double(double, double)> oracle;
  double lo = -8, hi = 8;  // input range (b avoids 0 for division)
};

void run_binary(const BinCase& c, DType dt, const Shape& sa, const Shape& sb, DType out_dt) {
  Tensor a = random_tensor(dt, sa, c.lo, c.hi);
  Tensor b = random_tensor(dt, sb, c.lo, c.hi);
  if (c.op == Op::Div || c.op == Op::Mod)  // keep divisors away from zero
    for (int64_t i = 0; i < b.numel(); ++i)
      if (std::fabs(b.get_f64(i)) < 0.5) b.set_f64(i, 3);
  const Node n =
      make_node(c.op, 2, 1, c.op == Op::Mod && dtype_is_float(dt) ? AttributeMap{{"fmod", attr_i(1)}} : AttributeMap{});
  std::vector<Tensor> out = run(n, {&a, &b});
  ASSERT_EQ(out.size(), 1u);
  const Shape so = out[0].shape();
  std::vector<Shape> ss = {sa, sb};
  ASSERT_EQ(so.size(), std::max(sa.size(), sb.size()));
  ASSERT_EQ(out[0].dtype(), out_dt);
  expect_all_close(
      out[0], [&](int64_t i) { return c.oracle(a.get_f64(bcast_index(sa, so, i)), b.get_f64(bcast_index(sb, so, i))); },
      tolerance(out_dt),
      fmt::format("{} {} {} {}", op_name(c.op), dtype_name(dt), shape_to_string(sa), shape_to_string(sb)));
}

TEST(Binary, ArithmeticFloat) {
  const std::vector<BinCase> cs = {
      {Op::Add, [](double x, double y) { return x + y; }},
      {Op::Sub, [](double x, double y) { return x - y; }},
      {Op::Mul, [](double x, double y) { return x * y; }},
      {Op::Div, [](double x, double y) { return x / y; }},
      {Op::Mod, [](double x, double y) { return x - y * std::trunc(x / y); }},  // fmod=1
      {Op::Pow, [](double x, double y) { return std::exp(y * std::log(x)); }, 0.1, 3},
  };
  for (const BinCase& c : cs)
    for (DType dt : float_dtypes())
      for (const auto& [sa, sb] : shape_pairs()) run_binary(c, dt, sa, sb, dt);
}

TEST(Binary, Comparisons) {
  const std::vector<BinCase> cs = {
      {Op::Equal, [](double x, double y) { return double(x == y); }, -3, 3},
      {Op::Less, [](double x, double y) { return double(x < y); }, -3, 3},
      {Op::LessOrEqual, [](double x, double y) { return double(x <= y); }, -3, 3},
      {Op::Greater, [](double x, double y) { return double(x > y); }, -3, 3},
      {Op::GreaterOrEqual, [](double x, double y) { return double(x >= y); }, -3, 3},
  };
  for (const BinCase& c : cs)
    for (DType dt : {DType::F32, DType::F16, DType::I64, DType::I32, DType::I8, DType::U8})
      for (const auto& [sa, sb] : shape_pairs()) run_binary(c, dt, sa, sb, DType::Bool);
}

TEST(Binary, Logic) {
  const std::vector<BinCase> cs = {
      {Op::And, [](double x, double y) { return double(x != 0 && y != 0); }},
      {Op::Or, [](double x, double y) { return double(x != 0 || y != 0); }},
      {Op::Xor, [](double x, double y) { return double((x != 0) != (y != 0)); }},
  };
  for (const BinCase& c : cs)
    for (const auto& [sa, sb] : shape_pairs()) run_binary(c, DType::Bool, sa, sb, DType::Bool);
  Tensor x = random_tensor(DType::Bool, {5, 7});
  std::vector<Tensor> out = run(make_node(Op::Not, 1), {&x});
  for (int64_t i = 0; i < 35; ++i) ASSERT_EQ(out[0].get_i64(i), 1 - x.get_i64(i));
}

// Integer results must be exact: compared through int64 (every value here is small).
TEST(Binary, IntegerExact) {
  for (DType dt : {DType::I8, DType::U8, DType::I16, DType::I32, DType::I64, DType::U32, DType::U64}) {
    const bool is_unsigned = dt == DType::U8 || dt == DType::U32 || dt == DType::U64;
    Tensor a = random_tensor(dt, {5, 7, 3}, is_unsigned ? 0 : -60, 60);
    Tensor b = random_tensor(dt, {7, 1}, is_unsigned ? 1 : -9, 9);
    for (int64_t i = 0; i < b.numel(); ++i)
      if (b.get_i64(i) == 0) b.set_f64(i, 4);
    for (Op op : {Op::Add, Op::Sub, Op::Mul, Op::Div, Op::Mod}) {
      if (is_unsigned && op == Op::Sub) continue;  // wraps; covered below
      for (int64_t fmod : {0, 1}) {
        if (op != Op::Mod && fmod) continue;
        std::vector<Tensor> out = run(make_node(op, 2, 1, {{"fmod", attr_i(fmod)}}), {&a, &b});
        ASSERT_EQ(out[0].dtype(), dt);
        for (int64_t i = 0; i < out[0].numel(); ++i) {
          const int64_t x = a.get_i64(bcast_index({5, 7, 3}, {5, 7, 3}, i));
          const int64_t y = b.get_i64(bcast_index({7, 1}, {5, 7, 3}, i));
          int64_t want = 0;
          switch (op) {
            case Op::Add:
              want = x + y;
              break;
            case Op::Sub:
              want = x - y;
              break;
            case Op::Mul:
              want = x * y;
              break;
            case Op::Div:
              want = static_cast<int64_t>(std::trunc(double(x) / double(y)));
              break;
            default: {
              // fmod=1: sign of the dividend; fmod=0: sign of the divisor (Python)
              const double r = std::fmod(double(x), double(y));
              want = static_cast<int64_t>(fmod || r == 0 || (r < 0) == (y < 0) ? r : r + y);
            }
          }
          if (dt == DType::I8) want = static_cast<int8_t>(want);  // Mul may wrap in 8 bits
          if (dt == DType::U8) want = static_cast<uint8_t>(want);
          ASSERT_EQ(out[0].get_i64(i), want) << op_name(op) << " " << dtype_name(dt) << " " << x << "," << y;
        }
      }
    }
  }
  // Wrapping: no UB on overflow or on MIN / -1
  Tensor mn = Tensor::from_vector<int64_t>(DType::I32, {2}, {std::numeric_limits<int32_t>::min(), 7});
  Tensor m1 = Tensor::from_vector<int64_t>(DType::I32, {1}, {-1});
  EXPECT_EQ(run(make_node(Op::Div, 2), {&mn, &m1})[0].to_i64_vector(),
            (std::vector<int64_t>{std::numeric_limits<int32_t>::min(), -7}));
  Tensor u = Tensor::from_vector<int64_t>(DType::U8, {1}, {3});
  Tensor v = Tensor::from_vector<int64_t>(DType::U8, {1}, {5});
  EXPECT_EQ(run(make_node(Op::Sub, 2), {&u, &v})[0].get_i64(0), 254);
}

TEST(Binary, IntegerDivisionByZeroIsAnError) {
  Tensor a = random_tensor(DType::I32, {4}, 1, 9);
  Tensor z = Tensor::from_vector<int64_t>(DType::I32, {4}, {1, 2, 0, 3});
  EXPECT_EQ(run_error(make_node(Op::Div, 2, 1, {}, "d"), {&a, &z}),
            "[Div] node 'd': integer division by zero (input 1, element 2)");
  EXPECT_NE(run_error(make_node(Op::Mod, 2), {&a, &z}).find("division by zero"), std::string::npos);
  // float division by zero is IEEE: inf
  Tensor fa = Tensor::from_vector<double>(DType::F32, {1}, {1.0});
  Tensor fz = Tensor::from_vector<double>(DType::F32, {1}, {0.0});
  EXPECT_TRUE(std::isinf(run(make_node(Op::Div, 2), {&fa, &fz})[0].get_f64(0)));
}

TEST(Binary, PowMixedTypes) {
  Tensor fb = random_tensor(DType::F32, {3, 5}, 0.5, 3);
  for (DType et : {DType::I32, DType::I64, DType::F32, DType::F64, DType::U8}) {
    Tensor e = random_tensor(et, {5}, 0, 4);
    std::vector<Tensor> out = run(make_node(Op::Pow, 2), {&fb, &e});
    ASSERT_EQ(out[0].dtype(), DType::F32);
    expect_all_close(
        out[0], [&](int64_t i) { return std::pow(fb.get_f64(i), e.get_f64(i % 5)); }, tolerance(DType::F32),
        fmt::format("Pow f32^{}", dtype_name(et)));
  }
  Tensor ib = Tensor::from_vector<int64_t>(DType::I64, {4}, {2, -3, 5, 1});
  Tensor ie = Tensor::from_vector<int64_t>(DType::I64, {4}, {10, 3, 0, -2});
  EXPECT_EQ(run(make_node(Op::Pow, 2), {&ib, &ie})[0].to_i64_vector(), (std::vector<int64_t>{1024, -27, 1, 1}));
  Tensor fe = Tensor::from_vector<double>(DType::F32, {4}, {2.0, 2.0, 0.5, 3.0});
  EXPECT_EQ(run(make_node(Op::Pow, 2), {&ib, &fe})[0].to_i64_vector(), (std::vector<int64_t>{4, 9, 2, 1}));
}

TEST(Binary, ModFloatNeedsFmod) {
  Tensor a = random_tensor(DType::F32, {3});
  EXPECT_NE(run_error(make_node(Op::Mod, 2), {&a, &a}).find("fmod must be 1"), std::string::npos);
}

TEST(Binary, Errors) {
  Tensor a = random_tensor(DType::F32, {2, 3});
  Tensor b = random_tensor(DType::F32, {4});
  EXPECT_EQ(run_error(make_node(Op::Add, 2, 1, {}, "add3"), {&a, &b}),
            "[Add] node 'add3': shapes [2,3] and [4] do not broadcast");
  Tensor c = random_tensor(DType::I64, {2, 3});
  EXPECT_EQ(run_error(make_node(Op::Mul, 2, 1, {}, "m"), {&a, &c}),
            "[Mul] node 'm': inputs 0 and 1 have different dtypes (f32 and i64)");
  EXPECT_NE(run_error(make_node(Op::And, 2), {&a, &a}).find("expected bool"), std::string::npos);
  EXPECT_NE(run_error(make_node(Op::Add, 1), {&a}).find("expects 2 inputs"), std::string::npos);
}

TEST(Binary, LoadTimeSymbolicShapes) {
  ValueInfo a, b;
  a.dtype = b.dtype = DType::F32;
  a.rank_known = b.rank_known = true;
  a.shape = {kFirstSymbolDim, 1, 64};
  b.shape = {kFirstSymbolDim, 12, 1};
  Result<std::vector<ValueInfo>> r = infer_node(make_node(Op::Add, 2), {&a, &b}, 17);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ((*r)[0].shape, (Shape{kFirstSymbolDim, 12, 64}));
  ValueInfo u;  // unknown rank
  u.dtype = DType::F32;
  r = infer_node(make_node(Op::Less, 2), {&a, &u}, 17);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE((*r)[0].rank_known);
  EXPECT_EQ((*r)[0].dtype, DType::Bool);
}

TEST(Variadic, MinMaxSumMean) {
  const std::vector<Shape> shapes = {{5, 1, 13}, {7, 1}, {13}, {1, 7, 13}};
  const Shape so = {5, 7, 13};
  for (DType dt : {DType::F32, DType::F16, DType::BF16, DType::F64, DType::I32, DType::I64, DType::U8}) {
    std::vector<Tensor> ins;
    for (const Shape& s : shapes) ins.push_back(random_tensor(dt, s, dt == DType::U8 ? 0 : -50, 50));
    std::vector<const Tensor*> ptrs;
    for (const Tensor& t : ins) ptrs.push_back(&t);
    for (Op op : {Op::Min, Op::Max, Op::Sum, Op::Mean}) {
      if ((op == Op::Sum || op == Op::Mean) && !dtype_is_float(dt)) continue;
      for (size_t k = 1; k <= ins.size(); ++k) {
        std::vector<const Tensor*> sub(ptrs.begin(), ptrs.begin() + k);
        std::vector<Tensor> out = run(make_node(op, k), sub);
        ASSERT_EQ(out[0].dtype(), dt);
        Shape want_shape;
        for (size_t j = 0; j < k; ++j) want_shape = want_shape.size() >= shapes[j].size() ? want_shape : shapes[j];
        expect_all_close(
            out[0],
            [&](int64_t i) {
              double mn = INFINITY, mx = -INFINITY, sum = 0;
              for (size_t j = 0; j < k; ++j) {
                const double v = ins[j].get_f64(bcast_index(shapes[j], out[0].shape(), i));
                mn = std::min(mn, v);
                mx = std::max(mx, v);
                sum += v;
              }
              return op == Op::Min ? mn : op == Op::Max ? mx : op == Op::Sum ? sum : sum / double(k);
            },
            tolerance(dt), fmt::format("{} x{} {}", op_name(op), k, dtype_name(dt)));
      }
    }
  }
  Tensor i = random_tensor(DType::I32, {3});
  EXPECT_NE(run_error(make_node(Op::Sum, 2), {&i, &i}).find("expected float types"), std::string::npos);
}

TEST(Variadic, MaxPropagatesNaN) {
  Tensor a = Tensor::from_vector<double>(DType::F32, {3}, {1.0, NAN, 2.0});
  Tensor b = Tensor::from_vector<double>(DType::F32, {3}, {NAN, 0.0, 1.0});
  std::vector<Tensor> out = run(make_node(Op::Max, 2), {&a, &b});
  EXPECT_TRUE(std::isnan(out[0].get_f64(0)));
  EXPECT_TRUE(std::isnan(out[0].get_f64(1)));
  EXPECT_EQ(out[0].get_f64(2), 2.0);
}

TEST(Where, ThreeWayBroadcast) {
  for (DType dt : {DType::F32, DType::I64, DType::F16, DType::Bool}) {
    const Shape sc = {5, 1, 13}, sx = {7, 1}, sy = {13};
    Tensor c = random_tensor(DType::Bool, sc), x = random_tensor(dt, sx), y = random_tensor(dt, sy);
    std::vector<Tensor> out = run(make_node(Op::Where, 3), {&c, &x, &y});
    ASSERT_EQ(out[0].shape(), (Shape{5, 7, 13}));
    ASSERT_EQ(out[0].dtype(), dt);
    const Shape so = out[0].shape();
    expect_all_close(
        out[0],
        [&](int64_t i) {
          return c.get_i64(bcast_index(sc, so, i)) ? x.get_f64(bcast_index(sx, so, i))
                                                   : y.get_f64(bcast_index(sy, so, i));
        },
        {0, 0}, "Where");
  }
  Tensor f = random_tensor(DType::F32, {3});
  EXPECT_NE(run_error(make_node(Op::Where, 3), {&f, &f, &f}).find("expected bool"), std::string::npos);
}

TEST(Equal, Strings) {
  Tensor a = Tensor::empty(DType::String, {2, 2});
  a.strings() = {"x", "yy", "x", "z"};
  Tensor b = Tensor::empty(DType::String, {2});
  b.strings() = {"x", "z"};
  std::vector<Tensor> out = run(make_node(Op::Equal, 2), {&a, &b}, 19);
  EXPECT_EQ(out[0].to_i64_vector(), (std::vector<int64_t>{1, 0, 1, 1}));
}

}  // namespace
}  // namespace gpuopt
