// Helpers of the pass tests: small CNN graphs (NCHW, f32, random constant weights, symbolic
// batch) shaped like ResNet, MobileNetV2 and EfficientNet (also used by tests/cuda/), and
// the CPU-reference comparison of a rewritten graph with the original.
//
//   Graph g = test::mini_resnet(/*c=*/16, /*hw=*/32);
//   test::expect_same_outputs(original, rewritten, x, 1e-6);
#pragma once

#include "backends/backend.h"
#include "ir/graph.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

namespace gpuopt::test {

inline Tensor random_tensor(Shape shape, std::mt19937& rng, float lo, float hi, DType dt = DType::F32) {
  Tensor t = Tensor::empty(dt, std::move(shape));
  std::uniform_real_distribution<float> u(lo, hi);
  for (int64_t i = 0; i < t.numel(); ++i) t.set_f64(i, u(rng));
  return t;
}

inline Attribute ints(std::vector<int64_t> v) {
  Attribute a;
  a.kind = Attribute::Kind::kInts;
  a.ints = std::move(v);
  return a;
}

inline AttributeMap conv_attrs(int64_t k, int64_t pad, int64_t stride, int64_t group = 1) {
  AttributeMap a{
      {"kernel_shape", ints({k, k})}, {"pads", ints({pad, pad, pad, pad})}, {"strides", ints({stride, stride})}};
  a["group"].kind = Attribute::Kind::kInt;
  a["group"].i = group;
  return a;
}

// Builds graphs with random constant weights.
struct Builder {
  Graph g;
  std::mt19937 rng{7};
  int next = 0;

