// Helpers for the math-op tests: build a one-node graph, fresh random inputs (never all zeros),
// run it through eval_node, and compare with a double-precision oracle at the dtype's tolerance.
#pragma once

#include "core/dispatch.h"
#include "ir/eval.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace gpuopt::testing {

inline std::mt19937_64& rng() {
  static std::mt19937_64 r(std::random_device{}());
  return r;
}

inline Node make_node(Op op, size_t n_in, size_t n_out = 1, AttributeMap attrs = {}, std::string name = "n0") {
  Node n;
  n.op = op;
  n.name = std::move(name);
  for (size_t i = 0; i < n_in; ++i) n.inputs.push_back(static_cast<ValueId>(i));
  for (size_t i = 0; i < n_out; ++i) n.outputs.push_back(static_cast<ValueId>(n_in + i));
  n.attrs = std::move(attrs);
  return n;
}

inline Attribute attr_i(int64_t v) { return int_attr(v); }
inline Attribute attr_f(float v) { return float_attr(v); }
inline Attribute attr_s(std::string v) { return string_attr(std::move(v)); }
inline Attribute attr_ints(std::vector<int64_t> v) { return ints_attr(std::move(v)); }

// Uniform random values in [lo, hi]; integer dtypes get integers; bool a fair coin.
inline Tensor random_tensor(DType dt, const Shape& shape, double lo = -3.0, double hi = 3.0) {
  Tensor t = Tensor::empty(dt, shape);
  std::uniform_real_distribution<double> u(lo, hi);
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (dt == DType::Bool)
      t.data<bool>()[i] = (rng()() & 1) != 0;
    else if (dtype_is_integer(dt))
      t.set_f64(i, std::floor(u(rng())));
    else
      t.set_f64(i, u(rng()));
  }
  return t;
}

struct Tolerance {
  double abs, rel;
};
// ONNX Runtime's tolerances by dtype (CONVENTIONS.md); integers and bool are exact.
inline Tolerance tolerance(DType dt) {
  switch (dt) {
    case DType::F32:
      return {1e-5, 1e-4};
    case DType::F64:
      return {1e-12, 1e-12};
    case DType::F16:
      return {2.5e-3, 1e-3};
    case DType::BF16:
      return {2e-2, 1e-2};
    default:
      return {0, 0};
  }
}

// True when got matches want: NaN with NaN, Inf with Inf of the same sign, else within tolerance.
inline bool close(double got, double want, Tolerance tol) {
  if (std::isnan(want)) return std::isnan(got);
  if (std::isinf(want)) return got == want;
  return std::fabs(got - want) <= tol.abs + tol.rel * std::fabs(want);
}

// Runs the node and returns its outputs; fails the test on an error.
inline std::vector<Tensor> run(const Node& n, const std::vector<const Tensor*>& in, int opset = 17) {
  Result<std::vector<Tensor>> r = eval_node(n, in, opset);
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  if (!r.ok()) return {};
  return std::move(r).value();
}

// Runs the node and returns the error message (empty when it succeeded).
inline std::string run_error(const Node& n, const std::vector<const Tensor*>& in, int opset = 17) {
  Result<std::vector<Tensor>> r = eval_node(n, in, opset);
  return r.ok() ? std::string() : r.status().message();
}

// Compares every element of `got` with want(i) (already in double).
inline void expect_all_close(const Tensor& got, const std::function<double(int64_t)>& want, Tolerance tol,
                             const std::string& what) {
  int failures = 0;
  for (int64_t i = 0; i < got.numel() && failures < 5; ++i) {
    const double g = got.get_f64(i), w = want(i);
    if (!close(g, w, tol)) {
      ADD_FAILURE() << what << " element " << i << ": got " << g << ", want " << w;
      ++failures;
    }
  }
}

// Linear index of the input element that output element `linear` of shape `out` reads under
// numpy broadcasting (written without the library's iterator: unravel + modulo).
inline int64_t bcast_index(const Shape& in, const Shape& out, int64_t linear) {
  std::vector<int64_t> coord(out.size());
  for (size_t d = out.size(); d-- > 0;) {
    coord[d] = linear % out[d];
    linear /= out[d];
  }
  int64_t off = 0;
  const size_t lead = out.size() - in.size();
  for (size_t d = 0; d < in.size(); ++d) off = off * in[d] + (in[d] == 1 ? 0 : coord[lead + d]);
  return off;
}

inline const std::vector<Shape>& test_shapes() {
  static const std::vector<Shape> kShapes = {{128, 2, 2, 2}, {5, 7, 11, 13}, {3, 1, 17}, {64}, {}, {0, 3}};
  return kShapes;
}

inline const std::vector<DType>& float_dtypes() {
  static const std::vector<DType> kTypes = {DType::F32, DType::F16, DType::BF16, DType::F64};
  return kTypes;
}

}  // namespace gpuopt::testing
