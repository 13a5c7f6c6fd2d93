// The CUDA QLinearConv (make_qconv_desc's geometry, qconv_sum and the requantization, the code
// the kernel runs) on the host against the CPU reference: 1-D and 2-D, pads, strides, dilations,
// groups, auto_pad SAME_UPPER, per-channel weight scales and zero points, bias. Needs no GPU.
#include "ops/quant/cuda/qconv_plan.h"
#include "ir/eval.h"

#include <gtest/gtest.h>

#include <random>

namespace gpuopt::cuda {
namespace {

struct QC {
  const char* name;
  Shape x, w;
  DType xt, wt;
  bool per_channel, bias;
  std::vector<std::pair<const char*, std::vector<int64_t>>> ints;
  int64_t group = 1;
  const char* auto_pad = nullptr;
};

void check(const QC& c) {
  SCOPED_TRACE(c.name);
  std::mt19937 rng(9);
  auto q8 = [&](DType t, Shape s) {
    Tensor v = Tensor::empty(t, std::move(s));
    std::uniform_int_distribution<int> u(t == DType::U8 ? 0 : -128, t == DType::U8 ? 255 : 127);
    for (int64_t i = 0; i < v.numel(); ++i) v.set_f64(i, u(rng));
    return v;
  };
  const int64_t M = c.w[0];
  Tensor x = q8(c.xt, c.x), w = q8(c.wt, c.w);
  Tensor xs = Tensor::scalar_f32(0.02f), xz = q8(c.xt, {}), ys = Tensor::scalar_f32(0.3f), yz = q8(DType::U8, {});
  Tensor ws = Tensor::empty(DType::F32, {c.per_channel ? M : 1}), wz = q8(c.wt, {c.per_channel ? M : 1});
  for (int64_t i = 0; i < ws.numel(); ++i) ws.set_f64(i, 0.001 + 0.0005 * i);
  Tensor b = Tensor::empty(DType::I32, {M});
  for (int64_t i = 0; i < M; ++i) b.set_f64(i, 100 * i - 250);
  Node n;
  n.op = Op::QLinearConv;
  n.op_type = "QLinearConv";
  n.name = "qconv";
  for (const auto& [k, v] : c.ints) {
    Attribute a;
    a.kind = Attribute::Kind::kInts;
    a.ints = v;
    n.attrs[k] = a;
  }
  Attribute g;
  g.i = c.group;
  n.attrs["group"] = g;
  if (c.auto_pad) {
    Attribute a;
    a.kind = Attribute::Kind::kString;
    a.s = c.auto_pad;
    n.attrs["auto_pad"] = a;
  }
  std::vector<const Tensor*> in{&x, &xs, &xz, &w, &ws, &wz, &ys, &yz};
  if (c.bias) in.push_back(&b);
  for (size_t i = 0; i < in.size(); ++i) n.inputs.push_back(static_cast<ValueId>(i));
  n.outputs.push_back(static_cast<ValueId>(in.size()));
  auto ref = eval_node(n, in, 10);
  ASSERT_TRUE(ref.ok()) << ref.status().to_string();
  QConvInputs q;
  q.x_shape = c.x;
  q.w_shape = c.w;
  q.x_dt = c.xt;
  q.w_dt = c.wt;
  q.y_dt = DType::U8;
  q.x_scale = 0.02f;
  q.x_zp = xz.get_i64(0);
  q.y_scale = 0.3f;
  q.y_zp = yz.get_f64(0);
  q.w_scale_count = ws.numel();
  q.w_zp_count = wz.numel();
  q.bias_count = c.bias ? M : 0;
  auto d = make_qconv_desc(n, q);
  ASSERT_TRUE(d.ok()) << d.status().to_string();
  ASSERT_EQ(d->numel, (*ref)[0].numel());
  int bad = 0;
  for (int64_t e = 0; e < d->numel; ++e) {
    int64_t m = 0;
    const int64_t acc = qconv_sum(*d, e, x.raw(), w.raw(), wz.raw(), c.bias ? b.data<int32_t>() : nullptr, &m);
    const double v = requantize(acc, d->x_scale, ws.get_f64(d->w_scale_count == 1 ? 0 : m), d->scale_t, d->y_scale,
                                d->y_zp, 0, 255);
    if (v != (*ref)[0].get_f64(e) && ++bad <= 5) ADD_FAILURE() << "element " << e << ": got " << v << " want " << (*ref)[0].get_f64(e);
  }
  EXPECT_EQ(bad, 0);
}

TEST(CudaQConvPlan, MatchesCpuReferenceOnTheHost) {
  check({"2-D pads 1 stride 2 bias", {2, 3, 9, 11}, {4, 3, 3, 3}, DType::U8, DType::U8, false, true,
         {{"pads", {1, 1, 1, 1}}, {"strides", {2, 2}}}});
  check({"2-D per-channel i8 weights groups 2", {1, 4, 7, 7}, {6, 2, 3, 3}, DType::U8, DType::I8, true, true,
         {{"pads", {0, 1, 2, 1}}}, 2});
  check({"2-D dilation 2 i8 input", {1, 2, 10, 9}, {3, 2, 3, 2}, DType::I8, DType::I8, true, false, {{"dilations", {2, 2}}}});
  check({"1-D SAME_UPPER stride 3", {2, 3, 17}, {5, 3, 4}, DType::U8, DType::U8, false, true, {{"strides", {3}}}, 1,
         "SAME_UPPER"});
  check({"depthwise", {1, 5, 6, 6}, {5, 1, 3, 3}, DType::U8, DType::I8, true, true, {{"pads", {1, 1, 1, 1}}}, 5});
}

}  // namespace
}  // namespace gpuopt::cuda
