// Reduced precision (fp16 / bf16) for a graph whose float tensors are f32: every op computes in
// the low type except those listed in kKeepF32Ops (precision.cpp: the one place that lists
// them), the model's f32 inputs and outputs stay f32 at the boundary (Cast nodes are inserted
// there), and f32 constants feeding low-precision ops are converted once, on the host.
// Kernels accumulate in f32 whatever their storage type.
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
