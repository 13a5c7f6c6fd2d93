// RMSNormalization, RotaryEmbedding and Attention: small cases checked by hand, equivalences
// between forms (3-D vs 4-D, GQA vs repeated heads, bool vs additive masks) and the errors bad
// input gets. The ONNX node tests (gpuopt_conformance) are the main oracle for these ops.
#include "nn_test_util.h"

#include <limits>

namespace gpuopt {
namespace {

using namespace testing_nn;

Tensor f32(Shape s, std::vector<float> v) {
  return Tensor::from_vector<float>(DType::F32, std::move(s), v);
}

// ---- RMSNormalization ------------------------------------------------------------------------

TEST(RMSNormalization, HandChecked) {
  // rows [2, -2, 2, -2] and [3, 4, 0, 0]: mean squares 4 and 6.25, so rms 2 and 2.5 (epsilon 0)
  const Tensor x = f32({2, 4}, {2, -2, 2, -2, 3, 4, 0, 0});
  const Tensor w = f32({4}, {1, 2, 3, 4});
  AttributeMap a;
  a["epsilon"] = attr_f(0.0f);
  auto r = run(make_node(Op::RMSNormalization, 2, 1, a), {&x, &w}, 23);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  expect_close((*r)[0], {1, -2, 3, -4, 1.2, 3.2, 0, 0}, {2, 4}, "RMSNormalization");
}

TEST(RMSNormalization, AxisAndBroadcastScale) {
  // axis 1 of [2, 3, 2]: each batch item normalised over 6 values; scale [3, 1] broadcasts.
  const Tensor x = random_tensor(DType::F32, {2, 3, 2});
  const Tensor w = random_tensor(DType::F32, {3, 1});
  AttributeMap a;
  a["axis"] = attr_i(1);
  a["epsilon"] = attr_f(0.25f);
  auto r = run(make_node(Op::RMSNormalization, 2, 1, a), {&x, &w}, 23);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  std::vector<double> want;
  for (int64_t b = 0; b < 2; ++b) {
    long double sq = 0;
    for (int64_t i = 0; i < 6; ++i) sq += static_cast<long double>(x.get_f64(b * 6 + i)) * x.get_f64(b * 6 + i);
    const double rms = std::sqrt(static_cast<double>(sq / 6) + 0.25);
    for (int64_t i = 0; i < 6; ++i) want.push_back(x.get_f64(b * 6 + i) / rms * w.get_f64(i / 2));
  }
  expect_close((*r)[0], want, {2, 3, 2}, "RMSNormalization axis 1");
}

TEST(RMSNormalization, HalfTypes) {
  for (DType dt : {DType::F16, DType::BF16}) {
    const Tensor x = random_tensor(dt, {3, 8}), w = random_tensor(dt, {8});
    auto r = run(make_node(Op::RMSNormalization, 2, 1), {&x, &w}, 23);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_EQ((*r)[0].dtype(), dt);
    std::vector<double> want;
    for (int64_t row = 0; row < 3; ++row) {
      double sq = 0;
      for (int64_t i = 0; i < 8; ++i) sq += x.get_f64(row * 8 + i) * x.get_f64(row * 8 + i);
      const double rms = std::sqrt(sq / 8 + static_cast<double>(1e-5f));
      for (int64_t i = 0; i < 8; ++i) want.push_back(x.get_f64(row * 8 + i) / rms * w.get_f64(i));
    }
    expect_close((*r)[0], want, {3, 8}, std::string(dtype_name(dt)));
  }
}

TEST(RMSNormalization, Errors) {
  const Tensor x = random_tensor(DType::F32, {2, 3}), w = random_tensor(DType::F32, {2});
  EXPECT_NE(error_of(make_node(Op::RMSNormalization, 2, 1, {}, "rms"), {&x, &w}, 23).find("does not broadcast"),
            std::string::npos);
  AttributeMap a;
  a["axis"] = attr_i(2);
  const Tensor w3 = random_tensor(DType::F32, {3});
  EXPECT_NE(error_of(make_node(Op::RMSNormalization, 2, 1, a), {&x, &w3}, 23).find("axis 2 is out of range"),
            std::string::npos);
  const Tensor xi = Tensor::from_vector<int64_t>(DType::I64, {3}, {1, 2, 3});
  EXPECT_NE(error_of(make_node(Op::RMSNormalization, 2, 1), {&xi, &w3}, 23).find("dtype"), std::string::npos);
}

// ---- RotaryEmbedding -------------------------------------------------------------------------

TEST(RotaryEmbedding, HandChecked) {
  // head of 4: angle 90 degrees for pair 0, 0 degrees for pair 1 (cache [batch 1, seq 1, 2])
  const Tensor x = f32({1, 1, 1, 4}, {1, 0, 0, 1});
  const Tensor c = f32({1, 1, 2}, {0, 1}), s = f32({1, 1, 2}, {1, 0});
  auto r = run(make_node(Op::RotaryEmbedding, 3, 1), {&x, &c, &s}, 23);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  // halves: pairs (x0, x2) = (1, 0) -> (0, 1) and (x1, x3) = (0, 1) unchanged
  expect_close((*r)[0], {0, 0, 1, 1}, {1, 1, 1, 4}, "rotate-half");
  AttributeMap a;
  a["interleaved"] = attr_i(1);
  r = run(make_node(Op::RotaryEmbedding, 3, 1, a), {&x, &c, &s}, 23);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  // interleaved: pairs (x0, x1) = (1, 0) -> (0, 1) and (x2, x3) = (0, 1) unchanged
  expect_close((*r)[0], {0, 1, 0, 1}, {1, 1, 1, 4}, "interleaved");
}

TEST(RotaryEmbedding, PositionIdsPartialRotationAnd3D) {
  // [B=1, H=2, S=2, D=4] with rotary_embedding_dim 2: channels 2..3 pass through.
  const Tensor x = random_tensor(DType::F32, {1, 2, 2, 4});
  const Tensor c = f32({3, 1}, {1, 0, -1}), s = f32({3, 1}, {0, 1, 0});  // 0, 90, 180 degrees
  const Tensor pos = Tensor::from_vector<int64_t>(DType::I64, {1, 2}, {2, 1});
  AttributeMap a;
  a["rotary_embedding_dim"] = attr_i(2);
  auto r = run(make_node(Op::RotaryEmbedding, 4, 1, a), {&x, &c, &s, &pos}, 23);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  std::vector<double> want = values(x);
  for (int64_t h = 0; h < 2; ++h) {
    double* t0 = &want[static_cast<size_t>((h * 2 + 0) * 4)];  // seq 0: position 2, 180 degrees
    t0[0] = -t0[0], t0[1] = -t0[1];
    double* t1 = &want[static_cast<size_t>((h * 2 + 1) * 4)];  // seq 1: position 1, 90 degrees
    const double x0 = t1[0], x1 = t1[1];
    t1[0] = -x1, t1[1] = x0;
  }
  expect_close((*r)[0], want, {1, 2, 2, 4}, "position_ids");

  // The same data as a 3-D [B, S, H*D] input with num_heads 2 gives the transposed result.
  Tensor x3 = Tensor::empty(DType::F32, {1, 2, 8});
  for (int64_t h = 0; h < 2; ++h)
    for (int64_t sq = 0; sq < 2; ++sq)
      for (int64_t e = 0; e < 4; ++e) x3.set_f64(sq * 8 + h * 4 + e, x.get_f64((h * 2 + sq) * 4 + e));
  a["num_heads"] = attr_i(2);
  auto r3 = run(make_node(Op::RotaryEmbedding, 4, 1, a), {&x3, &c, &s, &pos}, 23);
  ASSERT_TRUE(r3.ok()) << r3.status().to_string();
  std::vector<double> want3(16);
  for (int64_t h = 0; h < 2; ++h)
    for (int64_t sq = 0; sq < 2; ++sq)
      for (int64_t e = 0; e < 4; ++e) want3[sq * 8 + h * 4 + e] = want[(h * 2 + sq) * 4 + e];
  expect_close((*r3)[0], want3, {1, 2, 8}, "3-D input");
}

TEST(RotaryEmbedding, Errors) {
  const Tensor x = random_tensor(DType::F32, {1, 1, 2, 4});
  const Tensor c = random_tensor(DType::F32, {3, 2}), s = random_tensor(DType::F32, {3, 2});
  const Tensor bad_pos = Tensor::from_vector<int64_t>(DType::I64, {1, 2}, {0, 3});
  EXPECT_NE(error_of(make_node(Op::RotaryEmbedding, 4, 1, {}, "rope"), {&x, &c, &s, &bad_pos}, 23)
                .find("position_ids[0, 1] = 3 is outside the cache's 3 positions"),
            std::string::npos);
  const Tensor x3 = random_tensor(DType::F32, {1, 2, 8});
  const Tensor pos = Tensor::from_vector<int64_t>(DType::I64, {1, 2}, {0, 1});
  EXPECT_NE(error_of(make_node(Op::RotaryEmbedding, 4, 1), {&x3, &c, &s, &pos}, 23).find("num_heads"),
            std::string::npos);
  const Tensor c3 = random_tensor(DType::F32, {3, 3}), s3 = random_tensor(DType::F32, {3, 3});
  EXPECT_NE(error_of(make_node(Op::RotaryEmbedding, 4, 1), {&x, &c3, &s3, &pos}, 23).find("rotary_dim/2"),
            std::string::npos);
  EXPECT_NE(error_of(make_node(Op::RotaryEmbedding, 3, 1), {&x, &c, &s}, 23).find("must be 3-D"), std::string::npos);
}

// ---- Attention -------------------------------------------------------------------------------

const Tensor* kNone = nullptr;

TEST(Attention, HandChecked) {
  // one query [1, 0] against keys [1, 0] and [0, 1], scale 1: scores [1, 0],
  // weights [e, 1] / (e + 1), values [1] and [3] -> (e + 3) / (e + 1)
  const Tensor q = f32({1, 1, 1, 2}, {1, 0}), k = f32({1, 1, 2, 2}, {1, 0, 0, 1}), v = f32({1, 1, 2, 1}, {1, 3});
  AttributeMap a;
  a["scale"] = attr_f(1.0f);
  auto r = run(make_node(Op::Attention, 3, 4, a), {&q, &k, &v}, 23);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const double e = std::exp(1.0);
  expect_close((*r)[0], {(e + 3) / (e + 1)}, {1, 1, 1, 1}, "Y");
  expect_close((*r)[1], {1, 0, 0, 1}, {1, 1, 2, 2}, "present_key = K without past");
  expect_close((*r)[3], {1, 0}, {1, 1, 1, 2}, "qk_matmul_output mode 0");

  // default scale 1/sqrt(2); mode 3 returns the softmax weights
  a.erase("scale");
  a["qk_matmul_output_mode"] = attr_i(3);
  r = run(make_node(Op::Attention, 3, 4, a), {&q, &k, &v}, 23);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const double w0 = 1 / (1 + std::exp(-1 / std::sqrt(2.0)));
  expect_close((*r)[3], {w0, 1 - w0}, {1, 1, 1, 2}, "softmax weights");
  expect_close((*r)[0], {w0 * 1 + (1 - w0) * 3}, {1, 1, 1, 1}, "Y default scale");
}

TEST(Attention, CausalWithPast) {
  // Sq = 2 new queries after 1 past entry: query i sees positions j <= i + 1 of T = 3.
  const Tensor q = f32({1, 1, 2, 1}, {0, 0});  // zero scores: uniform weights over what is visible
  const Tensor k = f32({1, 1, 2, 1}, {5, 6}), v = f32({1, 1, 2, 1}, {20, 30});
  const Tensor pk = f32({1, 1, 1, 1}, {4}), pv = f32({1, 1, 1, 1}, {10});
  AttributeMap a;
  a["is_causal"] = attr_i(1);
  auto r = run(make_node(Op::Attention, 6, 3, a), {&q, &k, &v, kNone, &pk, &pv}, 23);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  expect_close((*r)[0], {15, 20}, {1, 1, 2, 1}, "causal Y");
  expect_close((*r)[1], {4, 5, 6}, {1, 1, 3, 1}, "present_key");
  expect_close((*r)[2], {10, 20, 30}, {1, 1, 3, 1}, "present_value");
}

TEST(Attention, MasksBoolFloatPaddedAndNonpad) {
  const Tensor q = random_tensor(DType::F32, {2, 2, 3, 4}), k = random_tensor(DType::F32, {2, 2, 5, 4}),
               v = random_tensor(DType::F32, {2, 2, 5, 3});
  // bool mask [3, 4] (shorter than T = 5: column 4 is masked) vs the equivalent additive mask
  std::vector<uint8_t> keep = {1, 0, 1, 1, 1, 1, 0, 0, 0, 1, 1, 1};
  Tensor mb = Tensor::empty(DType::Bool, {3, 4});
  std::vector<float> add;
  for (size_t i = 0; i < keep.size(); ++i) {
    mb.data<bool>()[i] = keep[i] != 0;
    add.push_back(keep[i] ? 0.0f : -std::numeric_limits<float>::infinity());
  }
  const Tensor mf = f32({3, 4}, add);
  auto rb = run(make_node(Op::Attention, 4, 1), {&q, &k, &v, &mb}, 23);
  auto rf = run(make_node(Op::Attention, 4, 1), {&q, &k, &v, &mf}, 23);
  ASSERT_TRUE(rb.ok()) << rb.status().to_string();
  ASSERT_TRUE(rf.ok()) << rf.status().to_string();
  expect_close((*rb)[0], values((*rf)[0]), {2, 2, 3, 3}, "bool mask = -inf mask");
  // Row 0 keeps columns 0, 2, 3 only: Y equals attention over exactly those keys.
  const double sc = 0.5;  // 1/sqrt(4)
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t h = 0; h < 2; ++h) {
      double w[3], sum = 0;
      const int64_t cols[3] = {0, 2, 3};
      for (int c = 0; c < 3; ++c) {
        double s = 0;
        for (int64_t e = 0; e < 4; ++e)
          s += q.get_f64(((b * 2 + h) * 3) * 4 + e) * k.get_f64(((b * 2 + h) * 5 + cols[c]) * 4 + e);
        sum += w[c] = std::exp(s * sc);
      }
      for (int64_t e = 0; e < 3; ++e) {
        double y = 0;
        for (int c = 0; c < 3; ++c) y += w[c] / sum * v.get_f64(((b * 2 + h) * 5 + cols[c]) * 3 + e);
        EXPECT_NEAR((*rb)[0].get_f64(((b * 2 + h) * 3) * 3 + e), y, 1e-5);
      }
    }
  // nonpad_kv_seqlen [4, 4] masks column 4 just like the short mask did.
  Tensor mf5 = f32({3, 5}, std::vector<float>(15, 0.0f));
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t j = 0; j < 4; ++j) mf5.set_f64(i * 5 + j, add[i * 4 + j]);
  const Tensor nonpad = Tensor::from_vector<int64_t>(DType::I64, {2}, {4, 4});
  auto rn = run(make_node(Op::Attention, 7, 1), {&q, &k, &v, &mf5, kNone, kNone, &nonpad}, 24);
  ASSERT_TRUE(rn.ok()) << rn.status().to_string();
  expect_close((*rn)[0], values((*rf)[0]), {2, 2, 3, 3}, "nonpad_kv_seqlen");
}

