// Reductions, ArgMax/ArgMin, CumSum, Softmax/LogSoftmax against oracles written here: each input
// element is unravelled and mapped to its output element with plain coordinate arithmetic.
#include "op_test_util.h"

#include <limits>
#include <map>

namespace gpuopt {
namespace {

using namespace gpuopt::testing;

std::vector<int64_t> unravel(int64_t linear, const Shape& s) {
  std::vector<int64_t> c(s.size());
  for (size_t d = s.size(); d-- > 0;) {
    c[d] = linear % s[d];
    linear /= s[d];
  }
  return c;
}

// Groups the input elements by output position (reduced coordinates dropped), in input order.
std::map<std::vector<int64_t>, std::vector<double>> groups(const Tensor& x, const std::vector<bool>& reduced) {
  std::map<std::vector<int64_t>, std::vector<double>> g;
  for (int64_t i = 0; i < x.numel(); ++i) {
    std::vector<int64_t> c = unravel(i, x.shape()), key;
    for (size_t d = 0; d < c.size(); ++d)
      if (!reduced[d]) key.push_back(c[d]);
    g[key].push_back(x.get_f64(i));
  }
  return g;
}

double fold(Op op, const std::vector<double>& v) {
  double s = 0, p = 1, mx = -INFINITY, mn = INFINITY, sq = 0, l1 = 0;
  for (double e : v) {
    s += e;
    p *= e;
    mx = std::max(mx, e);
    mn = std::min(mn, e);
    sq += e * e;
    l1 += std::fabs(e);
  }
  switch (op) {
    case Op::ReduceSum:
      return s;
    case Op::ReduceMean:
      return s / double(v.size());
    case Op::ReduceMax:
      return mx;
    case Op::ReduceMin:
      return mn;
    case Op::ReduceProd:
      return p;
    case Op::ReduceL1:
      return l1;
    case Op::ReduceL2:
      return std::sqrt(sq);
    case Op::ReduceSumSquare:
      return sq;
    case Op::ReduceLogSum:
      return std::log(s);
    case Op::ReduceLogSumExp: {
      double e = 0;
      for (double x : v) e += std::exp(x);
      return std::log(e);
    }
    default:
      return NAN;
  }
}

const std::vector<Op>& reduce_ops() {
  static const std::vector<Op> kOps = {Op::ReduceSum,    Op::ReduceMean,     Op::ReduceMax, Op::ReduceMin,
                                       Op::ReduceProd,   Op::ReduceL1,       Op::ReduceL2,  Op::ReduceSumSquare,
                                       Op::ReduceLogSum, Op::ReduceLogSumExp};
  return kOps;
}

// Runs op with axes in the form its opset expects (attribute or input).
Result<std::vector<Tensor>> run_reduce(Op op, const Tensor& x, const std::vector<int64_t>& axes, bool keepdims,
                                       int opset, bool noop = false) {
  const bool axes_input = op == Op::ReduceSum ? opset >= 13 : opset >= 18;
  AttributeMap attrs = {{"keepdims", attr_i(keepdims)}};
  if (noop) attrs["noop_with_empty_axes"] = attr_i(1);
  if (!axes_input && !axes.empty()) attrs["axes"] = attr_ints(axes);
  Tensor ax = Tensor::from_vector<int64_t>(DType::I64, {static_cast<int64_t>(axes.size())}, axes);
  Node n = make_node(op, axes_input ? 2 : 1, 1, attrs);
  std::vector<const Tensor*> in = {&x};
  if (axes_input) in.push_back(&ax);
  return eval_node(n, in, opset);
}

TEST(Reduce, AllOpsAxesKeepdimsOpsets) {
  const std::vector<std::pair<Shape, std::vector<int64_t>>> cases = {
      {{5, 7, 11, 13}, {1}}, {{5, 7, 11, 13}, {0, 2}}, {{5, 7, 11, 13}, {-1}},
      {{128, 2, 2, 2}, {}},  {{128, 2, 2, 2}, {0}},    {{3, 1, 17}, {1, 2}},
      {{64}, {0}},           {{6, 5}, {-2, -1}},
  };
  for (Op op : reduce_ops())
    for (DType dt : float_dtypes())
      for (int opset : {11, 13, 18})
        for (bool keepdims : {true, false})
          for (const auto& [shape, axes] : cases) {
            // positive values keep Prod and LogSum well-conditioned
            Tensor x = random_tensor(dt, shape, op == Op::ReduceProd ? 0.8 : 0.1, op == Op::ReduceProd ? 1.2 : 2.0);
            auto r = run_reduce(op, x, axes, keepdims, opset);
            ASSERT_TRUE(r.ok()) << r.status().to_string();
            const Tensor& y = (*r)[0];
            std::vector<bool> red(shape.size(), axes.empty());
            for (int64_t a : axes) red[a < 0 ? a + int64_t(shape.size()) : a] = true;
            Shape want;
            for (size_t d = 0; d < shape.size(); ++d)
              if (!red[d])
                want.push_back(shape[d]);
              else if (keepdims)
                want.push_back(1);
            ASSERT_EQ(y.shape(), want) << op_name(op);
            auto g = groups(x, red);
            ASSERT_EQ(int64_t(g.size()), y.numel());
            // map iteration order is the row-major order of the output
            std::vector<double> expect;
            for (auto& [k, v] : g) expect.push_back(fold(op, v));
            Tolerance tol = tolerance(dt);
            if (dt == DType::F32) tol.rel = 2e-4;  // long sums rounded once still differ from the oracle's order
            expect_all_close(
                y, [&](int64_t i) { return expect[i]; }, tol,
                fmt::format("{} {} opset {} keepdims {} {}", op_name(op), dtype_name(dt), opset, keepdims,
                            shape_to_string(shape)));
          }
}

TEST(Reduce, IntegerTypesExact) {
  for (DType dt : {DType::I32, DType::I64, DType::U8, DType::I8}) {
    Tensor x = random_tensor(dt, {5, 7, 3}, dt == DType::U8 ? 0 : -20, 20);
    for (Op op : {Op::ReduceSum, Op::ReduceMax, Op::ReduceMin, Op::ReduceMean, Op::ReduceSumSquare, Op::ReduceL1}) {
      auto r = run_reduce(op, x, {1}, false, 18);
      ASSERT_TRUE(r.ok()) << r.status().to_string();
      auto g = groups(x, {false, true, false});
      int64_t i = 0;
      for (auto& [k, v] : g) {
        double want = fold(op, v);
        if (op == Op::ReduceMean) want = std::trunc(want);  // integer mean truncates
        if (dt == DType::I8 || dt == DType::U8)
          want = dt == DType::I8 ? double(int8_t(int64_t(want))) : double(uint8_t(int64_t(want)));
        ASSERT_EQ((*r)[0].get_f64(i++), want) << op_name(op) << " " << dtype_name(dt);
      }
    }
  }
}

TEST(Reduce, EmptySetsAndNoop) {
  Tensor x = Tensor::empty(DType::F32, {2, 0, 4});
  const std::map<Op, double> want = {
      {Op::ReduceSum, 0}, {Op::ReduceProd, 1},      {Op::ReduceMax, -INFINITY},    {Op::ReduceMin, INFINITY},
      {Op::ReduceL2, 0},  {Op::ReduceSumSquare, 0}, {Op::ReduceLogSum, -INFINITY}, {Op::ReduceLogSumExp, -INFINITY}};
  for (auto [op, v] : want) {
    auto r = run_reduce(op, x, {1}, true, 18);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    ASSERT_EQ((*r)[0].shape(), (Shape{2, 1, 4}));
    for (int64_t i = 0; i < 8; ++i) ASSERT_EQ((*r)[0].get_f64(i), v) << op_name(op);
  }
  // noop_with_empty_axes returns the input; without it empty axes reduce everything
  Tensor y = random_tensor(DType::F32, {3, 4});
  auto noop = run_reduce(Op::ReduceSum, y, {}, true, 13, /*noop=*/true);
  ASSERT_TRUE(noop.ok());
  EXPECT_EQ((*noop)[0].shape(), y.shape());
  for (int64_t i = 0; i < 12; ++i) EXPECT_EQ((*noop)[0].get_f64(i), y.get_f64(i));
  auto all = run_reduce(Op::ReduceSum, y, {}, false, 13);
  ASSERT_TRUE(all.ok());
  EXPECT_EQ((*all)[0].shape(), Shape{});
}

TEST(Reduce, BoolMaxMin) {
  Tensor x = Tensor::from_vector<int64_t>(DType::Bool, {2, 3}, {1, 0, 0, 1, 1, 1});
  auto mx = run_reduce(Op::ReduceMax, x, {1}, false, 20);
  auto mn = run_reduce(Op::ReduceMin, x, {1}, false, 20);
  ASSERT_TRUE(mx.ok() && mn.ok());
  EXPECT_EQ((*mx)[0].to_i64_vector(), (std::vector<int64_t>{1, 1}));
  EXPECT_EQ((*mn)[0].to_i64_vector(), (std::vector<int64_t>{0, 1}));
}

TEST(Reduce, Errors) {
  Tensor x = random_tensor(DType::F32, {2, 3});
  auto r = run_reduce(Op::ReduceMean, x, {2}, true, 13);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "[ReduceMean] node 'n0': axis 2 is out of range for rank 2");
  r = run_reduce(Op::ReduceSum, x, {1, -1}, true, 13);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("more than once"), std::string::npos);
}

