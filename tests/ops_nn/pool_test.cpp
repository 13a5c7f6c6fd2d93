// Pools against an oracle that materialises the padded input (NaN marks padding, as the ONNX
// reference does) and walks each window by explicit coordinates.
#include "nn_test_util.h"

#include <limits>

namespace gpuopt {
namespace {

using namespace testing_nn;

struct PoolCase {
  Shape xs;
  std::vector<int64_t> k, s, d, pb, pe;
  bool ceil = false;
};

int64_t out_extent(const PoolCase& c, size_t i) {
  const int64_t eff = (c.k[i] - 1) * c.d[i] + 1, in = c.xs[2 + i];
  const double v = static_cast<double>(in + c.pb[i] + c.pe[i] - eff) / static_cast<double>(c.s[i]) + 1;
  int64_t o = static_cast<int64_t>(c.ceil ? std::ceil(v) : std::floor(v));
  if (c.ceil && (o - 1) * c.s[i] >= in + c.pb[i]) --o;
  return o;
}

// kind: 0 max, 1 avg excluding pad, 2 avg including pad. Also returns argmax flat indices.
std::vector<double> pool_oracle(const Tensor& x, const PoolCase& c, int kind, Shape* os, std::vector<int64_t>* arg) {
  const size_t nd = c.xs.size() - 2;
  *os = {c.xs[0], c.xs[1]};
  Shape padded = {c.xs[0] * c.xs[1]};
  for (size_t i = 0; i < nd; ++i) {
    os->push_back(out_extent(c, i));
    padded.push_back(c.xs[2 + i] + c.pb[i] + c.pe[i]);
  }
  const int64_t P = shape_numel(Shape(padded.begin() + 1, padded.end()));
  const int64_t I = shape_numel(Shape(c.xs.begin() + 2, c.xs.end()));
  std::vector<double> pad(static_cast<size_t>(padded[0] * P), std::numeric_limits<double>::quiet_NaN());
  std::vector<int64_t> src(pad.size(), -1);
  for (int64_t nc = 0; nc < padded[0]; ++nc)
    for (int64_t i = 0; i < I; ++i) {
      int64_t r = i, off = 0, mul = 1;
      for (size_t dd = nd; dd-- > 0;) {
        const int64_t idx = r % c.xs[2 + dd];
        r /= c.xs[2 + dd];
        off += (idx + c.pb[dd]) * mul;
        mul *= padded[1 + dd];
      }
      pad[nc * P + off] = x.get_f64(nc * I + i);
      src[nc * P + off] = nc * I + i;
    }
  const Shape ospatial(os->begin() + 2, os->end());
  const int64_t O = shape_numel(ospatial), K = shape_numel(c.k);
  std::vector<double> y;
  arg->clear();
  for (int64_t nc = 0; nc < padded[0]; ++nc)
    for (int64_t o = 0; o < O; ++o) {
      double best = -INFINITY, sum = 0;
      int64_t cnt = 0, barg = -1;
      for (int64_t t = 0; t < K; ++t) {
        int64_t ro = o, rt = t, off = 0, mul = 1;
        bool beyond = false;  // past the explicitly padded extent (ceil_mode)
        for (size_t dd = nd; dd-- > 0;) {
          const int64_t oi = ro % ospatial[dd], ti = rt % c.k[dd];
          ro /= ospatial[dd];
          rt /= c.k[dd];
          const int64_t p = oi * c.s[dd] + ti * c.d[dd];
          if (p >= padded[1 + dd]) beyond = true;
          off += p * mul;
          mul *= padded[1 + dd];
        }
        if (beyond) continue;
        const double v = pad[nc * P + off];
        if (std::isnan(v)) {
          if (kind == 2) ++cnt;
          continue;
        }
        if (v > best) best = v, barg = src[nc * P + off];
        sum += v;
        ++cnt;
      }
      y.push_back(kind == 0 ? best : sum / static_cast<double>(cnt));
      arg->push_back(barg);
    }
  return y;
}

AttributeMap pool_attrs(const PoolCase& c) {
  AttributeMap a;
  a["kernel_shape"] = attr_ints(c.k);
  a["strides"] = attr_ints(c.s);
  a["dilations"] = attr_ints(c.d);
  std::vector<int64_t> pads = c.pb;
  pads.insert(pads.end(), c.pe.begin(), c.pe.end());
  a["pads"] = attr_ints(pads);
  a["ceil_mode"] = attr_i(c.ceil);
  return a;
}

const std::vector<PoolCase>& cases() {
  static const std::vector<PoolCase> k = {
      {{2, 3, 8, 8}, {2, 2}, {2, 2}, {1, 1}, {0, 0}, {0, 0}, false},
      {{1, 2, 7, 9}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, {1, 1}, false},
      {{1, 2, 7, 9}, {3, 2}, {2, 3}, {1, 1}, {1, 0}, {0, 1}, true},
      {{2, 1, 11, 6}, {2, 3}, {1, 2}, {2, 1}, {0, 1}, {1, 1}, true},
      {{3, 4, 17}, {4}, {3}, {1}, {2}, {1}, false},
      {{1, 2, 5, 6, 7}, {2, 3, 2}, {2, 1, 2}, {1, 1, 2}, {1, 0, 1}, {0, 1, 1}, true},
  };
  return k;
}

TEST(MaxPool, WithIndices) {
  for (const PoolCase& c : cases()) {
    const Tensor x = random_tensor(DType::F32, c.xs);
    auto r = run(make_node(Op::MaxPool, 1, 2, pool_attrs(c)), {&x});
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    Shape os;
    std::vector<int64_t> arg;
    const auto want = pool_oracle(x, c, 0, &os, &arg);
    expect_close((*r)[0], want, os, "MaxPool " + shape_to_string(c.xs));
    ASSERT_EQ((*r)[1].dtype(), DType::I64);
    ASSERT_EQ((*r)[1].shape(), os);
    for (int64_t i = 0; i < (*r)[1].numel(); ++i) ASSERT_EQ((*r)[1].data<int64_t>()[i], arg[i]) << "Indices " << i;
  }
}

TEST(MaxPool, StorageOrderColumnMajor) {
  const Tensor x = random_tensor(DType::F32, {1, 2, 4, 3});
  AttributeMap a;
  a["kernel_shape"] = attr_ints({2, 2});
  a["storage_order"] = attr_i(1);
  auto r = run(make_node(Op::MaxPool, 1, 2, a), {&x});
  ASSERT_TRUE(r.ok());
  for (int64_t i = 0; i < (*r)[1].numel(); ++i) {
    const int64_t cm = (*r)[1].data<int64_t>()[i];
    const int64_t nc = cm / 12, h = cm % 12 % 4, w = cm % 12 / 4;  // column major: h + w*H
    EXPECT_EQ(x.get_f64(nc * 12 + h * 3 + w), (*r)[0].get_f64(i));
  }
}

TEST(MaxPool, Int8AndHalf) {
  const PoolCase& c = cases()[1];
  for (DType dt : {DType::I8, DType::U8, DType::F16, DType::BF16}) {
    const Tensor x = dt == DType::I8 || dt == DType::U8 ? random_tensor(dt, c.xs, dt == DType::I8 ? -128 : 0, 255)
                                                        : random_tensor(dt, c.xs);
    auto r = run(make_node(Op::MaxPool, 1, 1, pool_attrs(c)), {&x});
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    Shape os;
    std::vector<int64_t> arg;
    expect_close((*r)[0], pool_oracle(x, c, 0, &os, &arg), os, std::string("MaxPool ") + std::string(dtype_name(dt)));
  }
}

TEST(AveragePool, CountIncludePadBothWays) {
  for (int include = 0; include <= 1; ++include)
    for (const PoolCase& c : cases()) {
      const Tensor x = random_tensor(DType::F32, c.xs);
      AttributeMap a = pool_attrs(c);
      a["count_include_pad"] = attr_i(include);
      auto r = run(make_node(Op::AveragePool, 1, 1, a), {&x}, 19);
      ASSERT_TRUE(r.ok()) << r.status().to_string();
      Shape os;
      std::vector<int64_t> arg;
      expect_close((*r)[0], pool_oracle(x, c, include ? 2 : 1, &os, &arg), os,
                   fmt::format("AveragePool include_pad={} {}", include, shape_to_string(c.xs)));
    }
}

TEST(AveragePool, SameUpperAndLower) {
  const Tensor x = random_tensor(DType::F32, {1, 1, 5, 6});
  for (std::string mode : {"SAME_UPPER", "SAME_LOWER"}) {
    AttributeMap a;
    a["kernel_shape"] = attr_ints({2, 3});
    a["strides"] = attr_ints({2, 2});
    a["auto_pad"] = attr_s(mode);
    auto r = run(make_node(Op::AveragePool, 1, 1, a), {&x});
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    // out = ceil(in/s) = {3, 3}; totals {1, 1}: UPPER pads the end, LOWER the beginning.
    const bool upper = mode == "SAME_UPPER";
    PoolCase c{{1, 1, 5, 6}, {2, 3}, {2, 2}, {1, 1}, {upper ? 0 : 1, upper ? 0 : 1}, {upper ? 1 : 0, upper ? 1 : 0},
               false};
    Shape os;
    std::vector<int64_t> arg;
    expect_close((*r)[0], pool_oracle(x, c, 1, &os, &arg), os, mode);
  }
}

TEST(GlobalPools, AverageAndMax) {
  for (const Shape& xs : {Shape{2, 3, 5, 7}, Shape{1, 16, 9}, Shape{2, 2, 2, 3, 4}}) {
    const Tensor x = random_tensor(DType::F32, xs);
    auto ra = run(make_node(Op::GlobalAveragePool, 1, 1), {&x});
    auto rm = run(make_node(Op::GlobalMaxPool, 1, 1), {&x});
    ASSERT_TRUE(ra.ok() && rm.ok());
    const int64_t NC = xs[0] * xs[1], S = shape_numel(xs) / NC;
    std::vector<double> avg, mx;
    for (int64_t nc = 0; nc < NC; ++nc) {
      double s = 0, m = -INFINITY;
      for (int64_t i = 0; i < S; ++i) s += x.get_f64(nc * S + i), m = std::max(m, x.get_f64(nc * S + i));
      avg.push_back(s / static_cast<double>(S));
      mx.push_back(m);
    }
    Shape os = xs;
    for (size_t d = 2; d < os.size(); ++d) os[d] = 1;
    expect_close((*ra)[0], avg, os, "GlobalAveragePool");
    expect_close((*rm)[0], mx, os, "GlobalMaxPool");
  }
}

TEST(Pools, Errors) {
  const Tensor x = random_tensor(DType::F32, {1, 2, 4, 4});
  EXPECT_NE(error_of(make_node(Op::MaxPool, 1, 1), {&x}).find("missing required attribute 'kernel_shape'"),
            std::string::npos);
  AttributeMap a;
  a["kernel_shape"] = attr_ints({3});
  EXPECT_NE(error_of(make_node(Op::AveragePool, 1, 1, a), {&x}).find("has rank 1; input has 2 spatial dims"),
            std::string::npos);
  a["kernel_shape"] = attr_ints({6, 6});
  EXPECT_NE(error_of(make_node(Op::MaxPool, 1, 1, a), {&x}).find("larger than the padded input"), std::string::npos);
  const Tensor xi = random_tensor(DType::I32, {1, 2, 4, 4});
  EXPECT_NE(error_of(make_node(Op::GlobalAveragePool, 1, 1), {&xi}).find("dtype i32"), std::string::npos);
  const Tensor x2 = random_tensor(DType::F32, {2, 4});
  EXPECT_NE(error_of(make_node(Op::GlobalMaxPool, 1, 1), {&x2}).find("rank 2 is below 3"), std::string::npos);
}

}  // namespace
}  // namespace gpuopt
