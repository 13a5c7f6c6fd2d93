// The cuDNN frontend graphs of Int8Conv (int8_conv.cpp runs them through TunedGraph): NHWC int8
// x and w, int32 accumulation on the tensor cores, and optionally the epilogue in the same graph.
#pragma once

#include "core/dtype.h"
#include "ops/conv/cuda/cudnn_conv.h"
#include "ops/conv/cuda/cudnn_graph_tune.h"

#include <memory>

namespace gpuopt::cuda {

// The graph's tensor uids (the variant pack's keys).
enum Int8ConvUid : int64_t { kI8X = 1, kI8W, kI8Alpha, kI8Beta, kI8Y, kI8Z, kI8ResScale, kI8ZScale };

struct Int8ConvGraphSpec {
  ConvKey key;
  // fused: conv -> * alpha[m] -> + beta[m] [-> Relu] -> out, with the conv's virtual output of
  // type conv_out (INT32, as cuDNN's int8 ConvScaleBiasAct sample, or FLOAT); else the
  // convolution alone into INT32.
  bool fused = true;
  cudnn_frontend::DataType_t conv_out = cudnn_frontend::DataType_t::INT32;
  bool relu = false;
  DType out = DType::I8;
  // The residual form (fused only): the epilogue above saturated and rounded to int8 steps
  // (QuantizeLinear at the conv's own scale, done in f32: clamp to [-128, 127], then x + 1.5*2^23
  // - 1.5*2^23, exact round half to even there), then * res_scale + Z (int8, Y's shape) *
  // z_scale (both [1,1,1,1] f32 tensors) [-> Relu] -> out.
  bool residual = false;
  bool residual_relu = false;
};

// The graph, not yet built (TunedGraph::build validates, lowers and plans it).
std::shared_ptr<cudnn_frontend::graph::Graph> make_int8_conv_graph(const Int8ConvGraphSpec& s);

}  // namespace gpuopt::cuda