TEST(Reduce, LoadTimeAxesUnknown) {
  ValueInfo x, axes;
  x.dtype = DType::F32;
  x.rank_known = true;
  x.shape = {kFirstSymbolDim, 1, 8};
  axes.dtype = DType::I64;
  axes.rank_known = true;
  axes.shape = {1};
  Node n = make_node(Op::ReduceSum, 2);
  Result<std::vector<ValueInfo>> r = infer_node(n, {&x, &axes}, 13);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ((*r)[0].shape, (Shape{kUnknownDim, 1, kUnknownDim}));
  Tensor av = Tensor::from_vector<int64_t>(DType::I64, {1}, {-1});
  axes.value = &av;
  r = infer_node(n, {&x, &axes}, 13);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)[0].shape, (Shape{kFirstSymbolDim, 1, 1}));
}

TEST(ArgMaxMin, AxesKeepdimsLastIndex) {
  for (DType dt : {DType::F32, DType::F16, DType::I64, DType::I8}) {
    // few distinct values so ties are common and select_last_index matters
    Tensor x = random_tensor(dt, {5, 7, 11}, -3, 3);
    for (Op op : {Op::ArgMax, Op::ArgMin})
      for (int64_t axis : {0, 1, 2, -1})
        for (int64_t keep : {0, 1})
          for (int64_t last : {0, 1}) {
            std::vector<Tensor> out = run(
                make_node(op, 1, 1,
                          {{"axis", attr_i(axis)}, {"keepdims", attr_i(keep)}, {"select_last_index", attr_i(last)}}),
                {&x}, 13);
            ASSERT_EQ(out[0].dtype(), DType::I64);
            const int64_t ax = axis < 0 ? axis + 3 : axis;
            std::vector<bool> red(3, false);
            red[ax] = true;
            auto g = groups(x, red);
            ASSERT_EQ(int64_t(g.size()), out[0].numel());
            ASSERT_EQ(out[0].rank(), keep ? 3 : 2);
            int64_t i = 0;
            for (auto& [k, v] : g) {
              int64_t best = 0;
              for (int64_t j = 0; j < int64_t(v.size()); ++j) {
                const bool better = op == Op::ArgMax ? (v[j] > v[best] || (last && v[j] == v[best]))
                                                     : (v[j] < v[best] || (last && v[j] == v[best]));
                if (better) best = j;
              }
              ASSERT_EQ(out[0].get_i64(i++), best) << op_name(op) << " axis " << axis << " last " << last;
            }
          }
  }
}

