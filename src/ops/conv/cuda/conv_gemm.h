// A channels-last 1x1 convolution (stride 1, no padding, group 1) is a matrix product:
// y[n*h*w, m] = x[n*h*w, c] @ w[m, c]^T (+ bias[m]). NhwcFusedConv runs those without an activation
// and without z through cuBLASLt with the bias in the GEMM's epilogue (ops/matmul/cuda/matmul_lt.h),
// where cuDNN's fused call takes no bias with an identity activation except with one algorithm, and
// otherwise the plain conv plus one epilogue pass over y would add it. The fuse_dw_prologue pass
// leaves such convs behind (their SiLU/HardSwish moved into the depthwise conv that reads them),
// and the unactivated projection convs of MBConv blocks are such convs too.
// GPUOPT_CONV_GEMM=0 keeps them on cuDNN (an A/B).
#pragma once

#include "backends/cuda/cuda_ops.h"
#include "ops/conv/conv_activation.h"
#include "ops/conv/cuda/cudnn_conv.h"

namespace gpuopt::cuda {

// key is channels-last f16/bf16, 1x1, stride 1, pads 0, group 1; no activation, no z; and the
// switch is on.
bool conv_gemm_applies(const ConvKey& key, ConvAct act, bool has_z);

// x [n, h, w, c], w [m, 1, 1, c], b [m] or null, y [n, h, w, m].
Status run_conv_gemm(CudaKernelContext& k, const ConvKey& key, const void* x, const void* w, const void* b, void* y);

}  // namespace gpuopt::cuda
