// Ops of the math family beyond the core list: bitwise ops, BitShift, Swish, CumProd and the
// NegativeLogLikelihoodLoss / SoftmaxCrossEntropyLoss pair, against oracles written here.
#include "op_test_util.h"

#include <limits>

namespace gpuopt {
namespace {

using namespace gpuopt::testing;

TEST(Bitwise, AndOrXorNotShift) {
  for (DType dt : {DType::U8, DType::I16, DType::I32, DType::U64}) {
    Tensor a = random_tensor(dt, {5, 7}, 0, 120), b = random_tensor(dt, {7}, 0, 120);
    for (Op op : {Op::BitwiseAnd, Op::BitwiseOr, Op::BitwiseXor}) {
      std::vector<Tensor> out = run(make_node(op, 2), {&a, &b}, 18);
      for (int64_t i = 0; i < 35; ++i) {
        const int64_t x = a.get_i64(i), y = b.get_i64(i % 7);
        ASSERT_EQ(out[0].get_i64(i), op == Op::BitwiseAnd ? (x & y) : op == Op::BitwiseOr ? (x | y) : (x ^ y));
      }
    }
    std::vector<Tensor> inv = run(make_node(Op::BitwiseNot, 1), {&a}, 18);
    for (int64_t i = 0; i < 35; ++i) {
      Tensor want = Tensor::from_vector<int64_t>(DType::I64, {1}, {~a.get_i64(i)}).cast(dt);
      ASSERT_EQ(inv[0].get_i64(i), want.get_i64(0));
    }
  }
  Tensor u = Tensor::from_vector<int64_t>(DType::U8, {4}, {1, 255, 16, 7});
  Tensor s = Tensor::from_vector<int64_t>(DType::U8, {4}, {3, 1, 9, 0});
  EXPECT_EQ(run(make_node(Op::BitShift, 2, 1, {{"direction", attr_s("LEFT")}}), {&u, &s})[0].to_i64_vector(),
            (std::vector<int64_t>{8, 254, 0, 7}));  // shifts past the width give 0
  EXPECT_EQ(run(make_node(Op::BitShift, 2, 1, {{"direction", attr_s("RIGHT")}}), {&u, &s})[0].to_i64_vector(),
            (std::vector<int64_t>{0, 127, 0, 7}));
  EXPECT_NE(run_error(make_node(Op::BitShift, 2, 1, {{"direction", attr_s("UP")}}), {&u, &s}).find("direction"),
            std::string::npos);
  Tensor f = random_tensor(DType::F32, {2});
  EXPECT_NE(run_error(make_node(Op::BitwiseAnd, 2), {&f, &f}).find("expected integer types"), std::string::npos);
}

TEST(Swish, MatchesXSigmoidAlphaX) {
  for (DType dt : float_dtypes()) {
    Tensor x = random_tensor(dt, {5, 7, 11});
    std::vector<Tensor> out = run(make_node(Op::Swish, 1, 1, {{"alpha", attr_f(0.5f)}}), {&x}, 24);
    expect_all_close(
        out[0], [&](int64_t i) { return x.get_f64(i) / (1 + std::exp(-0.5 * x.get_f64(i))); }, tolerance(dt), "Swish");
  }
}

TEST(CumProd, ExclusiveReverse) {
  Tensor x = random_tensor(DType::F64, {3, 5}, 0.5, 2);
  Tensor ax = Tensor::from_vector<int64_t>(DType::I64, {}, {1});
  for (int64_t excl : {0, 1})
    for (int64_t rev : {0, 1}) {
      std::vector<Tensor> out =
          run(make_node(Op::CumProd, 2, 1, {{"exclusive", attr_i(excl)}, {"reverse", attr_i(rev)}}), {&x, &ax}, 26);
      expect_all_close(
          out[0],
          [&](int64_t i) {
            const int64_t r = i / 5, c = i % 5;
            double p = 1;
            for (int64_t k = 0; k < 5; ++k)
              if (rev ? (excl ? k > c : k >= c) : (excl ? k < c : k <= c)) p *= x.get_f64(r * 5 + k);
            return p;
          },
          tolerance(DType::F64), "CumProd");
    }
  Tensor xi = Tensor::from_vector<int64_t>(DType::I32, {4}, {2, -3, 4, 5});
  Tensor a0 = Tensor::from_vector<int64_t>(DType::I32, {}, {0});
  EXPECT_EQ(run(make_node(Op::CumProd, 2), {&xi, &a0}, 26)[0].to_i64_vector(),
            (std::vector<int64_t>{2, -6, -24, -120}));
}

// Oracle: loss over [N, C, D] written directly from the spec's formulas.
double loss_oracle(const Tensor& x, const Tensor& t, const Tensor* w, bool softmax, const std::string& red,
                   int64_t ignore, int64_t index /* -1: reduced */) {
  const int64_t n = x.dim(0), c = x.dim(1), d = x.numel() / (n * c);
  double sum = 0, wsum = 0, at = 0;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < d; ++j) {
      const int64_t k = t.get_i64(i * d + j);
      double l = 0;
      if (k != ignore) {
        double lp = x.get_f64((i * c + k) * d + j);
        if (softmax) {
          double z = 0;
          for (int64_t q = 0; q < c; ++q) z += std::exp(x.get_f64((i * c + q) * d + j));
          lp -= std::log(z);
        }
        const double wk = w ? w->get_f64(k) : 1.0;
        l = -lp * wk;
        wsum += wk;
      }
      sum += l;
      if (i * d + j == index) at = l;
    }
  if (index >= 0) return at;
  return red == "sum" ? sum : sum / wsum;
}

TEST(Loss, NllAndSoftmaxCrossEntropy) {
  const Shape sx = {4, 5, 3, 2}, st = {4, 3, 2};
  for (bool softmax : {false, true})
    for (const std::string red : {"none", "sum", "mean"})
      for (bool weighted : {false, true})
        for (DType dt : {DType::F32, DType::F64, DType::F16}) {
          Tensor x = random_tensor(dt, sx, -3, 0);
          Tensor t = random_tensor(DType::I64, st, 0, 4.999);
          t.set_f64(3, 2);  // make sure the ignored class occurs
          Tensor w = random_tensor(dt, {5}, 0.5, 2);
          AttributeMap attrs = {{"reduction", attr_s(red)}, {"ignore_index", attr_i(2)}};
          const Op op = softmax ? Op::SoftmaxCrossEntropyLoss : Op::NegativeLogLikelihoodLoss;
          Node n = make_node(op, weighted ? 3 : 2, softmax ? 2 : 1, attrs);
          std::vector<const Tensor*> in = {&x, &t};
          if (weighted) in.push_back(&w);
          std::vector<Tensor> out = run(n, in, 13);
          ASSERT_EQ(out[0].shape(), red == "none" ? st : Shape{});
          expect_all_close(
              out[0],
              [&](int64_t i) {
                return loss_oracle(x, t, weighted ? &w : nullptr, softmax, red, 2, red == "none" ? i : -1);
              },
              dt == DType::F16 ? Tolerance{5e-3, 2e-3} : tolerance(dt),  // f16 inputs, sums of 24 terms
              fmt::format("{} {} {} w={}", op_name(op), red, dtype_name(dt), weighted));
          if (softmax) { ASSERT_EQ(out[1].shape(), sx); }
        }
  Tensor x = random_tensor(DType::F32, {2, 3});
  Tensor bad = Tensor::from_vector<int64_t>(DType::I64, {2}, {1, 3});
  EXPECT_NE(run_error(make_node(Op::NegativeLogLikelihoodLoss, 2), {&x, &bad}, 13).find("outside [0, 3)"),
            std::string::npos);
  Tensor wrong = Tensor::from_vector<int64_t>(DType::I64, {3}, {0, 1, 2});
  EXPECT_NE(run_error(make_node(Op::NegativeLogLikelihoodLoss, 2), {&x, &wrong}, 13).find("does not match"),
            std::string::npos);
}

}  // namespace
}  // namespace gpuopt

