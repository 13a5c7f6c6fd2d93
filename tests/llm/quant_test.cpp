// Quantized weights at the library level: the e4m3 codec against its bit-level definition (all
// 256 codes, and round-to-nearest-even between them), quantization_config parsing and refusals,
// and GPTQ/AWQ packing read back through the loader's dequantize() equal to the quantizer's own
// dequantized values for every element (sym, asym, int8, int4, AWQ's interleave).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "llm/config.h"
#include "llm/quant_pack.h"
#include "llm/quantized.h"

namespace gpuopt::llm {
namespace {

// From the bit layout: sign, 4 exponent bits (bias 7), 3 mantissa bits; exponent 0 subnormal.
double e4m3_by_definition(int b) {
  const int s = b >> 7, e = (b >> 3) & 15, m = b & 7;
  if (e == 15 && m == 7) return NAN;
  const double v = e == 0 ? m / 8.0 * std::pow(2.0, -6) : (1 + m / 8.0) * std::pow(2.0, e - 7);
  return s ? -v : v;
}

TEST(LlmQuant, Fp8CodecMatchesTheDefinition) {
  std::vector<double> finite;
  for (int b = 0; b < 256; ++b) {
    const double want = e4m3_by_definition(b);
    const float got = fp8_e4m3_to_float(static_cast<uint8_t>(b));
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got)) << b;
      continue;
    }
    EXPECT_EQ(static_cast<double>(got), want) << b;
    if (want != 0 || b == 0) {  // every code round-trips (-0 reads back as +0's code or its own)
      EXPECT_EQ(float_to_fp8_e4m3(got), b) << b;
    }
    if (want >= 0) finite.push_back(want);
  }
  std::sort(finite.begin(), finite.end());
  EXPECT_EQ(finite.back(), 448.0);
  // Between neighbours: below the midpoint rounds down, above rounds up, the midpoint to the even code.
  for (size_t i = 0; i + 1 < finite.size(); ++i) {
    const double lo = finite[i], hi = finite[i + 1], mid = (lo + hi) / 2;
    EXPECT_EQ(fp8_e4m3_to_float(float_to_fp8_e4m3(static_cast<float>(lo + (mid - lo) * 0.5))), lo);
    EXPECT_EQ(fp8_e4m3_to_float(float_to_fp8_e4m3(static_cast<float>(mid + (hi - mid) * 0.5))), hi);
    const uint8_t m = float_to_fp8_e4m3(static_cast<float>(mid));
    EXPECT_EQ(m & 1, 0) << "tie at " << mid << " went to an odd code";
    EXPECT_EQ(float_to_fp8_e4m3(static_cast<float>(-mid)), m | 0x80);
  }
  EXPECT_EQ(fp8_e4m3_to_float(float_to_fp8_e4m3(1e6f)), 448.0f);  // saturates, no infinity
  EXPECT_EQ(fp8_e4m3_to_float(float_to_fp8_e4m3(-500.0f)), -448.0f);
}

TEST(LlmQuant, ParsesQuantizationConfigs) {
  auto g = parse_quant_config(R"({"quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": true,
                                  "sym": false})", "qc");
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  EXPECT_EQ(g->method, WeightQuant::Method::Gptq);
  EXPECT_TRUE(g->desc_act);
  EXPECT_FALSE(g->sym);
  EXPECT_TRUE(g->zero_minus_one);
  EXPECT_EQ(g->describe(), "gptq int4 g128 asym act-order");
  auto v2 = parse_quant_config(R"({"quant_method": "gptq", "bits": 8, "group_size": -1,
                                   "checkpoint_format": "gptq_v2"})", "qc");
  ASSERT_TRUE(v2.ok());
  EXPECT_FALSE(v2->zero_minus_one);
  auto a = parse_quant_config(R"({"quant_method": "awq", "w_bit": 4, "q_group_size": 64, "version": "GEMM"})", "qc");
  ASSERT_TRUE(a.ok()) << a.status().to_string();
  EXPECT_EQ(a->group_size, 64);
  auto f = parse_quant_config(R"({"quant_method": "compressed-tensors", "format": "float-quantized",
    "config_groups": {"group_0": {"targets": ["Linear"],
      "weights": {"num_bits": 8, "type": "float", "strategy": "channel", "symmetric": true, "dynamic": false},
      "input_activations": {"num_bits": 8, "type": "float", "strategy": "token", "symmetric": true, "dynamic": true}}}})",
                              "qc");
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  EXPECT_TRUE(f->fp8_per_channel);
  EXPECT_TRUE(f->fp8_dynamic_input);
  EXPECT_FALSE(f->fp8_static_input);

  struct Bad {
    const char* json;
    const char* says;
  };
  for (const Bad& b : {
           Bad{R"({"quant_method": "bitsandbytes"})", "quant_method 'bitsandbytes' is not supported"},
           Bad{R"({"quant_method": "exl2"})", "quant_method 'exl2' is not supported"},
           Bad{R"({"bits": 4})", "'quant_method' is missing"},
           Bad{R"({"quant_method": "gptq", "bits": 3})", "gptq with 3 bits"},
           Bad{R"({"quant_method": "gptq", "bits": 4, "group_size": 100})", "group_size 100"},
           Bad{R"({"quant_method": "gptq", "bits": 4, "is_marlin_format": true})", "marlin"},
           Bad{R"({"quant_method": "awq", "bits": 4, "group_size": 128, "version": "exllama"})", "version 'exllama'"},
           Bad{R"({"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": false})", "zero_point"},
           Bad{R"({"quant_method": "compressed-tensors", "format": "pack-quantized", "config_groups": {}})",
               "pack-quantized"},
           Bad{R"({"quant_method": "compressed-tensors", "config_groups": {"g": {"weights":
               {"num_bits": 4, "type": "int", "strategy": "group"}}}})", "of type 'int' with 4 bits"},
           Bad{R"({"quant_method": "compressed-tensors", "config_groups": {"g": {"weights":
               {"num_bits": 8, "type": "float", "strategy": "block"}}}})", "strategy 'block'"},
       }) {
    auto r = parse_quant_config(b.json, "qc");
    ASSERT_FALSE(r.ok()) << b.json;
    EXPECT_NE(r.status().message().find(b.says), std::string::npos) << r.status().message();
    EXPECT_EQ(r.status().message().find('\n'), std::string::npos);
  }
}

