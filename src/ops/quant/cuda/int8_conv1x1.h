// Int8Conv's residual form (fuse_int8_residual) for a 1x1, stride-1, unpadded channels-last
// convolution on Hopper: the convolution is a GEMM ([rows = N*H*W, C] int8 x [M, C] int8 weight,
// int32 sums), and one CUTLASS sm_90a kernel (int8_conv1x1_sm90a.cu) does it with the whole
// epilogue inside: per output element, with int8_conv.h's alpha[m] and beta[m],
//
//   v = acc * alpha[m] + beta[m] [-> Relu];   c = sat8(rint(v))          (the conv's int8 code)
//   r = c * res_scale + z * z_scale [-> Relu];   y = sat8(rint(r))       (the residual add)
//
// where cuDNN's path writes c and Int8Add's kernel reads it back (ResNet-50's bottleneck ends:
// 1.3 ms of 5.9 at b256). The same arithmetic as the cuDNN residual graph and Int8Add's kernel
// (products by the pre-divided scales, rounding half to even), so the CPU reference is met to one
// code. Measured apart in an A/B run (docs/perf-notes.md; the 16 conv3 + add of ResNet-50 at b256: 2.10 ms
// against 2.60 for cuDNN's conv3 and Int8Add).
#pragma once

#include "core/status.h"

#include <cstddef>
#include <cstdint>

typedef struct CUstream_st* cudaStream_t;

namespace gpuopt::cuda {

struct Int8Conv1x1Residual {
  int64_t rows = 0, c = 0, m = 0;  // N*H*W, input channels, output channels (multiples of 16)
  const int8_t* x = nullptr;       // [rows, c]
  const int8_t* w = nullptr;       // [m, c]
  const int8_t* z = nullptr;       // [rows, m]: the residual
  const float* alpha = nullptr;    // [m], device
  const float* beta = nullptr;     // [m], device
  float res_scale = 1.f;           // y_scale / out_scale
  float z_scale = 1.f;             // z_scale / out_scale
  bool relu = false;               // before the residual
  bool residual_relu = false;      // after it
  int8_t* y = nullptr;             // [rows, m]
  int device = 0, sm_count = 0;    // the persistent grid
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
};

// This build has the kernel and `device` runs it (compute capability 9.0); sets *sm_count.
bool int8_conv1x1_device(int device, int* sm_count);
// Workspace bytes the kernel needs for this problem (0 without the kernel).
size_t int8_conv1x1_workspace(const Int8Conv1x1Residual& a);
// Unimplemented where the kernel does not apply (not Hopper, sizes), an error where CUTLASS fails.
Status launch_int8_conv1x1_residual(const Int8Conv1x1Residual& a, cudaStream_t s);

}  // namespace gpuopt::cuda
