// Reduced precision (fp16 / bf16) for a graph whose float tensors are f32. The model's f32
// inputs and outputs stay f32 at the boundary (Cast nodes are inserted there), f32 constants
// feeding low-precision ops are converted once, on the host, and kernels accumulate in f32
// whatever their storage type. Which ops run in the low type (precision.cpp lists them):
//  - fp16: every op except keep_f32_ops() (range: sums and powers that overflow 65504);
//  - bf16: only MatMul, Gemm, Conv, ConvTranspose and Einsum, plus data movement fed by them;
//    everything else stays f32, as in PyTorch's autocast. bf16 keeps 8 mantissa bits: rounding
//    every elementwise result costs a 12-block ViT 1.4e-2 relative L2 error, this split 0.9e-2.
//
//   GPUOPT_ASSIGN_OR_RETURN(PassStats st, convert_precision(&graph, DType::F16));
#pragma once

#include "passes/passes.h"

#include <string_view>
#include <vector>

namespace gpuopt {

Result<PassStats> convert_precision(Graph* g, DType low);
// The ops that stay in f32 under --precision fp16/bf16, with the reason for each.
const std::vector<std::pair<std::string_view, std::string_view>>& keep_f32_ops();

}  // namespace gpuopt
