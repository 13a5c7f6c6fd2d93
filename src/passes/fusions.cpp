#include "passes/fusions.h"

#include <algorithm>
#include <iterator>

namespace gpuopt {

std::span<const FusionInfo> fusion_table() {
  static constexpr FusionInfo kTable[] = {
      {"conv", "Conv + Add + Relu/HardSwish/SiLU -> FusedConv"},
      {"matmul_bias", "MatMul + Add -> Gemm"},
      {"gelu", "GELU written op by op -> Gelu"},
      {"layernorm", "LayerNorm written op by op -> LayerNormalization"},
      {"attention", "MatMul / Softmax / MatMul -> Attention"},
      {"gemm_activation", "Gemm + Relu/Gelu -> FusedGemm (activation in the cuBLASLt epilogue)"},
      {"skip_layernorm", "residual Add + LayerNormalization -> SkipLayerNormalization"},
      {"transpose", "Transposes around attention sunk, merged and cancelled"},
      {"nhwc", "the channels-last layout pass of CUDA fp16/bf16 sessions"},
      {"qdq", "QDQ MatMul/Gemm/Conv -> Int8Gemm/Int8Conv at CUDA --precision int8"},
      {"gemm_scale", "a per-column constant Mul after a Gemm folded into its weights"},
      {"fp8_chain", "--precision fp8: an Fp8Gemm writing the next one's e4m3 input"},
      {"qdq_attention", "--precision int8: attention's activation x activation MatMuls read float"},
      {"int8_residual", "--precision int8: Int8Conv + Int8Add as one residual Int8Conv"},
      {"se_mean", "squeeze-excitation's mean inside the channels-last depthwise conv"},
      {"int8_epilogue", "--precision int8: Relu/Gelu, residual Add and quantize in the Int8Gemm epilogue"},
      {"fp8_norm", "--precision fp8: SkipLayerNormalization writes the Fp8Gemms' e4m3 input"},
      {"int8_norm", "--precision int8: SkipLayerNormalization writes the int8 tensor"},
      {"fp8_lone", "--precision fp8: a GEMM with N < 2048 and its own quantize pass kept in fp16"},
      {"dw_prologue", "SiLU/HardSwish applied by the channels-last depthwise conv that reads it"},
      {"merge_qkv", "an attention's Q, K and V projections as one GEMM"},
      {"attention_mask", "CUDA: a [B,1,1,S] mask expanded over the query rows once"},
      {"qdq_pool", "--precision int8: MaxPool before its quantize round trip"},
      {"qdq_requant", "--precision int8: a quantize of a dequantize with the same scale dropped"},
      {"nhwc_entry", "CUDA fp16/bf16: a channels-last region's Cast + entry Transpose as one ToNhwc"},
      {"conv1d", "a 1-D Conv as a 2-D one of unit height"},
      {"roll", "torch.roll's Slice + Concat pairs as one Gather (Swin's cyclic shift)"},
      {"space_to_depth", "four parity Slices + Concat as one Transpose (Swin's patch merging, YOLOv5's Focus)"},
  };
  return kTable;
}

bool is_fusion_name(std::string_view name) {
  const auto t = fusion_table();
  return std::any_of(t.begin(), t.end(), [&](const FusionInfo& f) { return f.name == name; });
}

}  // namespace gpuopt