// Tensors of one packed linear as the loader sees them.
struct Views {
  std::vector<WeightView> v;
  const WeightView* find(const std::string& n) const {
    for (const auto& w : v)
      if (w.name == n) return &w;
    return nullptr;
  }
};
template <class T>
WeightView view(const std::string& name, DType dt, const char* fd, std::vector<int64_t> shape, const std::vector<T>& d) {
  WeightView w;
  w.name = name;
  w.dtype = dt;
  w.file_dtype = fd;
  w.shape = std::move(shape);
  w.data = d.data();
  w.bytes = d.size() * sizeof(T);
  return w;
}

TEST(LlmQuant, PackedWeightsReadBackAsQuantized) {
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0, 0.05f);
  const int64_t N = 48, K = 128;
  std::vector<float> w(static_cast<size_t>(N * K));
  for (auto& x : w) x = nd(rng);
  struct Case {
    int bits;
    int64_t group;
    IntRounding r;
    bool awq;
  };
  for (const Case c : {Case{4, 32, IntRounding::GptqSym, false}, Case{4, 64, IntRounding::GptqAsym, false},
                       Case{8, -1, IntRounding::GptqSym, false}, Case{8, 32, IntRounding::GptqAsym, false},
                       Case{4, 32, IntRounding::Awq, true}}) {
    const IntQuantized q = quantize_int(w.data(), N, K, c.bits, c.group, c.r);
    const PackedInt p = c.awq ? pack_awq(q) : pack_gptq(q, true);
    Views vs;
    vs.v.push_back(view("l.qweight", DType::I32, "I32", p.qweight_shape, p.qweight));
    vs.v.push_back(view("l.qzeros", DType::I32, "I32", p.qzeros_shape, p.qzeros));
    vs.v.push_back(view("l.scales", DType::F16, "F16", {q.groups, N}, q.scales));
    if (!c.awq) vs.v.push_back(view("l.g_idx", DType::I32, "I32", {K}, p.g_idx));
    WeightQuant wq;
    wq.method = c.awq ? WeightQuant::Method::Awq : WeightQuant::Method::Gptq;
    wq.bits = c.bits;
    wq.group_size = c.group;
    wq.zero_minus_one = !c.awq;
    auto ql = find_quantized_linear([&](const std::string& n) { return vs.find(n); }, "l", wq, N, K);
    ASSERT_TRUE(ql.ok()) << ql.status().to_string();
    std::vector<float> got(w.size());
    dequantize(*ql, 0, got.size(), got.data());
    EXPECT_EQ(got, q.dequantized) << c.bits << " " << c.group;
    // A slice from the middle reads the same elements.
    std::vector<float> part(77);
    dequantize(*ql, 1000, part.size(), part.data());
    EXPECT_TRUE(std::equal(part.begin(), part.end(), q.dequantized.begin() + 1000));
    // Half a step at most from the original.
    for (int64_t n = 0; n < N; ++n)
      for (int64_t k = 0; k < K; ++k) {
        const int64_t g = k / q.group_size;
        const float s = Half::to_float(q.scales[static_cast<size_t>(g * N + n)]);
        const size_t e = static_cast<size_t>(n * K + k);
        // Half a step, plus what the f16 rounding of the scale moves the range's end by (15 or
        // 255 steps of 2^-11 relative).
        EXPECT_LE(std::fabs(got[e] - w[e]), s * (0.5f + static_cast<float>((1 << c.bits) - 1) / 2048.0f) + 1e-7f);
      }
    // A wrong packing shape is refused, naming the tensor.
    vs.v[0].shape[0] -= 1;
    auto bad = find_quantized_linear([&](const std::string& n) { return vs.find(n); }, "l", wq, N, K);
    ASSERT_FALSE(bad.ok());
    EXPECT_NE(bad.status().message().find("l.qweight"), std::string::npos) << bad.status().message();
  }
}

}  // namespace
}  // namespace gpuopt::llm