TEST(Attention, GqaEqualsRepeatedHeadsAnd3DEquals4D) {
  // Hq = 4 query heads share Hkv = 2 KV heads in consecutive pairs: same as MHA over K/V heads
  // repeated [h0, h0, h1, h1].
  const Tensor q = random_tensor(DType::F32, {1, 4, 2, 3}), k = random_tensor(DType::F32, {1, 2, 3, 3}),
               v = random_tensor(DType::F32, {1, 2, 3, 2});
  Tensor k4 = Tensor::empty(DType::F32, {1, 4, 3, 3}), v4 = Tensor::empty(DType::F32, {1, 4, 3, 2});
  for (int64_t h = 0; h < 4; ++h) {
    for (int64_t i = 0; i < 9; ++i) k4.set_f64(h * 9 + i, k.get_f64((h / 2) * 9 + i));
    for (int64_t i = 0; i < 6; ++i) v4.set_f64(h * 6 + i, v.get_f64((h / 2) * 6 + i));
  }
  AttributeMap a;
  a["softcap"] = attr_f(0.7f);
  auto g = run(make_node(Op::Attention, 3, 1, a), {&q, &k, &v}, 23);
  auto m = run(make_node(Op::Attention, 3, 1, a), {&q, &k4, &v4}, 23);
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  expect_close((*g)[0], values((*m)[0]), {1, 4, 2, 2}, "GQA");

  // 3-D: [B, S, H*D] per input, heads from the attributes; Y is [B, Sq, Hq*Dv].
  auto to3 = [](const Tensor& t) {
    const int64_t H = t.dim(1), S = t.dim(2), D = t.dim(3);
    Tensor o = Tensor::empty(DType::F32, {1, S, H * D});
    for (int64_t h = 0; h < H; ++h)
      for (int64_t s = 0; s < S; ++s)
        for (int64_t e = 0; e < D; ++e) o.set_f64(s * H * D + h * D + e, t.get_f64((h * S + s) * D + e));
    return o;
  };
  const Tensor q3 = to3(q), k3 = to3(k), v3 = to3(v);
  a["q_num_heads"] = attr_i(4);
  a["kv_num_heads"] = attr_i(2);
  auto r3 = run(make_node(Op::Attention, 3, 1, a), {&q3, &k3, &v3}, 23);
  ASSERT_TRUE(r3.ok()) << r3.status().to_string();
  expect_close((*r3)[0], values(to3((*g)[0])), {1, 2, 8}, "3-D");
}