TEST(CumSum, ExclusiveReverseTypes) {
  for (DType dt : {DType::F32, DType::F64, DType::F16, DType::I32, DType::I64}) {
    const Shape s = {5, 7, 3};
    Tensor x = random_tensor(dt, s, -10, 10);
    for (int64_t axis : {0, 1, -1})
      for (int64_t excl : {0, 1})
        for (int64_t rev : {0, 1}) {
          Tensor ax = Tensor::from_vector<int64_t>(axis == 1 ? DType::I32 : DType::I64, {}, {axis});
          std::vector<Tensor> out =
              run(make_node(Op::CumSum, 2, 1, {{"exclusive", attr_i(excl)}, {"reverse", attr_i(rev)}}), {&x, &ax}, 14);
          const int64_t a = axis < 0 ? axis + 3 : axis;
          expect_all_close(
              out[0],
              [&](int64_t i) {
                std::vector<int64_t> c = unravel(i, s);
                double sum = 0;
                for (int64_t k = 0; k < s[a]; ++k) {
                  const bool take = rev ? (excl ? k > c[a] : k >= c[a]) : (excl ? k < c[a] : k <= c[a]);
                  if (!take) continue;
                  std::vector<int64_t> cc = c;
                  cc[a] = k;
                  sum += x.get_f64((cc[0] * s[1] + cc[1]) * s[2] + cc[2]);
                }
                return sum;
              },
              dt == DType::F16 ? Tolerance{0.05, 2e-3}
                               : tolerance(dt),  // f16 sums of up to 7 values near 50: 1 ulp = 0.03
              fmt::format("CumSum {} axis {} excl {} rev {}", dtype_name(dt), axis, excl, rev));
        }
  }
  Tensor x = random_tensor(DType::F32, {3});
  Tensor bad = Tensor::from_vector<int64_t>(DType::I64, {}, {2});
  EXPECT_NE(run_error(make_node(Op::CumSum, 2), {&x, &bad}).find("out of range"), std::string::npos);
  Tensor none = Tensor::empty(DType::I64, {0});  // an empty axis tensor must not be read
  EXPECT_NE(run_error(make_node(Op::CumSum, 2), {&x, &none}).find("axis must be a scalar"), std::string::npos);
}

