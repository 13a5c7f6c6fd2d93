// Conv / ConvTranspose against an independent oracle: explicit padding + im2col + per-group
// matrix product; ConvTranspose as a stride-1 Conv of the zero-upsampled input with the flipped,
// transposed kernel.
#include "nn_test_util.h"

namespace gpuopt {
namespace {

using namespace testing_nn;

struct Geo {
  std::vector<int64_t> strides, dil, pb, pe;
};

void unravel(int64_t i, const std::vector<int64_t>& dims, std::vector<int64_t>* idx) {
  idx->resize(dims.size());
  for (size_t d = dims.size(); d-- > 0;) {
    (*idx)[d] = i % dims[d];
    i /= dims[d];
  }
}

// y[n][m][o] = b[m] + sum_{c,t} w[m][c][t] * xpad[n][g*Cg+c][o*s + t*d]
std::vector<double> conv_oracle(const std::vector<double>& x, const Shape& xs, const std::vector<double>& w,
                                const Shape& ws, const std::vector<double>* b, int64_t group, const Geo& g,
                                Shape* out_shape) {
  const size_t nd = xs.size() - 2;
  const int64_t N = xs[0], C = xs[1], M = ws[0], Cg = C / group, Mg = M / group;
  std::vector<int64_t> in(xs.begin() + 2, xs.end()), k(ws.begin() + 2, ws.end()), out(nd), padded(nd);
  int64_t K = 1, O = 1, I = 1;
  for (size_t d = 0; d < nd; ++d) {
    padded[d] = in[d] + g.pb[d] + g.pe[d];
    out[d] = (padded[d] - ((k[d] - 1) * g.dil[d] + 1)) / g.strides[d] + 1;
    K *= k[d];
    O *= out[d];
    I *= in[d];
  }
  *out_shape = {N, M};
  for (int64_t o : out) out_shape->push_back(o);
  std::vector<double> y(static_cast<size_t>(N * M * O));
  std::vector<double> cols(static_cast<size_t>(Cg * K * O));
  std::vector<int64_t> oi, ti;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t gr = 0; gr < group; ++gr) {
      for (int64_t c = 0; c < Cg; ++c)
        for (int64_t t = 0; t < K; ++t)
          for (int64_t o = 0; o < O; ++o) {
            unravel(o, out, &oi);
            unravel(t, k, &ti);
            int64_t off = 0;
            bool inside = true;
            for (size_t d = 0; d < nd; ++d) {
              const int64_t p = oi[d] * g.strides[d] + ti[d] * g.dil[d] - g.pb[d];  // padded -> original
              if (p < 0 || p >= in[d]) inside = false;
              off = off * in[d] + p;
            }
            cols[(c * K + t) * O + o] = inside ? x[(n * C + gr * Cg + c) * I + off] : 0.0;
          }
      for (int64_t mm = 0; mm < Mg; ++mm) {
        const int64_t m = gr * Mg + mm;
        for (int64_t o = 0; o < O; ++o) {
          double s = b ? (*b)[m] : 0.0;
          for (int64_t r = 0; r < Cg * K; ++r) s += w[m * Cg * K + r] * cols[r * O + o];
          y[(n * M + m) * O + o] = s;
        }
      }
    }
  return y;
}

AttributeMap conv_attrs(int64_t group, const Geo& g, const std::string& auto_pad = "") {
  AttributeMap a;
  a["group"] = attr_i(group);
  a["strides"] = attr_ints(g.strides);
  a["dilations"] = attr_ints(g.dil);
  if (!auto_pad.empty()) {
    a["auto_pad"] = attr_s(auto_pad);
  } else {
    std::vector<int64_t> pads = g.pb;
    pads.insert(pads.end(), g.pe.begin(), g.pe.end());
    a["pads"] = attr_ints(pads);
  }
  return a;
}

void check_conv(DType dt, Shape xs, Shape ws, int64_t group, Geo g, bool bias, const std::string& auto_pad = "") {
  const Tensor x = random_tensor(dt, xs), w = random_tensor(dt, ws);
  const Tensor b = random_tensor(dt, {ws[0]});
  const Node n = make_node(Op::Conv, bias ? 3 : 2, 1, conv_attrs(group, g, auto_pad));
  auto r = run(n, bias ? std::vector<const Tensor*>{&x, &w, &b} : std::vector<const Tensor*>{&x, &w});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  if (auto_pad.rfind("SAME", 0) == 0) {  // expected SAME pads: total = (ceil(in/s)-1)*s + eff - in, split per mode
    for (size_t d = 0; d + 2 < xs.size(); ++d) {
      const int64_t in = xs[d + 2], s = g.strides[d], eff = (ws[d + 2] - 1) * g.dil[d] + 1;
      const int64_t total = std::max<int64_t>(0, ((in + s - 1) / s - 1) * s + eff - in);
      g.pb[d] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      g.pe[d] = total - g.pb[d];
    }
  }
  Shape os;
  const std::vector<double> bv = values(b);
  const auto want = conv_oracle(values(x), xs, values(w), ws, bias ? &bv : nullptr, group, g, &os);
  expect_close((*r)[0], want, os,
               fmt::format("Conv {} x{} w{}", dtype_name(dt), shape_to_string(xs), shape_to_string(ws)));
}

TEST(Conv, TwoDimBasic) {
  check_conv(DType::F32, {2, 3, 7, 8}, {4, 3, 3, 3}, 1, {{1, 1}, {1, 1}, {1, 1}, {1, 1}}, true);
}
TEST(Conv, TwoDimStridesDilationsAsymmetricPads) {
  check_conv(DType::F32, {1, 4, 13, 16}, {8, 4, 3, 2}, 1, {{2, 3}, {2, 1}, {0, 2}, {1, 0}}, true);
}
TEST(Conv, Groups) {
  check_conv(DType::F32, {2, 6, 9, 8}, {9, 2, 3, 3}, 3, {{1, 2}, {1, 1}, {1, 0}, {1, 1}}, true);
}
TEST(Conv, Depthwise) {
  check_conv(DType::F32, {1, 8, 11, 11}, {8, 1, 3, 3}, 8, {{2, 2}, {1, 1}, {1, 1}, {1, 1}}, false);
}
TEST(Conv, OneDim) {
  check_conv(DType::F32, {3, 5, 17}, {4, 5, 4}, 1, {{2}, {2}, {3}, {1}}, true);
}
TEST(Conv, ThreeDim) {
  check_conv(DType::F32, {1, 2, 5, 6, 7}, {3, 2, 2, 3, 2}, 1, {{1, 2, 1}, {1, 1, 2}, {1, 0, 1}, {0, 1, 1}}, true);
}
TEST(Conv, SameUpper) {
  check_conv(DType::F32, {1, 3, 9, 8}, {2, 3, 4, 3}, 1, {{2, 3}, {1, 1}, {0, 0}, {0, 0}}, true, "SAME_UPPER");
}
TEST(Conv, SameLower) {
  check_conv(DType::F32, {1, 3, 9, 8}, {2, 3, 4, 3}, 1, {{2, 1}, {1, 2}, {0, 0}, {0, 0}}, false, "SAME_LOWER");
}
TEST(Conv, Valid) {
  check_conv(DType::F32, {1, 3, 9, 8}, {2, 3, 4, 3}, 1, {{2, 1}, {1, 1}, {0, 0}, {0, 0}}, true, "VALID");
}
TEST(Conv, HalfAndBFloat16AndDouble) {
  check_conv(DType::F16, {1, 4, 8, 7}, {4, 4, 3, 3}, 1, {{1, 1}, {1, 1}, {1, 1}, {1, 1}}, true);
  check_conv(DType::BF16, {1, 4, 8, 7}, {4, 2, 3, 3}, 2, {{1, 1}, {1, 1}, {1, 1}, {1, 1}}, true);
  check_conv(DType::F64, {1, 4, 8, 7}, {4, 4, 3, 3}, 1, {{1, 1}, {1, 1}, {1, 1}, {1, 1}}, true);
}

TEST(Conv, Errors) {
  const Tensor x = random_tensor(DType::F32, {1, 4, 8, 8});
  const Tensor w3 = random_tensor(DType::F32, {4, 4, 3});
  const Tensor w = random_tensor(DType::F32, {6, 2, 3, 3});
  const Tensor xi = random_tensor(DType::I32, {1, 4, 8, 8});
  Node n = make_node(Op::Conv, 2, 1, {}, "conv1");
  EXPECT_EQ(error_of(n, {&x, &w3}), "[Conv] node 'conv1': kernel rank 3 does not match input rank 4");
  EXPECT_NE(error_of(n, {&x, &w}).find("4 channels but weight expects 2 x group 1"), std::string::npos);
  const Tensor w1 = random_tensor(DType::F32, {6, 1, 3, 3});
  n.attrs["group"] = attr_i(4);
  EXPECT_NE(error_of(n, {&x, &w1}).find("output channels 6 are not divisible by group 4"), std::string::npos);
  n.attrs["group"] = attr_i(2);
  EXPECT_NE(error_of(n, {&xi, &w}).find("dtype i32"), std::string::npos);
  n.attrs["pads"] = attr_ints({1, 1});
  EXPECT_NE(error_of(n, {&x, &w}).find("pads has 2 values"), std::string::npos);
  n.attrs["pads"] = attr_ints({0, 0, 0, 0});
  n.attrs["strides"] = attr_ints({1, 0});
  EXPECT_NE(error_of(n, {&x, &w}).find("must be positive"), std::string::npos);
}

TEST(Conv, LoadTimeShapesKeepSymbolicBatch) {
  const Node n = make_node(Op::Conv, 2, 1, conv_attrs(1, {{2, 2}, {1, 1}, {1, 1}, {1, 1}}));
  ValueInfo x{DType::F32, true, {kFirstSymbolDim, 3, kUnknownDim, 32}, nullptr};
  ValueInfo w{DType::F32, true, {16, 3, 3, 3}, nullptr};
  auto r = infer_node(n, {&x, &w}, 17);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ((*r)[0].shape, (Shape{kFirstSymbolDim, 16, kUnknownDim, 16}));
  ValueInfo unknown_rank{DType::F32, false, {}, nullptr};
  auto r2 = infer_node(n, {&unknown_rank, &w}, 17);
  ASSERT_TRUE(r2.ok());
  EXPECT_EQ((*r2)[0].shape.size(), 4u);
  EXPECT_EQ((*r2)[0].shape[1], 16);
}

// ---- ConvTranspose ----

void check_convtranspose(Shape xs, Shape ws, int64_t group, std::vector<int64_t> s, std::vector<int64_t> dil,
                         std::vector<int64_t> pb, std::vector<int64_t> pe, std::vector<int64_t> out_pad) {
  const DType dt = DType::F32;
  const Tensor x = random_tensor(dt, xs), w = random_tensor(dt, ws), b = random_tensor(dt, {ws[1] * group});
  AttributeMap a;
  a["group"] = attr_i(group);
  a["strides"] = attr_ints(s);
  a["dilations"] = attr_ints(dil);
  std::vector<int64_t> pads = pb;
  pads.insert(pads.end(), pe.begin(), pe.end());
  a["pads"] = attr_ints(pads);
  a["output_padding"] = attr_ints(out_pad);
  const Node n = make_node(Op::ConvTranspose, 3, 1, a);
  auto r = run(n, {&x, &w, &b});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  // Oracle: zero-upsample x by the stride, pad with eff-1-pad (end also + output_padding), then a
  // stride-1 Conv with dilation d whose kernel is W flipped and with in/out channels swapped.
  const size_t nd = xs.size() - 2;
  const int64_t C = xs[1], Cg = C / group, Mg = ws[1], M = Mg * group;
  Shape us = {xs[0], C};
  for (size_t d = 0; d < nd; ++d) us.push_back((xs[2 + d] - 1) * s[d] + 1);
  const std::vector<double> xv = values(x), wv = values(w);
  std::vector<double> up(static_cast<size_t>(shape_numel(us)), 0.0);
  const int64_t I = shape_numel(Shape(xs.begin() + 2, xs.end())), U = shape_numel(Shape(us.begin() + 2, us.end()));
  std::vector<int64_t> idx;
  for (int64_t nc = 0; nc < xs[0] * C; ++nc)
    for (int64_t i = 0; i < I; ++i) {
      unravel(i, Shape(xs.begin() + 2, xs.end()), &idx);
      int64_t off = 0;
      for (size_t d = 0; d < nd; ++d) off = off * us[2 + d] + idx[d] * s[d];
      up[nc * U + off] = xv[nc * I + i];
    }
  Shape fs = {M, Cg};
  for (size_t d = 0; d < nd; ++d) fs.push_back(ws[2 + d]);
  const Shape ks(ws.begin() + 2, ws.end());
  const int64_t K = shape_numel(ks);
  std::vector<double> flipped(static_cast<size_t>(M * Cg * K));
  for (int64_t gr = 0; gr < group; ++gr)
    for (int64_t c = 0; c < Cg; ++c)
      for (int64_t mm = 0; mm < Mg; ++mm)
        for (int64_t t = 0; t < K; ++t)
          flipped[((gr * Mg + mm) * Cg + c) * K + (K - 1 - t)] = wv[((gr * Cg + c) * Mg + mm) * K + t];
  Geo g{std::vector<int64_t>(nd, 1), dil, {}, {}};
  for (size_t d = 0; d < nd; ++d) {
    const int64_t eff = (ws[2 + d] - 1) * dil[d] + 1;
    g.pb.push_back(eff - 1 - pb[d]);
    g.pe.push_back(eff - 1 - pe[d] + out_pad[d]);
  }
  Shape os;
  const std::vector<double> bv = values(b);
  const auto want = conv_oracle(up, us, flipped, fs, &bv, group, g, &os);
  expect_close((*r)[0], want, os, "ConvTranspose");
}

TEST(ConvTranspose, TwoDim) {
  check_convtranspose({2, 3, 5, 6}, {3, 4, 3, 3}, 1, {2, 2}, {1, 1}, {1, 0}, {1, 1}, {1, 0});
}
TEST(ConvTranspose, GroupsDilations) {
  check_convtranspose({1, 4, 7, 4}, {4, 3, 3, 2}, 2, {1, 3}, {2, 1}, {0, 1}, {2, 0}, {0, 2});
}
TEST(ConvTranspose, OneAndThreeDim) {
  check_convtranspose({2, 2, 9}, {2, 5, 4}, 1, {3}, {1}, {1}, {2}, {0});
  check_convtranspose({1, 2, 3, 4, 5}, {2, 2, 2, 3, 2}, 1, {2, 1, 2}, {1, 1, 1}, {0, 1, 0}, {1, 0, 0}, {1, 0, 0});
}

TEST(ConvTranspose, OutputShapeAndSame) {
  const Tensor x = random_tensor(DType::F32, {1, 1, 3, 3}), w = random_tensor(DType::F32, {1, 2, 3, 3});
  AttributeMap a;
  a["strides"] = attr_ints({3, 2});
  a["output_shape"] = attr_ints({10, 8});
  auto r = run(make_node(Op::ConvTranspose, 2, 1, a), {&x, &w});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ((*r)[0].shape(), (Shape{1, 2, 10, 8}));
  AttributeMap s;
  s["strides"] = attr_ints({2, 2});
  s["auto_pad"] = attr_s("SAME_UPPER");
  auto r2 = run(make_node(Op::ConvTranspose, 2, 1, s), {&x, &w});
  ASSERT_TRUE(r2.ok()) << r2.status().to_string();
  EXPECT_EQ((*r2)[0].shape(), (Shape{1, 2, 6, 6}));
}

TEST(ConvTranspose, Errors) {
  const Tensor x = random_tensor(DType::F32, {1, 4, 5, 5}), w = random_tensor(DType::F32, {3, 2, 3, 3});
  EXPECT_NE(error_of(make_node(Op::ConvTranspose, 2, 1), {&x, &w}).find("4 channels but weight dim 0 is 3"),
            std::string::npos);
}

}  // namespace
}  // namespace gpuopt
