// fuse_dw_prologue (fuse_dw_prologue.cpp): a conv's SiLU/HardSwish moved into the depthwise conv
// that reads its output.
//
//   GPUOPT_ASSIGN_OR_RETURN(PassStats st, fuse_dw_prologue(&graph));   // after layout_nhwc, se_mean
#pragma once

#include "passes/passes.h"

namespace gpuopt {

// An NhwcFusedConv P with activation Swish or HardSwish, one output Y, Y not a graph output, and
// exactly one reader: a channels-last depthwise NhwcFusedConv D (group == C == M, f16/bf16) that
// reads Y as its X only, with no input_activation yet. P's activation moves to D's
// `input_activation` (ops/conv/conv_activation.h): P keeps its bias and any z and now writes the
// value before the activation; D applies the activation to each input value it reads. P's
// separate epilogue pass over Y goes (a 1x1 P runs as one cuBLASLt GEMM with the bias in its
// epilogue, ops/conv/cuda/conv_gemm.h). Relu producers stay: cuDNN's fused call applies Relu.
// run_session_passes runs it after se_mean unless GPUOPT_DISABLE_FUSION names `dw_prologue`.
Result<PassStats> fuse_dw_prologue(Graph* g);

}  // namespace gpuopt
