// Round-to-nearest quantization of one [N, K] f32 weight and its packing into the published
// layouts (config.h WeightQuant): what `gpuopt quantize` writes for a model folder. The packed
// form and the dequantized values come from the same integers, so the report's error is exactly
// what a loader will see.
//
//   IntQuantized q = quantize_int(w.data(), N, K, /*bits=*/4, /*group=*/128, IntRounding::GptqSym);
//   PackedInt p = pack_gptq(q, /*zero_minus_one=*/true);   // qweight, qzeros, scales, g_idx
#pragma once

#include <cstdint>
#include <vector>

namespace gpuopt::llm {

enum class IntRounding {
  GptqSym,   // AutoGPTQ sym: scale = 2 max|w| / (2^b - 1), zero = 2^(b-1)
  GptqAsym,  // AutoGPTQ asym: range [min(w, 0), max(w, 0)], zero = round(-min / scale)
  Awq,       // AutoAWQ: scale = (max - min) / (2^b - 1), zero = clamp(-round(min / scale))
};

struct IntQuantized {
  int bits = 4;
  int64_t N = 0, K = 0, group_size = 0, groups = 0;
  std::vector<uint8_t> q;         // [N, K], 0 .. 2^bits - 1
  std::vector<uint16_t> scales;   // f16 bits [groups, N]
  std::vector<uint8_t> zeros;     // [groups, N]
  std::vector<float> dequantized; // [N, K] f16-scale * (q - zero), in f32
};

// group_size -1: one group per row. Scales are rounded to f16 before the weights are divided by
// them (the stored scale is the one used).
IntQuantized quantize_int(const float* w, int64_t N, int64_t K, int bits, int64_t group_size, IntRounding r);

struct PackedInt {
  std::vector<int32_t> qweight, qzeros, g_idx;  // g_idx: GPTQ only
  std::vector<int64_t> qweight_shape, qzeros_shape;
};
// GPTQ: qweight [K*b/32, N] packed along K, qzeros [groups, N*b/32] along N (v1: zero - 1),
// g_idx [K] = k / group_size.
PackedInt pack_gptq(const IntQuantized& q, bool zero_minus_one);
// AWQ GEMM: qweight [K, N/8], qzeros [groups, N/8], columns in the order 0 2 4 6 1 3 5 7.
PackedInt pack_awq(const IntQuantized& q);

struct Fp8Quantized {
  std::vector<uint8_t> w;        // e4m3 [N, K]
  std::vector<float> scales;     // [N] (per channel) or [1]
  std::vector<float> dequantized;
};
Fp8Quantized quantize_fp8(const float* w, int64_t N, int64_t K, bool per_channel);

}  // namespace gpuopt::llm
