// Helpers for the tensor-op tests: one-node graphs, attributes, random tensors, exact compare.
#pragma once

#include "core/dispatch.h"
#include "ir/eval.h"
#include "op_test.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

namespace gpuopt::tensor_test {

using op_test::rng;

using op_test::attr_f;
using op_test::attr_i;
using op_test::attr_ints;
using op_test::attr_s;
using op_test::attr_t;
using op_test::make_node;

inline Tensor ints(std::vector<int64_t> v) { return Tensor::from_vector(DType::I64, {static_cast<int64_t>(v.size())}, v); }

// Random values, never all zeros: floats in [-4, 4], integers in the dtype's small range.
inline Tensor random_tensor(DType dt, const Shape& shape) {
  Tensor t = Tensor::empty(dt, shape);
  std::uniform_real_distribution<double> u(-4.0, 4.0);
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (dt == DType::String) t.strings()[i] = "s" + std::to_string(rng()() % 1000);
    else if (dt == DType::Bool) t.data<bool>()[i] = (rng()() & 1) != 0;
    else if (dtype_is_integer(dt)) t.set_f64(i, static_cast<double>(rng()() % 100) + (dt == DType::U8 ? 0 : -50));
    else t.set_f64(i, u(rng()));
  }
  return t;
}

// Exact comparison of dtype, shape and every element (bytes; strings by value).
inline ::testing::AssertionResult same_tensor(const Tensor& got, const Tensor& want) {
  if (got.dtype() != want.dtype() || got.shape() != want.shape())
    return ::testing::AssertionFailure() << "got " << got.describe() << ", want " << want.describe();
  for (int64_t i = 0; i < want.numel(); ++i) {
    bool eq;
    if (want.dtype() == DType::String) eq = got.strings()[i] == want.strings()[i];
    else {
      const size_t es = dtype_size(want.dtype());
      eq = std::memcmp(static_cast<const char*>(got.raw()) + i * es, static_cast<const char*>(want.raw()) + i * es, es) == 0;
      if (!eq && dtype_is_float(want.dtype())) eq = std::isnan(got.get_f64(i)) && std::isnan(want.get_f64(i));
    }
    if (!eq)
      return ::testing::AssertionFailure() << "element " << i << " of " << want.describe() << ": got "
                                           << (want.dtype() == DType::String ? got.strings()[i] : std::to_string(got.get_f64(i)))
                                           << ", want "
                                           << (want.dtype() == DType::String ? want.strings()[i] : std::to_string(want.get_f64(i)));
  }
  return ::testing::AssertionSuccess();
}

inline Result<std::vector<Tensor>> run1(const Node& n, const std::vector<const Tensor*>& in, int opset = 17) {
  return eval_node(n, in, opset);
}

// Load-time inference with partial knowledge.
inline ValueInfo vi(DType dt, Shape s, const Tensor* value = nullptr) {
  ValueInfo v;
  v.dtype = dt;
  v.rank_known = true;
  v.shape = std::move(s);
  v.value = value;
  return v;
}
inline ValueInfo vi_unranked(DType dt) {
  ValueInfo v;
  v.dtype = dt;
  return v;
}

}  // namespace gpuopt::tensor_test