  ValueId conv(ValueId x, int64_t cin, int64_t cout, int64_t k, int64_t pad, int64_t stride, int64_t group = 1,
               bool bias = true) {
    const std::string n = "conv" + std::to_string(next++);
    const float r = 1.0f / std::sqrt(static_cast<float>(cin / group * k * k));
    std::vector<ValueId> in{x, g.add_constant(n + ".w", random_tensor({cout, cin / group, k, k}, rng, -r, r))};
    if (bias) in.push_back(g.add_constant(n + ".b", random_tensor({cout}, rng, -0.2f, 0.2f)));
    return g.add_node(Op::Conv, n, in, 1, conv_attrs(k, pad, stride, group))[0];
  }
  ValueId op(Op o, std::vector<ValueId> in, AttributeMap a = {}) {
    return g.add_node(o, std::string(op_name(o)) + std::to_string(next++), std::move(in), 1, std::move(a))[0];
  }
  ValueId relu(ValueId x) { return op(Op::Relu, {x}); }
  ValueId relu6(ValueId x) {
    Tensor lo = Tensor::empty(DType::F32, {}), hi = Tensor::empty(DType::F32, {});
    lo.set_f64(0, 0.0);
    hi.set_f64(0, 6.0);
    return op(Op::Clip,
              {x, g.add_constant("lo" + std::to_string(next), lo), g.add_constant("hi" + std::to_string(next), hi)});
  }
  // GlobalAveragePool -> Flatten -> Gemm: the classifier head (NCHW consumers after the region).
  ValueId head(ValueId x, int64_t c, int64_t classes) {
    ValueId p = op(Op::GlobalAveragePool, {x});
    AttributeMap fa;
    fa["axis"].kind = Attribute::Kind::kInt;
    fa["axis"].i = 1;
    ValueId f = op(Op::Flatten, {p}, fa);
    AttributeMap ga;
    ga["transB"].kind = Attribute::Kind::kInt;
    ga["transB"].i = 1;
    return op(Op::Gemm,
              {f, g.add_constant("fc.w", random_tensor({classes, c}, rng, -0.3f, 0.3f)),
               g.add_constant("fc.b", random_tensor({classes}, rng, -0.1f, 0.1f))},
              ga);
  }
  void output(ValueId v) { g.mark_output(v); }
  Graph done() {
    EXPECT_TRUE(g.topo_sort().ok());
    EXPECT_TRUE(g.infer_shapes().ok());
    return g;
  }
};

// Stem conv (C=3, k5 s2), max pool, a basic block, a downsampling block with a 1x1 shortcut,
// the head; c channels after the stem, 2c after the downsampling, input [N, 3, hw, hw].
inline Graph mini_resnet(int64_t c = 8, int64_t hw = 20) {
  Builder b;
  ValueId x = b.g.add_input("x", DType::F32, {kFirstSymbolDim, 3, hw, hw});
  ValueId s = b.relu(b.conv(x, 3, c, 5, 2, 2));
  AttributeMap mp{{"kernel_shape", ints({3, 3})}, {"pads", ints({1, 1, 1, 1})}, {"strides", ints({2, 2})}};
  s = b.op(Op::MaxPool, {s}, mp);
  ValueId r = b.conv(b.relu(b.conv(s, c, c, 3, 1, 1)), c, c, 3, 1, 1, 1, false);
  s = b.relu(b.op(Op::Add, {r, s}));
  ValueId d = b.conv(b.relu(b.conv(s, c, 2 * c, 3, 1, 2)), 2 * c, 2 * c, 3, 1, 1);
  s = b.relu(b.op(Op::Add, {b.conv(s, c, 2 * c, 1, 0, 2), d}));
  b.output(b.head(s, 2 * c, 5));
  return b.done();
}

// MobileNetV2 blocks: Relu6 (Clip), depthwise 3x3 convs, a linear 1x1 projection with a
// residual, an expansion to 3c; input [N, 3, hw, hw].
inline Graph mini_mobilenet(int64_t c = 8, int64_t hw = 16) {
  Builder b;
  ValueId x = b.g.add_input("x", DType::F32, {kFirstSymbolDim, 3, hw, hw});
  ValueId s = b.relu6(b.conv(x, 3, c, 3, 1, 2));
  ValueId t = b.conv(b.relu6(b.conv(s, c, c, 3, 1, 1, c)), c, c, 1, 0, 1);  // depthwise, project
  s = b.op(Op::Add, {s, t});
  s = b.relu6(b.conv(s, c, 3 * c, 1, 0, 1));             // expand
  s = b.relu6(b.conv(s, 3 * c, 3 * c, 3, 1, 2, 3 * c));  // depthwise stride 2
  s = b.conv(s, 3 * c, 2 * c, 1, 0, 1);
  b.output(b.head(s, 2 * c, 4));
  return b.done();
}

// EfficientNet blocks: SiLU written as x * Sigmoid(x), MBConv with a depthwise 3x3 (stride 1) and
// a depthwise 5x5 (stride 2), each followed by squeeze-excitation (GlobalAveragePool, 1x1 convs,
// Sigmoid gate times the depthwise output), a linear 1x1 projection, a residual; input
// [N, 3, hw, hw], c channels after the stem.
inline Graph mini_efficientnet(int64_t c = 16, int64_t hw = 24) {
  Builder b;
  auto silu = [&](ValueId v) { return b.op(Op::Mul, {v, b.op(Op::Sigmoid, {v})}); };
  auto se = [&](ValueId d, int64_t ch) {
    ValueId m = b.op(Op::GlobalAveragePool, {d});
    ValueId gate = b.op(Op::Sigmoid, {b.conv(silu(b.conv(m, ch, ch / 4, 1, 0, 1)), ch / 4, ch, 1, 0, 1)});
    return b.op(Op::Mul, {d, gate});
  };
  ValueId x = b.g.add_input("x", DType::F32, {kFirstSymbolDim, 3, hw, hw});
  ValueId s = silu(b.conv(x, 3, c, 3, 1, 2));
  ValueId t = b.conv(se(silu(b.conv(s, c, c, 3, 1, 1, c)), c), c, c, 1, 0, 1);  // depthwise 3x3, SE, project
  s = b.op(Op::Add, {s, t});
  s = silu(b.conv(s, c, 4 * c, 1, 0, 1));                                    // expand
  s = b.conv(se(silu(b.conv(s, 4 * c, 4 * c, 5, 2, 2, 4 * c)), 4 * c), 4 * c, 2 * c, 1, 0, 1);  // 5x5 s2
  b.output(b.head(s, 2 * c, 4));
  return b.done();
}

inline std::vector<Tensor> run_cpu(const Graph& g, const std::vector<Tensor>& inputs) {
  auto cpu = make_cpu_backend();
  auto e = cpu->compile(g, {});
  EXPECT_TRUE(e.ok()) << e.status().to_string();
  if (!e.ok()) return {};
  auto out = (*e)->run(inputs, {});
  EXPECT_TRUE(out.ok()) << out.status().to_string();
  return out.ok() ? *out : std::vector<Tensor>{};
}

// Runs both graphs on the same input and compares every output: equal shapes, max |diff| <=
// tol * max(1, max|ref|), and a reference that is not trivially small.
inline void expect_same_outputs(const Graph& ref, const Graph& got_g, const Tensor& x, double tol) {
  const std::vector<Tensor> want = run_cpu(ref, {x});
  const std::vector<Tensor> got = run_cpu(got_g, {x});
  ASSERT_EQ(got.size(), want.size());
  for (size_t o = 0; o < want.size(); ++o) {
    ASSERT_EQ(got[o].shape(), want[o].shape()) << "output " << o;
    double max_err = 0, max_ref = 0;
    for (int64_t i = 0; i < want[o].numel(); ++i) {
      max_err = std::max(max_err, std::abs(got[o].get_f64(i) - want[o].get_f64(i)));
      max_ref = std::max(max_ref, std::abs(want[o].get_f64(i)));
    }
    EXPECT_GT(max_ref, 0.1) << "output " << o;
    EXPECT_LE(max_err, tol * std::max(1.0, max_ref)) << "output " << o;
  }
}

}  // namespace gpuopt::test
