// A channels-last 1x1 convolution (stride 1, no pads, group 1) is one matrix product:
// y[N*H*W, M] = x[N*H*W, C] @ w[M, C]^T, with the bias, the residual z and Relu inside cuBLASLt's
// epilogue (y = relu(x w^T + z + bias)). cuDNN runs such a conv through its own GEMM kernels when
// it has only bias and Relu, but with a residual z it takes an implicit-GEMM kernel that on the
// H200 ran ResNet-50's 56x56 64->256 conv + z + Relu at batch 256 in 473 us, twice its memory
// time. fused_conv.cpp times both routes on a shape's first eager run and keeps the faster
// (GPUOPT_CONV_GEMM: 1 timed, the default; 0 cuDNN only; force the GEMM wherever it applies).
#pragma once

#include "backends/cuda/cuda_ops.h"
#include "ops/conv/conv_activation.h"
#include "ops/conv/cuda/cudnn_conv.h"

#include <string>

namespace gpuopt::cuda {

// Whether the shape and epilogue can run as one cuBLASLt GEMM: channels-last f16/bf16, 1x1,
// stride 1, no pads, dilation 1, group 1, C and M multiples of 8, activation none or Relu
// (Relu needs a bias: cuBLASLt has no residual-then-Relu epilogue without one).
bool conv_gemm_applies(const ConvKey& key, ConvAct act, bool has_bias);

// y = act(x w^T + z + b) as above; b and z may be null.
Status run_conv_gemm(CudaKernelContext& k, const ConvKey& key, ConvAct act, const void* x, const void* w,
                     const void* b, const void* z, void* y);

// The route chosen for a shape: undecided until timed, then cuDNN or the GEMM. Kept per process
// and in the plan cache (plan_store.h) under `conv_gemm_entry`.
enum class ConvRoute : uint8_t { kUndecided, kCudnn, kGemm };
std::string conv_gemm_entry(const ConvKey& key, ConvAct act, bool has_bias, bool has_z);
ConvRoute conv_route(const std::string& entry);
void set_conv_route(const std::string& entry, ConvRoute route);

}  // namespace gpuopt::cuda