TEST(Attention, SoftcapAndQkModes) {
  const Tensor q = f32({1, 1, 1, 1}, {2}), k = f32({1, 1, 2, 1}, {1, -3}), v = f32({1, 1, 2, 1}, {1, 2});
  const Tensor mask = f32({1, 2}, {0.5f, 0});
  AttributeMap a;
  a["scale"] = attr_f(1.0f);
  a["softcap"] = attr_f(4.0f);
  const double raw[2] = {2, -6}, capped[2] = {4 * std::tanh(0.5), 4 * std::tanh(-1.5)};
  const double biased[2] = {capped[0] + 0.5, capped[1]};
  const double w0 = 1 / (1 + std::exp(biased[1] - biased[0]));
  const std::vector<std::vector<double>> want = {
      {raw[0], raw[1]}, {capped[0], capped[1]}, {biased[0], biased[1]}, {w0, 1 - w0}};
  for (int64_t mode = 0; mode < 4; ++mode) {
    a["qk_matmul_output_mode"] = attr_i(mode);
    auto r = run(make_node(Op::Attention, 4, 4, a), {&q, &k, &v, &mask}, 23);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    expect_close((*r)[3], want[mode], {1, 1, 1, 2}, "qk_matmul_output mode " + std::to_string(mode));
    expect_close((*r)[0], {w0 + 2 * (1 - w0)}, {1, 1, 1, 1}, "Y");
  }
}