namespace gpuopt {
namespace {

using namespace gpuopt::testing;

// Oracle: Laplace expansion along the first row (a different algorithm from the kernel's LU).
double laplace(const std::vector<double>& a, int64_t m) {
  if (m == 1) return a[0];
  double det = 0;
  for (int64_t j = 0; j < m; ++j) {
    std::vector<double> minor;
    for (int64_t r = 1; r < m; ++r)
      for (int64_t c = 0; c < m; ++c)
        if (c != j) minor.push_back(a[r * m + c]);
    det += (j % 2 ? -1 : 1) * a[j] * laplace(minor, m - 1);
  }
  return det;
}

TEST(Det, BatchedAgainstLaplace) {
  for (DType dt : {DType::F32, DType::F64})
    for (int64_t m : {1, 2, 3, 5}) {
      Tensor x = random_tensor(dt, {2, 3, m, m}, -2, 2);
      std::vector<Tensor> out = run(make_node(Op::Det, 1), {&x}, 11);
      ASSERT_EQ(out[0].shape(), (Shape{2, 3}));
      expect_all_close(
          out[0],
          [&](int64_t b) {
            std::vector<double> a;
            for (int64_t i = 0; i < m * m; ++i) a.push_back(x.get_f64(b * m * m + i));
            return laplace(a, m);
          },
          tolerance(dt), fmt::format("Det {} m={}", dtype_name(dt), m));
    }
  Tensor singular = Tensor::from_vector<double>(DType::F32, {2, 2}, {1, 2, 2, 4});
  EXPECT_EQ(run(make_node(Op::Det, 1), {&singular}, 11)[0].get_f64(0), 0.0);
  Tensor rect = random_tensor(DType::F32, {2, 3});
  EXPECT_NE(run_error(make_node(Op::Det, 1), {&rect}, 11).find("square"), std::string::npos);
}

}  // namespace
}  // namespace gpuopt
