// Quantized linears kept packed on the GPU for the W4A16/W8A16 kernels (llm_kernels.h
// gemv_quant): the parts of a fused projection (q|k|v, gate|up) are concatenated along N into one
// GPTQ-layout weight on the host — AWQ repacked, scales converted to the compute dtype — and
// uploaded once. Parts that cannot share one layout (act-order g_idx across several parts, float
// weights, mixed group sizes) are not packed and keep the dequantized path; a single act-order
// part (o_proj, down_proj) keeps its g_idx.
//
//   HostPacked h;
//   if (pack_fused({q, k, v}, DType::F16, &h)) ... upload h.qweight, h.qzeros, h.scales
#pragma once

#include <cstdint>
#include <vector>

#include "core/dtype.h"
#include "llm/checkpoint.h"

namespace gpuopt::llm::cuda {

struct HostPacked {
  bool fp8 = false;               // FP8 (e4m3) weights: fp8_w and fp8_scale, the rest unused
  std::vector<uint8_t> fp8_w;     // [N, K] e4m3
  std::vector<float> fp8_scale;   // [N] (a per-tensor scale repeated over its rows)
  std::vector<uint32_t> qweight;  // [K*bits/32, N]
  std::vector<uint32_t> qzeros;   // [groups, N*bits/32]
  std::vector<uint16_t> scales;   // [groups, N] in the compute dtype (f16 or bf16 bits)
  std::vector<int32_t> g_idx;     // [K] act-order groups (a single part only), else empty
  int bits = 4;
  int64_t group_size = 0, N = 0, K = 0;
  bool zero_minus_one = false;
};

// False (and `out` untouched) when the parts cannot be packed together for dtype `dt`. FP8 parts
// are concatenated along rows (N and K multiples of 16, cuBLASLt's FP8 rule).
bool pack_fused(const std::vector<const WeightView*>& parts, DType dt, HostPacked* out);

}  // namespace gpuopt::llm::cuda