TEST(Attention, HalfTypes) {
  const Tensor q = random_tensor(DType::F32, {1, 2, 3, 4}), k = random_tensor(DType::F32, {1, 2, 5, 4}),
               v = random_tensor(DType::F32, {1, 2, 5, 4});
  for (DType dt : {DType::F16, DType::BF16}) {
    const Tensor qh = q.cast(dt), kh = k.cast(dt), vh = v.cast(dt);
    const Tensor qf = qh.cast(DType::F32), kf = kh.cast(DType::F32), vf = vh.cast(DType::F32);
    auto rh = run(make_node(Op::Attention, 3, 1), {&qh, &kh, &vh}, 23);
    auto rf = run(make_node(Op::Attention, 3, 1), {&qf, &kf, &vf}, 23);
    ASSERT_TRUE(rh.ok()) << rh.status().to_string();
    ASSERT_TRUE(rf.ok()) << rf.status().to_string();
    EXPECT_EQ((*rh)[0].dtype(), dt);
    expect_close((*rh)[0], values((*rf)[0]), {1, 2, 3, 4}, std::string(dtype_name(dt)));
  }
}

TEST(Attention, Errors) {
  const Tensor q3 = random_tensor(DType::F32, {1, 2, 6}), k3 = random_tensor(DType::F32, {1, 2, 6});
  EXPECT_NE(error_of(make_node(Op::Attention, 3, 1, {}, "attn"), {&q3, &k3, &k3}, 23)
                .find("[Attention] node 'attn': 3-D Q/K/V need positive q_num_heads and kv_num_heads"),
            std::string::npos);
  AttributeMap a;
  a["q_num_heads"] = attr_i(3);
  a["kv_num_heads"] = attr_i(2);
  const Tensor k3b = random_tensor(DType::F32, {1, 2, 4});  // head size 2, like Q's 6 / 3
  EXPECT_NE(error_of(make_node(Op::Attention, 3, 1, a), {&q3, &k3b, &k3b}, 23).find("not a multiple"),
            std::string::npos);
  const Tensor q = random_tensor(DType::F32, {1, 2, 2, 4}), k = random_tensor(DType::F32, {1, 2, 3, 4});
  const Tensor pk = random_tensor(DType::F32, {1, 2, 1, 4});
  EXPECT_NE(error_of(make_node(Op::Attention, 5, 1), {&q, &k, &k, kNone, &pk}, 23).find("together"),
            std::string::npos);
  const Tensor kd = random_tensor(DType::F32, {1, 2, 3, 5});
  EXPECT_NE(error_of(make_node(Op::Attention, 3, 1), {&q, &kd, &kd}, 23).find("head size"), std::string::npos);
  const Tensor long_mask = random_tensor(DType::F32, {2, 4});
  EXPECT_NE(error_of(make_node(Op::Attention, 4, 1), {&q, &k, &k, &long_mask}, 23).find("exceeds"),
            std::string::npos);
  const Tensor bad_mask = random_tensor(DType::F32, {3, 3});
  EXPECT_NE(error_of(make_node(Op::Attention, 4, 1), {&q, &k, &k, &bad_mask}, 23).find("does not broadcast"),
            std::string::npos);
  const Tensor nonpad = Tensor::from_vector<int64_t>(DType::I64, {1}, {7});
  EXPECT_NE(error_of(make_node(Op::Attention, 7, 1), {&q, &k, &k, kNone, kNone, kNone, &nonpad}, 24)
                .find("nonpad_kv_seqlen[0] = 7 is outside [0, 3]"),
            std::string::npos);
}

