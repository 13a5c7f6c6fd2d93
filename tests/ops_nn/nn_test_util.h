// Test helpers for the NN op family: random tensors, one-node evaluation, tolerance checks.
#pragma once

#include "ir/eval.h"
#include "op_test.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

namespace gpuopt::testing_nn {

inline std::mt19937& rng() {
  static std::mt19937 g(12345);
  return g;
}

// Fresh random values in [lo, hi) (never all zeros), stored in dtype.
inline Tensor random_tensor(DType dt, Shape shape, double lo = -1.0, double hi = 1.0) {
  Tensor t = Tensor::empty(dt, std::move(shape));
  std::uniform_real_distribution<double> u(lo, hi);
  for (int64_t i = 0; i < t.numel(); ++i) {
    double v = u(rng());
    if (dtype_is_integer(t.dtype())) v = std::floor(v);
    t.set_f64(i, v);
  }
  return t;
}

inline std::vector<double> values(const Tensor& t) {
  std::vector<double> v(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) v[static_cast<size_t>(i)] = t.get_f64(i);
  return v;
}

using op_test::attr_f;
using op_test::attr_i;
using op_test::attr_ints;
using op_test::attr_s;
using op_test::make_node;

inline Result<std::vector<Tensor>> run(const Node& n, const std::vector<const Tensor*>& in, int opset = 17) {
  return eval_node(n, in, opset);
}

// Tolerance by dtype (op_test::tolerance, ONNX Runtime's); f64 at 1e-10 for these kernels.
inline void tolerance(DType dt, double* abs_tol, double* rel_tol) {
  const op_test::Tolerance t = dt == DType::F64 ? op_test::Tolerance{1e-10, 1e-10} : op_test::tolerance(dt);
  *abs_tol = t.abs;
  *rel_tol = t.rel;
}

inline void expect_close(const Tensor& got, const std::vector<double>& want, const Shape& shape,
                         const std::string& what) {
  ASSERT_EQ(shape_to_string(got.shape()), shape_to_string(shape)) << what;
  ASSERT_EQ(static_cast<size_t>(got.numel()), want.size()) << what;
  double at, rt;
  tolerance(got.dtype(), &at, &rt);
  int bad = 0;
  for (int64_t i = 0; i < got.numel() && bad < 5; ++i) {
    const double g = got.get_f64(i), w = want[static_cast<size_t>(i)];
    if (std::isnan(w)) {
      if (!std::isnan(g)) ++bad, ADD_FAILURE() << what << " [" << i << "]: got " << g << ", want NaN";
      continue;
    }
    ASSERT_FALSE(std::isnan(g)) << what << " [" << i << "] is NaN";
    if (std::abs(g - w) > at + rt * std::abs(w)) {
      ++bad;
      ADD_FAILURE() << what << " [" << i << "]: got " << g << ", want " << w;
    }
  }
}

// The error message of a node evaluation that must fail; fails the test when it succeeds.
inline std::string error_of(const Node& n, const std::vector<const Tensor*>& in, int opset = 17) {
  auto r = eval_node(n, in, opset);
  if (r.ok()) {
    ADD_FAILURE() << "expected an error";
    return "";
  }
  return r.status().message();
}

// An f32 scalar tensor (a scale input).
inline Tensor scalar_f32(double v) {
  return Tensor::from_vector<double>(DType::F32, {}, {v});
}

// An NCHW tensor's values in NHWC order (the channels-last forms of a conv's inputs).
inline Tensor to_nhwc(const Tensor& t) {
  const Shape& s = t.shape();
  Tensor o = Tensor::empty(t.dtype(), {s[0], s[2], s[3], s[1]});
  for (int64_t n = 0; n < s[0]; ++n)
    for (int64_t c = 0; c < s[1]; ++c)
      for (int64_t h = 0; h < s[2]; ++h)
        for (int64_t w = 0; w < s[3]; ++w)
          o.set_f64(((n * s[2] + h) * s[3] + w) * s[1] + c, t.get_f64(((n * s[1] + c) * s[2] + h) * s[3] + w));
  return o;
}

}  // namespace gpuopt::testing_nn
