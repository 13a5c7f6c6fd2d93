// Helpers shared by the CUDA session tests: attribute constructors, seeded random tensors, and
// the element-by-element comparison of a CUDA session's outputs with the CPU reference's.
#pragma once

#include "gpuopt/session.h"
#include "ir/graph.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

namespace gpuopt::testing {

inline Attribute ints_attr(std::vector<int64_t> v) {
  Attribute a;
  a.kind = Attribute::Kind::kInts;
  a.ints = std::move(v);
  return a;
}
inline Attribute int_attr(int64_t v) {
  Attribute a;
  a.kind = Attribute::Kind::kInt;
  a.i = v;
  return a;
}
inline Attribute float_attr(float v) {
  Attribute a;
  a.kind = Attribute::Kind::kFloat;
  a.f = v;
  return a;
}
inline Attribute str_attr(const char* v) {
  Attribute a;
  a.kind = Attribute::Kind::kString;
  a.s = v;
  return a;
}

// Normal(0, scale) values of dtype `dt` (any numeric dtype; rounded by set_f64).
inline Tensor random_tensor(DType dt, Shape shape, std::mt19937& rng, float scale = 1.0f) {
  Tensor t = Tensor::empty(dt, std::move(shape));
  std::normal_distribution<float> n(0.f, scale);
  for (int64_t i = 0; i < t.numel(); ++i) t.set_f64(i, n(rng));
  return t;
}
inline Tensor randn(Shape shape, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  return random_tensor(DType::F32, std::move(shape), rng, scale);
}

// Every output equal in dtype and shape; integers exactly, floats within rel_tol * (1 + |want|).
inline void expect_outputs_match(const NamedTensors& got, const NamedTensors& want, double rel_tol) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t o = 0; o < want.size(); ++o) {
    const Tensor &w = want[o].second, &t = got[o].second;
    SCOPED_TRACE(want[o].first);
    ASSERT_EQ(t.dtype(), w.dtype());
    ASSERT_EQ(t.shape(), w.shape());
    ASSERT_GT(w.numel(), 0);
    for (int64_t i = 0; i < w.numel(); ++i) {
      if (w.dtype() == DType::I64 || w.dtype() == DType::I32) {
        ASSERT_EQ(t.get_i64(i), w.get_i64(i)) << "element " << i;
      } else {
        ASSERT_NEAR(t.get_f64(i), w.get_f64(i), rel_tol * (1 + std::fabs(w.get_f64(i)))) << "element " << i;
      }
    }
  }
}

}  // namespace gpuopt::testing