// ---- load-time inference and FLOPs ------------------------------------------------------------

constexpr int64_t kN = kFirstSymbolDim;  // symbolic batch "N"
constexpr int64_t kS = kFirstSymbolDim - 1;  // symbolic sequence "S"

ValueInfo vi(DType dt, Shape s) {
  return ValueInfo{dt, true, std::move(s), nullptr};
}

Result<std::vector<ValueInfo>> infer_all(const Node& n, std::vector<ValueInfo>& ins, int opset) {
  std::vector<const ValueInfo*> p;
  for (auto& v : ins) p.push_back(v.dtype == DType::Undefined ? nullptr : &v);
  return infer_node(n, p, opset);
}

TEST(TransformerInference, SymbolicDimsPropagate) {
  std::vector<ValueInfo> rms = {vi(DType::F16, {kN, kS, 64}), vi(DType::F16, {64})};
  auto r = infer_all(make_node(Op::RMSNormalization, 2, 1), rms, 23);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ((*r)[0].shape, (Shape{kN, kS, 64}));
  EXPECT_EQ((*r)[0].dtype, DType::F16);

  AttributeMap heads;
  heads["q_num_heads"] = attr_i(8);
  heads["kv_num_heads"] = attr_i(2);
  std::vector<ValueInfo> a3 = {vi(DType::F32, {kN, kS, 64}), vi(DType::F32, {kN, kS, 16}),
                               vi(DType::F32, {kN, kS, 24})};
  r = infer_all(make_node(Op::Attention, 3, 4, heads), a3, 23);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ((*r)[0].shape, (Shape{kN, kS, 96}));  // 8 heads x v_head 12
  EXPECT_EQ((*r)[1].shape, (Shape{kN, 2, kS, 8}));
  EXPECT_EQ((*r)[2].shape, (Shape{kN, 2, kS, 12}));
  EXPECT_EQ((*r)[3].shape, (Shape{kN, 8, kS, kS}));

  // with a cache the total length past + S is unknown at load time, the rest stays symbolic
  std::vector<ValueInfo> a4 = {vi(DType::F32, {kN, 8, kS, 16}), vi(DType::F32, {kN, 2, kS, 16}),
                               vi(DType::F32, {kN, 2, kS, 16}), ValueInfo{},
                               vi(DType::F32, {kN, 2, 5, 16}), vi(DType::F32, {kN, 2, 5, 16})};
  r = infer_all(make_node(Op::Attention, 6, 3), a4, 23);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ((*r)[0].shape, (Shape{kN, 8, kS, 16}));
  EXPECT_EQ((*r)[1].shape, (Shape{kN, 2, kUnknownDim, 16}));
}

TEST(TransformerFlops, HandCounted) {
  // Attention: Q [2,4,3,8], K [2,2,6,8], V [2,2,6,5]: 144 scores; Q K^T 2*144*8, P V 2*144*5,
  // scale/bias/softmax 5*144.
  std::vector<ValueInfo> a = {vi(DType::F32, {2, 4, 3, 8}), vi(DType::F32, {2, 2, 6, 8}), vi(DType::F32, {2, 2, 6, 5})};
  const Node n = make_node(Op::Attention, 3, 1);
  auto r = infer_all(n, a, 23);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  std::vector<const ValueInfo*> in = {&a[0], &a[1], &a[2]}, out = {&(*r)[0]};
  EXPECT_DOUBLE_EQ(op_def(Op::Attention).flops(FlopsContext{n, in, out}), 2304 + 1440 + 720);
  std::vector<const ValueInfo*> rin = {&a[0]};
  EXPECT_DOUBLE_EQ(op_def(Op::RMSNormalization).flops(FlopsContext{n, rin, {}}), 4 * 192);
  EXPECT_DOUBLE_EQ(op_def(Op::RotaryEmbedding).flops(FlopsContext{n, rin, {}}), 3 * 192);
}

}  // namespace
}  // namespace gpuopt
