// Test helpers for the NN op family: random tensors, one-node evaluation, tolerance checks.
#pragma once

#include "ir/eval.h"

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

inline Attribute attr_i(int64_t v) { return int_attr(v); }
inline Attribute attr_f(float v) { return float_attr(v); }
inline Attribute attr_s(std::string v) { return string_attr(std::move(v)); }
inline Attribute attr_ints(std::vector<int64_t> v) { return ints_attr(std::move(v)); }

inline Node make_node(Op op, size_t num_inputs, size_t num_outputs, AttributeMap attrs = {}, std::string name = "n1") {
  Node n;
  n.op = op;
  n.name = std::move(name);
  for (size_t i = 0; i < num_inputs; ++i) n.inputs.push_back(static_cast<ValueId>(i));
  for (size_t i = 0; i < num_outputs; ++i) n.outputs.push_back(static_cast<ValueId>(num_inputs + i));
  n.attrs = std::move(attrs);
  return n;
}

inline Result<std::vector<Tensor>> run(const Node& n, const std::vector<const Tensor*>& in, int opset = 17) {
  return eval_node(n, in, opset);
}

// Tolerance by dtype (CONVENTIONS.md, from ONNX Runtime).
inline void tolerance(DType dt, double* abs_tol, double* rel_tol) {
  switch (dt) {
    case DType::F16:
      *abs_tol = 2.5e-3;
      *rel_tol = 1e-3;
      break;
    case DType::BF16:
      *abs_tol = 2e-2;
      *rel_tol = 1e-2;
      break;
    case DType::F64:
      *abs_tol = 1e-10;
      *rel_tol = 1e-10;
      break;
    case DType::F32:
      *abs_tol = 1e-5;
      *rel_tol = 1e-4;
      break;
    default:
      *abs_tol = 0;
      *rel_tol = 0;
      break;  // integers: exact
  }
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

}  // namespace gpuopt::testing_nn
