// GPUOPT_CONV_ENGINE=graph (an A/B, off by default): channels-last fp16/bf16 NhwcFusedConv (group
// 1, Relu or no activation) through cuDNN's graph API with engine autotuning (TunedGraph,
// cudnn_graph_tune.h) instead of the legacy cudnnConvolutionBiasActivationForward with
// cudnnFindConvolutionForwardAlgorithm's choice: conv (f32 accumulation) -> + bias[m] -> + z ->
// [Relu] -> y, one graph per shape. fused_conv.cpp asks it first and runs its own path where it
// answers Unimplemented (no graph builds for the shape, or a built one failed to execute).
#pragma once

#include "backends/cuda/cuda_ops.h"
#include "ops/conv/cuda/cudnn_conv.h"

namespace gpuopt::cuda {

// x, w, y (and z) channels-last of key.dt; b [m] or null; z of y's shape or null.
Status run_conv_graph(CudaKernelContext& k, const ConvKey& key, bool relu, const void* x, const void* w, const void* b,
                      const void* z, void* y);

}  // namespace gpuopt::cuda
