// Quantized linear weights as published checkpoints store them (config.h WeightQuant describes the
// three layouts): the checkpoint loader builds one QuantizedLinear per quantized projection,
// checking every tensor's dtype and shape against the config, and the runners read it through
// dequantize() (the CPU runner into f32, the CUDA runner's upload into its compute dtype).
//
//   const WeightView* w = ckpt->find("model.layers.0.mlp.down_proj.weight");
//   if (w->quant) dequantize(*w->quant, 0, w->quant->N * w->quant->K, out_f32);
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/status.h"
#include "llm/checkpoint.h"
#include "llm/config.h"

namespace gpuopt::llm {

struct QuantizedLinear {
  WeightQuant::Method method = WeightQuant::Method::None;
  int bits = 0;
  int64_t N = 0, K = 0;        // the logical weight is [N, K] (out, in)
  int64_t group_size = 0;      // effective: K when the config says -1
  int64_t groups = 0;
  bool zero_minus_one = false;  // GPTQ v1
  const WeightView* qweight = nullptr;   // GPTQ/AWQ int32; FP8: the F8_E4M3 [N, K] weight
  const WeightView* qzeros = nullptr;    // GPTQ/AWQ int32
  const WeightView* scales = nullptr;    // GPTQ/AWQ f16/bf16/f32 [groups, N]; FP8 weight_scale
  const WeightView* g_idx = nullptr;     // GPTQ, optional: int32 [K]
  const WeightView* input_scale = nullptr;  // FP8 static activation scale, optional
  size_t packed_bytes() const;  // bytes of every tensor above
};

// The quantized tensors of linear `base` ("model.layers.0.mlp.down_proj") in `lookup`'s tensors,
// checked against `q` and the logical shape [N, K]. NotFound when `base` is not quantized there
// (no qweight / an fp8 weight), any other error names the tensor and what is wrong.
Result<QuantizedLinear> find_quantized_linear(const std::function<const WeightView*(const std::string&)>& lookup,
                                              const std::string& base, const WeightQuant& q, int64_t N, int64_t K);

// Elements [first, first + count) of the row-major [N, K] weight, dequantized to f32 exactly as
// the formats define: GPTQ scale[g][n] * (q - zero) with g = g_idx[k] (or k / group_size), AWQ
// the same with its interleaved packing, FP8 e4m3 * weight_scale (per tensor or per row).
void dequantize(const QuantizedLinear& q, size_t first, size_t count, float* out);

// OCP fp8 e4m3 ("e4m3fn": no infinities, 0x7f/0xff NaN, max 448).
float fp8_e4m3_to_float(uint8_t b);
uint8_t float_to_fp8_e4m3(float f);  // round to nearest even, saturating to +-448

// A float checkpoint tensor read as f32 (F16, BF16, F32), or a quantized one dequantized.
std::vector<float> weight_to_f32(const WeightView& w);

// Element i of a checkpoint tensor: a f32/f16/bf16 value as float, an int32 word as its bits.
float load_float(const WeightView& w, size_t i);
uint32_t load_u32(const WeightView& w, size_t i);
// AWQ's GEMM packing: column n of a group of 8 sits in nibble kAwqNibble[n % 8] of its word.
inline constexpr int kAwqNibble[8] = {0, 4, 1, 5, 2, 6, 3, 7};

}  // namespace gpuopt::llm
