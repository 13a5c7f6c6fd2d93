// Normalisations against formulas evaluated directly per element with one-pass (E[x^2]-E[x]^2,
// long double) statistics, a different route from the kernels' two-pass variance.
#include "nn_test_util.h"

namespace gpuopt {
namespace {

using namespace testing_nn;

// Mean and variance of the elements of x whose flat index i satisfies group(i) == g.
template <typename F>
void stats(const std::vector<double>& x, F&& in_group, long double* mean, long double* var) {
  long double s = 0, q = 0, n = 0;
  for (size_t i = 0; i < x.size(); ++i)
    if (in_group(i)) s += x[i], q += static_cast<long double>(x[i]) * x[i], n += 1;
  *mean = s / n;
  *var = q / n - *mean * *mean;
}

void check_bn(DType dt, Shape xs) {
  const int64_t C = xs[1];
  const Tensor x = random_tensor(dt, xs), s = random_tensor(dt, {C}), b = random_tensor(dt, {C});
  const Tensor m = random_tensor(dt, {C}), v = random_tensor(dt, {C}, 0.5, 2.0);
  AttributeMap a;
  a["epsilon"] = attr_f(1e-3f);
  auto r = run(make_node(Op::BatchNormalization, 5, 1, a), {&x, &s, &b, &m, &v}, 15);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const int64_t S = shape_numel(xs) / (xs[0] * C);
  std::vector<double> want;
  for (int64_t i = 0; i < x.numel(); ++i) {
    const int64_t c = (i / S) % C;
    want.push_back((x.get_f64(i) - m.get_f64(c)) / std::sqrt(v.get_f64(c) + static_cast<double>(1e-3f)) * s.get_f64(c) +
                   b.get_f64(c));
  }
  expect_close((*r)[0], want, xs, "BatchNormalization");
}

TEST(BatchNormalization, Inference) {
  check_bn(DType::F32, {2, 3, 5, 8});
  check_bn(DType::F32, {4, 7});
  check_bn(DType::F16, {1, 16, 3, 3});
  check_bn(DType::BF16, {3, 5, 2, 2, 2});
}

TEST(BatchNormalization, TrainingModeOutputs) {
  const Shape xs = {3, 4, 5};
  const Tensor x = random_tensor(DType::F32, xs), s = random_tensor(DType::F32, {4}),
               b = random_tensor(DType::F32, {4});
  const Tensor m = random_tensor(DType::F32, {4}), v = random_tensor(DType::F32, {4}, 0.5, 2.0);
  AttributeMap a;
  a["training_mode"] = attr_i(1);
  a["momentum"] = attr_f(0.8f);
  auto r = run(make_node(Op::BatchNormalization, 5, 3, a), {&x, &s, &b, &m, &v}, 15);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const std::vector<double> xv = values(x);
  std::vector<double> y(xv.size()), rm, rv;
  for (int64_t c = 0; c < 4; ++c) {
    long double mean, var;
    stats(
        xv, [&](size_t i) { return static_cast<int64_t>(i / 5) % 4 == c; }, &mean, &var);
    for (size_t i = 0; i < xv.size(); ++i)
      if (static_cast<int64_t>(i / 5) % 4 == c)
        y[i] = static_cast<double>((xv[i] - mean) / std::sqrt(var + 1e-5L)) * s.get_f64(c) + b.get_f64(c);
    rm.push_back(m.get_f64(c) * 0.8 + static_cast<double>(mean) * 0.2);
    rv.push_back(v.get_f64(c) * 0.8 + static_cast<double>(var) * 0.2);
  }
  expect_close((*r)[0], y, xs, "BN training Y");
  expect_close((*r)[1], rm, {4}, "running_mean");
  expect_close((*r)[2], rv, {4}, "running_var");
}

TEST(BatchNormalization, Errors) {
  const Tensor x = random_tensor(DType::F32, {2, 3, 4}), p = random_tensor(DType::F32, {4}),
               p3 = random_tensor(DType::F32, {3});
  EXPECT_NE(
      error_of(make_node(Op::BatchNormalization, 5, 1), {&x, &p, &p3, &p3, &p3}).find("has 4 values for 3 channels"),
      std::string::npos);
  EXPECT_NE(error_of(make_node(Op::BatchNormalization, 5, 1), {&x, &p3, &p3, &p3}).find("required input 4"),
            std::string::npos);
}

TEST(InstanceNormalization, Basic) {
  for (const Shape& xs : {Shape{2, 3, 5, 7}, Shape{1, 8, 16}, Shape{3, 2, 2, 3, 4}}) {
    const int64_t C = xs[1];
    const Tensor x = random_tensor(DType::F32, xs), s = random_tensor(DType::F32, {C}),
                 b = random_tensor(DType::F32, {C});
    auto r = run(make_node(Op::InstanceNormalization, 3, 1), {&x, &s, &b});
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    const int64_t S = shape_numel(xs) / (xs[0] * C);
    const std::vector<double> xv = values(x);
    std::vector<double> want(xv.size());
    for (int64_t nc = 0; nc < xs[0] * C; ++nc) {
      long double mean, var;
      stats(
          xv, [&](size_t i) { return static_cast<int64_t>(i) / S == nc; }, &mean, &var);
      for (int64_t k = 0; k < S; ++k) {
        const size_t i = static_cast<size_t>(nc * S + k);
        want[i] = static_cast<double>((xv[i] - mean) / std::sqrt(var + 1e-5L)) * s.get_f64(nc % C) + b.get_f64(nc % C);
      }
    }
    expect_close((*r)[0], want, xs, "InstanceNormalization");
  }
  const Tensor x2 = random_tensor(DType::F32, {2, 3}), p = random_tensor(DType::F32, {3});
  EXPECT_NE(error_of(make_node(Op::InstanceNormalization, 3, 1), {&x2, &p, &p}).find("rank 2 is below 3"),
            std::string::npos);
}

void check_group_norm(Shape xs, int64_t G, bool per_channel, int opset) {
  const int64_t C = xs[1], P = per_channel ? C : G;
  const Tensor x = random_tensor(DType::F32, xs), s = random_tensor(DType::F32, {P}),
               b = random_tensor(DType::F32, {P});
  AttributeMap a;
  a["num_groups"] = attr_i(G);
  a["epsilon"] = attr_f(1e-4f);
  auto r = run(make_node(Op::GroupNormalization, 3, 1, a), {&x, &s, &b}, opset);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const int64_t S = shape_numel(xs) / (xs[0] * C), Cg = C / G;
  const std::vector<double> xv = values(x);
  std::vector<double> want(xv.size());
  for (int64_t n = 0; n < xs[0]; ++n)
    for (int64_t g = 0; g < G; ++g) {
      auto in_group = [&](size_t i) { return static_cast<int64_t>(i) / (Cg * S) == n * G + g; };
      long double mean, var;
      stats(xv, in_group, &mean, &var);
      for (size_t i = 0; i < xv.size(); ++i)
        if (in_group(i)) {
          const int64_t c = (static_cast<int64_t>(i) / S) % C;
          const int64_t p = per_channel ? c : g;
          want[i] =
              static_cast<double>((xv[i] - mean) / std::sqrt(var + static_cast<long double>(1e-4f))) * s.get_f64(p) +
              b.get_f64(p);
        }
    }
  expect_close((*r)[0], want, xs, "GroupNormalization");
}

TEST(GroupNormalization, PerChannelAndPerGroup) {
  check_group_norm({2, 6, 5, 3}, 3, true, 21);
  check_group_norm({1, 8, 16}, 2, false, 18);
  check_group_norm({3, 4, 7, 1}, 4, true, 21);
  const Tensor x = random_tensor(DType::F32, {1, 6, 4}), p = random_tensor(DType::F32, {6});
  AttributeMap a;
  a["num_groups"] = attr_i(4);
  EXPECT_NE(
      error_of(make_node(Op::GroupNormalization, 3, 1, a), {&x, &p, &p}, 21).find("not divisible by num_groups 4"),
      std::string::npos);
  EXPECT_NE(error_of(make_node(Op::GroupNormalization, 3, 1), {&x, &p, &p}, 21).find("num_groups"), std::string::npos);
}

void check_layer_norm(DType dt, Shape xs, int64_t axis, bool with_bias, Shape scale_shape) {
  const Tensor x = random_tensor(dt, xs), s = random_tensor(dt, scale_shape), b = random_tensor(dt, scale_shape);
  AttributeMap a;
  a["axis"] = attr_i(axis);
  auto r = run(make_node(Op::LayerNormalization, with_bias ? 3 : 2, 3, a),
               with_bias ? std::vector<const Tensor*>{&x, &s, &b} : std::vector<const Tensor*>{&x, &s});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const int64_t a0 = axis < 0 ? axis + static_cast<int64_t>(xs.size()) : axis;
  int64_t inner = 1;
  for (size_t d = static_cast<size_t>(a0); d < xs.size(); ++d) inner *= xs[d];
  const int64_t outer = shape_numel(xs) / inner, sn = shape_numel(scale_shape);
  const std::vector<double> xv = values(x);
  std::vector<double> want(xv.size()), means, invs;
  for (int64_t o = 0; o < outer; ++o) {
    long double mean, var;
    stats(
        xv, [&](size_t i) { return static_cast<int64_t>(i) / inner == o; }, &mean, &var);
    means.push_back(static_cast<double>(mean));
    invs.push_back(static_cast<double>(1 / std::sqrt(var + 1e-5L)));
    for (int64_t k = 0; k < inner; ++k) {
      const size_t i = static_cast<size_t>(o * inner + k);
      // scale shapes used here are right-aligned suffixes of X, so index = flat % numel(scale)
      const int64_t p = static_cast<int64_t>(i) % sn;
      want[i] = static_cast<double>((xv[i] - mean) / std::sqrt(var + 1e-5L)) * s.get_f64(p) +
                (with_bias ? b.get_f64(p) : 0.0);
    }
  }
  Shape stat_shape = xs;
  for (size_t d = static_cast<size_t>(a0); d < xs.size(); ++d) stat_shape[d] = 1;
  expect_close((*r)[0], want, xs, "LayerNormalization Y");
  EXPECT_EQ((*r)[1].dtype(), DType::F32);
  double at, rt;
  tolerance(DType::F32, &at, &rt);
  expect_close((*r)[1], means, stat_shape, "LayerNormalization Mean");
  expect_close((*r)[2], invs, stat_shape, "LayerNormalization InvStdDev");
}

TEST(LayerNormalization, AxesAndDtypes) {
  check_layer_norm(DType::F32, {2, 5, 64}, -1, true, {64});
  check_layer_norm(DType::F32, {3, 4, 7}, 1, false, {4, 7});
  check_layer_norm(DType::F32, {3, 4, 7}, 0, true, {3, 4, 7});
  check_layer_norm(DType::F32, {2, 3, 5, 9}, -2, true, {5, 9});
  check_layer_norm(DType::F16, {4, 33}, -1, true, {33});
  check_layer_norm(DType::BF16, {2, 128}, 1, true, {128});
}

TEST(LayerNormalization, Errors) {
  const Tensor x = random_tensor(DType::F32, {2, 8}), s = random_tensor(DType::F32, {7});
  EXPECT_NE(error_of(make_node(Op::LayerNormalization, 2, 1), {&x, &s}).find("does not broadcast to X [2,8]"),
            std::string::npos);
  AttributeMap a;
  a["axis"] = attr_i(2);
  const Tensor s8 = random_tensor(DType::F32, {8});
  EXPECT_NE(error_of(make_node(Op::LayerNormalization, 2, 1, a), {&x, &s8}).find("axis 2 is out of range"),
            std::string::npos);
}

}  // namespace
}  // namespace gpuopt
