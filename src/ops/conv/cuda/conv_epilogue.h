// The epilogue of a convolution in one pass over its output: y = act(y + bias[c] + z), with
// bias and z optional and act one of ops/conv/conv_activation.h (Relu, HardSwish, Swish) or none. FusedConv runs it after a plain cuDNN convolution
// where cuDNN's fused conv-bias-activation kernels are slower than the plain ones (ops_fusedconv.cpp).
#pragma once

#include "core/dtype.h"
#include "ops/conv/conv_activation.h"
#include "core/status.h"

#include <cstdint>

typedef struct CUstream_st* cudaStream_t;

namespace gpuopt::cuda {

// y: n elements, `channels` channels of `spatial` elements each (n = batch * channels * spatial);
// f32, f16 or bf16, computed in f32 and rounded once. Channels-last (NHWC) output: spatial = 1,
// the channel of element i is i % channels.
Status launch_conv_epilogue(DType dt, void* y, const void* bias, const void* z, int64_t n, int64_t channels,
                            int64_t spatial, ConvAct act, cudaStream_t s);

}  // namespace gpuopt::cuda
