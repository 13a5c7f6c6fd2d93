// Int8Conv's residual form (fuse_int8_residual's node) against the pair it replaces, Int8Conv
// then Int8Add, on the CPU reference: the same bytes, NCHW and channels-last, with and without
// the Relus and the output requantization; and its input errors.
#include "nn_test_util.h"

#include "ops/quant/int8_conv_schema.h"

#include <cstring>
#include <set>

namespace gpuopt {
namespace {

using namespace testing_nn;

AttributeMap conv_attrs(bool relu, bool channels_last) {
  AttributeMap at;
  at["pads"] = attr_ints({1, 1, 1, 1});
  at["kernel_shape"] = attr_ints({3, 3});
  at["channels_last"] = attr_i(channels_last ? 1 : 0);
  if (relu) at["activation"] = attr_s("Relu");
  return at;
}

struct Data {
  Tensor x = random_tensor(DType::I8, {2, 6, 5, 4}, -128, 128);
  Tensor w = random_tensor(DType::I8, {8, 6, 3, 3}, -127, 128);
  Tensor z = random_tensor(DType::I8, {2, 8, 5, 4}, -128, 128);
  Tensor sx = scalar_f32(0.02), sw = random_tensor(DType::F32, {8}, 0.001, 0.004);
  Tensor b = random_tensor(DType::F32, {8}, -0.5, 0.5);
  // The conv's int8 step is 4 output steps: the intermediate rounding shows in the output.
  Tensor sy = scalar_f32(0.2), sz = scalar_f32(0.03), so = scalar_f32(0.05);
};

TEST(Int8ConvResidual, EqualsInt8ConvThenInt8Add) {
  const Data d;
  int nonzero_relu_cut = 0;
  for (bool cl : {false, true})
    for (bool relu : {false, true})
      for (bool relu2 : {false, true})
        for (bool requant : {false, true}) {
          const std::string what = fmt::format("cl {} relu {} relu2 {} requant {}", cl, relu, relu2, requant);
          const Tensor xn = to_nhwc(d.x), wn = to_nhwc(d.w), zn = to_nhwc(d.z);
          const Tensor& x = cl ? xn : d.x;
          const Tensor& w = cl ? wn : d.w;
          const Tensor& z = cl ? zn : d.z;
          auto c = run(make_node(Op::Int8Conv, 6, 1, conv_attrs(relu, cl)), {&x, &w, &d.sx, &d.sw, &d.b, &d.sy});
          ASSERT_TRUE(c.ok()) << c.status().to_string();
          std::vector<const Tensor*> add_in{&(*c)[0], &d.sy, &z, &d.sz};
          if (requant) add_in.push_back(&d.so);
          AttributeMap add_at;
          if (relu2) add_at["activation"] = attr_s("Relu");
          auto pair = run(make_node(Op::Int8Add, add_in.size(), 1, add_at), add_in);
          ASSERT_TRUE(pair.ok()) << pair.status().to_string();

          std::vector<const Tensor*> in{&x, &w, &d.sx, &d.sw, &d.b, &d.sy, &z, &d.sz};
          if (requant) in.push_back(&d.so);
          AttributeMap at = conv_attrs(relu, cl);
          if (relu2) at[int8conv::kResidualActivation] = attr_s("Relu");
          auto fused = run(make_node(Op::Int8Conv, in.size(), 1, at), in);
          ASSERT_TRUE(fused.ok()) << what << ": " << fused.status().to_string();
          const Tensor& got = (*fused)[0];
          const Tensor& want = (*pair)[0];
          ASSERT_EQ(got.dtype(), requant ? DType::I8 : DType::F32) << what;
          ASSERT_EQ(got.shape(), want.shape()) << what;
          ASSERT_EQ(got.nbytes(), want.nbytes());
          EXPECT_EQ(std::memcmp(got.raw(), want.raw(), got.nbytes()), 0) << what;
          // Not a degenerate case: values of both signs, several int8 levels.
          std::set<double> levels;
          for (int64_t i = 0; i < got.numel(); ++i) levels.insert(got.get_f64(i));
          EXPECT_GT(levels.size(), 10u) << what;
          if (relu2 && *levels.begin() == 0.0 && levels.size() > 1) ++nonzero_relu_cut;
        }
  EXPECT_GT(nonzero_relu_cut, 0);  // the residual Relu clipped something
}

TEST(Int8ConvResidual, RejectsBadInputs) {
  const Data d;
  const Tensor zf = random_tensor(DType::F32, {2, 8, 5, 4});
  const Tensor z_small = random_tensor(DType::I8, {2, 8, 5, 3}, -128, 128);
  AttributeMap bad_act = conv_attrs(false, false);
  bad_act[int8conv::kResidualActivation] = attr_s("Sigmoid");
  struct Bad {
    std::vector<const Tensor*> in;
    AttributeMap at;
    const char* want;
  };
  const Bad cases[] = {
      {{&d.x, &d.w, &d.sx, &d.sw, &d.b, &d.sy, &zf, &d.sz}, conv_attrs(false, false), "Z has dtype f32"},
      {{&d.x, &d.w, &d.sx, &d.sw, &d.b, &d.sy, &d.z}, conv_attrs(false, false), "needs y_scale"},
      {{&d.x, &d.w, &d.sx, &d.sw, &d.b, &d.sy, &z_small, &d.sz}, conv_attrs(false, false), "does not have Y's shape"},
      {{&d.x, &d.w, &d.sx, &d.sw, &d.b, &d.sy, &d.z, &d.sz}, bad_act, "residual_activation 'Sigmoid'"},
  };
  for (const Bad& c : cases) {
    auto r = run(make_node(Op::Int8Conv, c.in.size(), 1, c.at, "iconv"), c.in);
    ASSERT_FALSE(r.ok()) << c.want;
    EXPECT_NE(r.status().message().find(c.want), std::string::npos) << r.status().to_string();
    EXPECT_NE(r.status().message().find("iconv"), std::string::npos) << r.status().to_string();
  }
}

}  // namespace
}  // namespace gpuopt
