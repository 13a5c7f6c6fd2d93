// se_mean (se_mean.cpp): squeeze-excitation's spatial mean inside the depthwise conv.
//
//   GPUOPT_ASSIGN_OR_RETURN(PassStats st, fuse_se_mean(&graph));   // after layout_nhwc
#pragma once

#include "passes/passes.h"

namespace gpuopt {

// A channels-last depthwise NhwcFusedConv (group == C == M, f16/bf16) whose output Y is read by a
// ReduceMean over axes 1 and 2 (H, W) with keepdims: the ReduceMean goes, and its output becomes
// the conv's second output (Y's spatial mean, ops/conv/nhwc.cpp), which the depthwise kernel
// computes as it stores Y instead of reading Y again. Y's other readers are untouched.
// run_session_passes runs it after layout_nhwc unless GPUOPT_DISABLE_FUSION names `se_mean`.
Result<PassStats> fuse_se_mean(Graph* g);

}  // namespace gpuopt
