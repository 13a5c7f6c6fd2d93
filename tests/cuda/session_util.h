// Helpers shared by the CUDA session tests: attribute constructors, seeded random tensors, and
// the element-by-element comparison of a CUDA session's outputs with the CPU reference's.
#pragma once

#include "cuda_test_util.h"
#include "gpuopt/session.h"
#include "ir/graph.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

namespace gpuopt::testing {

using ::gpuopt::ints_attr;
using ::gpuopt::int_attr;
using ::gpuopt::float_attr;
inline Attribute str_attr(const char* v) { return string_attr(v); }

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

// x [n,3,3] -> Relu -> Det -> Mul by 2 -> y: Det has no CUDA kernel, so a CUDA session runs it
// on the CPU between two GPU nodes, reading the Relu's device output on the host.
inline Graph relu_det_double(int64_t n) {
  Graph g;
  g.opset = 17;
  ValueId x = g.add_input("x", DType::F32, {n, 3, 3});
  ValueId two = g.add_constant("two", Tensor::scalar_f32(2.0f));
  ValueId r = g.add_node(Op::Relu, "relu", {x}, 1)[0];
  ValueId d = g.add_node(Op::Det, "det", {r}, 1)[0];
  ValueId y = g.add_node(Op::Mul, "double", {d, two}, 1, {}, {"y"})[0];
  g.mark_output(y);
  return g;
}

// ||got - ref|| / ||ref|| over all elements (the reduced-precision accuracy measure).
inline double rel_l2(const Tensor& got, const Tensor& ref) {
  double num = 0, den = 0;
  for (int64_t i = 0; i < ref.numel(); ++i) {
    const double d = got.get_f64(i) - ref.get_f64(i);
    num += d * d;
    den += ref.get_f64(i) * ref.get_f64(i);
  }
  return std::sqrt(num / std::max(den, 1e-30));
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

// Runs `g` on the CPU reference (checked without a GPU too), then, when there is a device, on
// CUDA, and compares every output with expect_outputs_match.
inline void expect_cuda_matches_cpu(const Graph& g, const NamedTensors& in, double rel_tol) {
  SessionOptions oc, og;
  oc.device = "cpu";
  og.device = "cuda";
  auto cpu = Session::from_graph(g, oc);
  ASSERT_TRUE(cpu.ok()) << cpu.status().to_string();
  auto want = (*cpu)->run(in);
  ASSERT_TRUE(want.ok()) << want.status().to_string();
  if (!have_cuda_device()) GTEST_SKIP() << "skipped: no CUDA device";
  auto gpu = Session::from_graph(g, og);
  ASSERT_TRUE(gpu.ok()) << gpu.status().to_string();
  auto got = (*gpu)->run(in);
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  expect_outputs_match(*got, *want, rel_tol);
}

}  // namespace gpuopt::testing
