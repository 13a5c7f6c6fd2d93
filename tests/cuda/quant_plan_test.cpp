// The CUDA quantization arithmetic (quant_math.h, the code quant.cu and qmatmul.cu run) on the
// host against the CPU reference: QuantizeLinear with f32/f16/bf16 inputs and scales (quotient
// rounded to the scale's type, ties to even, saturation), DequantizeLinear, QLinearMatMul's
// requantization. Needs no GPU.
#include "ops/quant/cuda/quant_math.h"
#include "ir/eval.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

namespace gpuopt::cuda {
namespace {

Node make_node(Op op, const char* type, size_t inputs) {
  Node n;
  n.op = op;
  n.op_type = type;
  n.name = "node";
  for (size_t i = 0; i < inputs; ++i) n.inputs.push_back(static_cast<ValueId>(i));
  n.outputs.push_back(static_cast<ValueId>(inputs));
  return n;
}
QFloat qf(DType t) { return t == DType::F16 ? QFloat::kF16 : t == DType::BF16 ? QFloat::kBF16 : QFloat::kF32; }

TEST(CudaQuantPlan, QuantizeMatchesCpu) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<double> u(-3, 3);
  for (DType dt : {DType::F32, DType::F16, DType::BF16})
    for (DType q : {DType::U8, DType::I8})
      for (double scale : {0.02, 0.015625, 0.0123, 1.0}) {
        SCOPED_TRACE(std::string(dtype_name(dt)) + " " + std::string(dtype_name(q)) + " " + std::to_string(scale));
        Tensor x = Tensor::empty(dt, {400});
        for (int64_t i = 0; i < 400; ++i) x.set_f64(i, i < 24 ? (i - 12) * 0.5 * scale : u(rng));  // ties first
        Tensor s = Tensor::empty(dt, {}), zp = Tensor::empty(q, {});
        s.set_f64(0, scale);
        zp.set_f64(0, q == DType::U8 ? 128 : -3);
        auto ref = eval_node(make_node(Op::QuantizeLinear, "QuantizeLinear", 3), {&x, &s, &zp}, 19);
        ASSERT_TRUE(ref.ok()) << ref.status().to_string();
        const double lo = q == DType::U8 ? 0 : -128, hi = q == DType::U8 ? 255 : 127;
        int bad = 0;
        for (int64_t i = 0; i < 400; ++i) {
          const double got = quantize_value(x.get_f64(i), s.get_f64(0), qf(dt), zp.get_f64(0), lo, hi);
          if (got != (*ref)[0].get_f64(i) && ++bad <= 5)
            ADD_FAILURE() << "x " << x.get_f64(i) << ": got " << got << " want " << (*ref)[0].get_f64(i);
        }
        EXPECT_EQ(bad, 0);
      }
}

// The f32 form the vectorized per-tensor kernel runs equals the f64 form bit for bit: random
// f16/bf16/f32 values and scales over many binades, the ties of each scale, and quotients at
// f16/bf16 rounding edges (x = (k + 0.5 ulp) * scale).
TEST(CudaQuantPlan, QuantizeInF32EqualsF64) {
  std::mt19937 rng(8);
  std::uniform_real_distribution<double> mant(-1, 1);
  std::uniform_int_distribution<int> ex(-12, 4);
  int64_t checked = 0, bad = 0;
  for (DType dt : {DType::F32, DType::F16, DType::BF16}) {
    Tensor x = Tensor::empty(dt, {1}), s = Tensor::empty(dt, {1});
    for (int i = 0; i < 200000; ++i) {
      s.set_f64(0, std::fabs(mant(rng)) * std::ldexp(1.0, ex(rng)) + 1e-6);
      const double sv = s.get_f64(0);
      const int kind = i % 3;
      const double k = std::floor(mant(rng) * 140);
      x.set_f64(0, kind == 0 ? mant(rng) * 130 * sv : kind == 1 ? (k + 0.5) * sv : (k + 0.5 + mant(rng) * 1e-3) * sv);
      for (double zp : {0.0, -3.0, 128.0}) {
        const double lo = zp == 128.0 ? 0 : -128, hi = zp == 128.0 ? 255 : 127;
        const double want = quantize_value(x.get_f64(0), sv, qf(dt), zp, lo, hi);
        const float got = quantize_value_f32(static_cast<float>(x.get_f64(0)), static_cast<float>(sv), qf(dt),
                                             static_cast<float>(zp), static_cast<float>(lo), static_cast<float>(hi));
        ++checked;
        if (static_cast<double>(got) != want && ++bad <= 5)
          ADD_FAILURE() << dtype_name(dt) << " x " << x.get_f64(0) << " scale " << sv << ": f32 " << got << " f64 " << want;
      }
    }
  }
  EXPECT_EQ(bad, 0) << "of " << checked;
}

TEST(CudaQuantPlan, DequantizeMatchesCpu) {
  std::mt19937 rng(6);
  for (DType dt : {DType::F32, DType::F16, DType::BF16}) {
    Tensor x = Tensor::empty(DType::I8, {256});
    for (int64_t i = 0; i < 256; ++i) x.set_f64(i, static_cast<double>(i - 128));
    Tensor s = Tensor::empty(dt, {}), zp = Tensor::empty(DType::I8, {});
    s.set_f64(0, 0.0173);
    zp.set_f64(0, -7);
    auto ref = eval_node(make_node(Op::DequantizeLinear, "DequantizeLinear", 3), {&x, &s, &zp}, 19);
    ASSERT_TRUE(ref.ok()) << ref.status().to_string();
    Tensor got = Tensor::empty(dt, {256});
    for (int64_t i = 0; i < 256; ++i) got.set_f64(i, dequantize_value(x.get_f64(i), zp.get_f64(0), s.get_f64(0)));
    for (int64_t i = 0; i < 256; ++i) EXPECT_EQ(got.get_f64(i), (*ref)[0].get_f64(i)) << dtype_name(dt) << " " << i;
  }
}

TEST(CudaQuantPlan, QLinearMatMulRequantizationMatchesCpu) {
  std::mt19937 rng(7);
  const int64_t M = 9, K = 33, N = 11;
  Tensor a = Tensor::empty(DType::U8, {M, K}), b = Tensor::empty(DType::U8, {K, N});
  std::uniform_int_distribution<int> u(0, 255);
  for (int64_t i = 0; i < a.numel(); ++i) a.set_f64(i, u(rng));
  for (int64_t i = 0; i < b.numel(); ++i) b.set_f64(i, u(rng));
  Tensor as = Tensor::empty(DType::F32, {M}), azp = Tensor::empty(DType::U8, {}), bs = Tensor::empty(DType::F32, {N}),
         bzp = Tensor::empty(DType::U8, {N}), ys = Tensor::empty(DType::F32, {}), yzp = Tensor::empty(DType::U8, {});
  for (int64_t i = 0; i < M; ++i) as.set_f64(i, 0.01 + 0.003 * i);
  for (int64_t i = 0; i < N; ++i) bs.set_f64(i, 0.002 + 0.0007 * i), bzp.set_f64(i, 100 + i);
  azp.set_f64(0, 128);
  ys.set_f64(0, 0.37);
  yzp.set_f64(0, 90);
  auto ref = eval_node(make_node(Op::QLinearMatMul, "QLinearMatMul", 8), {&a, &as, &azp, &b, &bs, &bzp, &ys, &yzp}, 10);
  ASSERT_TRUE(ref.ok()) << ref.status().to_string();
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      int64_t acc = 0;
      for (int64_t k = 0; k < K; ++k)
        acc += (static_cast<int64_t>(a.get_f64(m * K + k)) - 128) * (static_cast<int64_t>(b.get_f64(k * N + n)) - (100 + n));
      const double got = requantize(acc, as.get_f64(m), bs.get_f64(n), QFloat::kF32, 0.37f, 90, 0, 255);
      EXPECT_EQ(got, (*ref)[0].get_f64(m * N + n)) << m << "," << n;
    }
}

}  // namespace
}  // namespace gpuopt::cuda
