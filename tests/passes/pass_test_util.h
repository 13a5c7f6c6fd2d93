// What the fusion-pass tests share: random tensors, op counts, running a graph on the CPU
// reference (the oracle: the unfused graph's kernels) and comparing two runs.
#pragma once

#include "backends/backend.h"
#include "ir/graph.h"
#include "passes/passes.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <random>

namespace gpuopt::testing {

inline Tensor uniform(Shape shape, std::mt19937& rng, float lo = -1, float hi = 1) {
  Tensor t = Tensor::empty(DType::F32, std::move(shape));
  std::uniform_real_distribution<float> u(lo, hi);
  for (int64_t i = 0; i < t.numel(); ++i) t.set_f64(i, u(rng));
  return t;
}

// The session pipeline at fp16 on `device` with GPUOPT_DISABLE_FUSION=`off` for this call only
// (nullptr: every fusion on).
inline Status session_passes(Graph* g, const char* device, const char* off = nullptr) {
  if (off) setenv("GPUOPT_DISABLE_FUSION", off, 1);
  const Status st = run_session_passes(g, device, "fp16", true);
  unsetenv("GPUOPT_DISABLE_FUSION");
  return st;
}

inline int count(const Graph& g, const std::string& op) {
  int c = 0;
  for (const Node& n : g.nodes()) c += n.op_type == op;
  return c;
}

inline std::vector<Tensor> run_cpu(const Graph& g, const std::vector<Tensor>& inputs) {
  auto e = make_cpu_backend()->compile(g, {});
  EXPECT_TRUE(e.ok()) << e.status().to_string();
  if (!e.ok()) return {};
  auto out = (*e)->run(inputs, {});
  EXPECT_TRUE(out.ok()) << out.status().to_string();
  return out.ok() ? *out : std::vector<Tensor>{};
}

inline void finish(Graph& g) {
  ASSERT_TRUE(g.topo_sort().ok());
  ASSERT_TRUE(g.infer_shapes().ok());
}

// Every output of `a` equal to `b`'s, value for value (exact rewrites: same bits as the oracle).
inline void expect_same_bits(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t o = 0; o < a.size(); ++o) {
    ASSERT_EQ(a[o].shape(), b[o].shape());
    for (int64_t i = 0; i < a[o].numel(); ++i) ASSERT_EQ(a[o].get_f64(i), b[o].get_f64(i)) << "output " << o << " at " << i;
  }
}

// Largest |a - b| over the first output, relative to max(1, max |b|); NaN where b has NaN must be
// NaN in a too (and counts as equal).
inline double max_rel_err(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  if (a.empty() || b.empty() || a[0].shape() != b[0].shape()) return INFINITY;
  double err = 0, scale = 1;
  for (int64_t i = 0; i < b[0].numel(); ++i) {
    const double x = a[0].get_f64(i), y = b[0].get_f64(i);
    if (std::isnan(y) || std::isnan(x)) {
      if (std::isnan(y) != std::isnan(x)) return INFINITY;
      continue;
    }
    err = std::max(err, std::abs(x - y));
    scale = std::max(scale, std::abs(y));
  }
  return err / scale;
}

}  // namespace gpuopt::testing
