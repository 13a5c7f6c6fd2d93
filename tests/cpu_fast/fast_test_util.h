// What the fast CPU backend's op tests share: one-node graphs, random f32 inputs, and the check
// of the fast backend (`cpu`) against the reference (`cpu-ref`, the oracle) at 1 thread and at the
// whole pool.
//
// Tolerance: |fast - ref| <= 1e-4 x max(1, max |ref|). The fast kernels sum in f32 (the reference
// in double, rounded once): sums of up to ~600 products here (f32 worst case K x 2^-24 = 4e-5 of
// the sum of |terms|, typically far less), and exp/erf/tanh polynomials within a few f32 ulp.
#pragma once

#include "backends/cpu_fast/cpu_fast.h"
#include "backends/cpu_fast/fast_kernel.h"
#include "core/thread_pool.h"
#include "ir/graph.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <random>
#include <string>

namespace gpuopt::fast_test {



constexpr double kTol = 1e-4;

inline std::mt19937& rng() {
  static std::mt19937 r(std::random_device{}());
  return r;
}

inline Tensor rand_f32(Shape s, float lo = -1, float hi = 1) {
  Tensor t = Tensor::empty(DType::F32, std::move(s));
  std::uniform_real_distribution<float> u(lo, hi);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = u(rng());
  return t;
}

// A one-node graph: `inputs` become graph inputs (data) or constants (weights), outputs are all
// the node's `outs` outputs.
struct OneNode {
  Graph g;
  std::vector<Tensor> feeds;
};

struct In {
  Tensor t;
  bool constant = false;
  bool absent = false;
};

inline OneNode one_node(Op op, const std::vector<In>& ins, AttributeMap attrs = {}, size_t outs = 1, int opset = 23,
                 std::vector<bool> want = {}) {
  OneNode o;
  o.g.opset = opset;
  std::vector<ValueId> ids;
  for (size_t i = 0; i < ins.size(); ++i) {
    const std::string name = "in" + std::to_string(i);
    if (ins[i].absent) {
      ids.push_back(kNoValue);
    } else if (ins[i].constant) {
      ids.push_back(o.g.add_constant(name, ins[i].t));
    } else {
      ids.push_back(o.g.add_input(name, ins[i].t.dtype(), ins[i].t.shape()));
      o.feeds.push_back(ins[i].t);
    }
  }
  std::vector<ValueId> y = o.g.add_node(op, "n0", ids, outs, std::move(attrs));
  for (size_t i = 0; i < y.size(); ++i) {
    if (!want.empty() && !want[i]) {
      o.g.nodes()[0].outputs[i] = kNoValue;
      continue;
    }
    o.g.mark_output(y[i]);
  }
  EXPECT_TRUE(o.g.topo_sort().ok());
  const Status st = o.g.infer_shapes();
  EXPECT_TRUE(st.ok()) << st.to_string();
  return o;
}

inline std::vector<Tensor> run(Backend& b, const OneNode& o) {
  auto e = b.compile(o.g, {});
  EXPECT_TRUE(e.ok()) << e.status().to_string();
  if (!e.ok()) return {};
  auto out = (*e)->run(o.feeds, {});
  EXPECT_TRUE(out.ok()) << out.status().to_string();
  return out.ok() ? *out : std::vector<Tensor>{};
}

// Fast (1 thread and the pool, or each of `thread_counts`) against the reference, every output;
// the fast kernel must run.
inline void check(const OneNode& o, double tol = kTol, std::vector<int> thread_counts = {}) {
  auto ref_backend = make_cpu_backend();
  const std::vector<Tensor> ref = run(*ref_backend, o);
  ASSERT_FALSE(ref.empty());
  if (thread_counts.empty()) thread_counts = {1, cpu_threads()};
  for (int threads : thread_counts) {
    auto fast = make_fast_cpu_backend(threads);
    ASSERT_EQ(fast->place(o.g)[0], NodePlace::kDevice) << "the fast backend does not claim this node";
    const uint64_t before = cpu_fast::fast_kernel_calls();
    const std::vector<Tensor> got = run(*fast, o);
    EXPECT_EQ(cpu_fast::fast_kernel_calls(), before + 1) << "the fast kernel handed the call to the reference";
    ASSERT_EQ(got.size(), ref.size());
    for (size_t k = 0; k < ref.size(); ++k) {
      ASSERT_EQ(got[k].shape(), ref[k].shape());
      double scale = 1, err = 0;
      int64_t worst = -1;
      for (int64_t i = 0; i < ref[k].numel(); ++i) {
        const double r = ref[k].get_f64(i), f = got[k].get_f64(i);
        if (std::isnan(r) || std::isnan(f)) {
          ASSERT_EQ(std::isnan(r), std::isnan(f)) << "output " << k << " at " << i << ": " << f << " vs " << r;
          continue;
        }
        scale = std::max(scale, std::abs(r));
        if (std::abs(f - r) > err) err = std::abs(f - r), worst = i;
      }
      EXPECT_LE(err / scale, tol) << "threads " << threads << ", output " << k << ": worst at " << worst << " ("
                                  << got[k].get_f64(worst) << " vs " << ref[k].get_f64(worst) << ")";
    }
  }
}

inline AttributeMap attrs(std::initializer_list<std::pair<const std::string, Attribute>> a) { return AttributeMap(a); }

inline Attribute floats_attr(std::vector<float> v) {
  Attribute a;
  a.kind = Attribute::Kind::kFloats;
  a.floats = std::move(v);
  return a;
}

}  // namespace gpuopt::fast_test
