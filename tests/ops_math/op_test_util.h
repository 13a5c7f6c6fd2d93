// Helpers for the math-op tests: fresh random inputs (never all zeros), run through eval_node,
// compared with a double-precision oracle at the dtype's tolerance (the node, attributes and
// tolerances come from tests/op_test.h).
#pragma once

#include "core/dispatch.h"
#include "ir/eval.h"
#include "op_test.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace gpuopt::testing {

using op_test::rng;

using op_test::attr_f;
using op_test::attr_i;
using op_test::attr_ints;
using op_test::attr_s;
using op_test::make_node;

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

using op_test::close;
using op_test::Tolerance;
using op_test::tolerance;

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