TEST(Softmax, AxisFormsAndOpsets) {
  const Shape s = {3, 4, 5};
  for (DType dt : float_dtypes())
    for (Op op : {Op::Softmax, Op::LogSoftmax})
      for (int opset : {11, 13})
        for (int64_t axis : {0, 1, 2, -1}) {
          Tensor x = random_tensor(dt, s, -5, 5);
          std::vector<Tensor> out = run(make_node(op, 1, 1, {{"axis", attr_i(axis)}}), {&x}, opset);
          const int64_t a = axis < 0 ? axis + 3 : axis;
          // opset < 13: normalise over the whole flattened block [a, rank); else over dim a only
          expect_all_close(
              out[0],
              [&](int64_t i) {
                std::vector<int64_t> c = unravel(i, s);
                double num = x.get_f64(i), den = 0;
                for (int64_t j = 0; j < x.numel(); ++j) {
                  std::vector<int64_t> cj = unravel(j, s);
                  bool same = true;
                  for (int64_t d = 0; d < 3; ++d)
                    if (opset < 13 ? d < a && cj[d] != c[d] : d != a && cj[d] != c[d]) same = false;
                  if (same) den += std::exp(x.get_f64(j));
                }
                return op == Op::Softmax ? std::exp(num) / den : num - std::log(den);
              },
              tolerance(dt), fmt::format("{} {} opset {} axis {}", op_name(op), dtype_name(dt), opset, axis));
        }
  Tensor big = Tensor::from_vector<double>(DType::F32, {1, 3}, {1000.0, 1001.0, 1002.0});
  std::vector<Tensor> out = run(make_node(Op::Softmax, 1), {&big}, 13);
  EXPECT_NEAR(out[0].get_f64(2), 0.66524096, 1e-6);  // no overflow for large inputs
  Tensor x = random_tensor(DType::F32, {2, 3});
  EXPECT_NE(run_error(make_node(Op::Softmax, 1, 1, {{"axis", attr_i(2)}}), {&x}, 13).find("out of range"),
            std::string::npos);
}

TEST(Hardmax, FirstMaximum) {
  Tensor x = Tensor::from_vector<double>(DType::F32, {2, 3}, {1, 3, 3, -1, -2, -3});
  std::vector<Tensor> out = run(make_node(Op::Hardmax, 1), {&x}, 13);
  EXPECT_EQ(out[0].to_i64_vector(), (std::vector<int64_t>{0, 1, 0, 1, 0, 0}));
}

}  // namespace
}  // namespace gpuopt
