// ToNhwc on the GPU (to_nhwc.cpp, to_nhwc.cu): X [N, C, H, W] -> Y [N, H, W, cp], converted to
// Y's float type (round to nearest even), channels C.. zero; with a scale, each value through
// the quantize round trip (quant_math.h's arithmetic, as the QuantizeLinear and DequantizeLinear
// kernels); one pixel per thread.
#pragma once

#include "core/dtype.h"
#include "core/status.h"

#include <cstdint>

typedef struct CUstream_st* cudaStream_t;

namespace gpuopt::cuda {

struct ToNhwcArgs {
  int64_t n = 0, c = 0, h = 0, w = 0, cp = 0;
  DType in_dt = DType::F32, out_dt = DType::F16;  // each f32, f16 or bf16
  const void* x = nullptr;
  void* y = nullptr;
  const void* scale = nullptr;  // one value of out_dt: the quantize round trip; null: none
  const void* zero_point = nullptr;  // one value of zp_dt (i8 or u8); null: 0, u8
  DType zp_dt = DType::U8;
};

Status launch_to_nhwc(const ToNhwcArgs& a, cudaStream_t s);

}  // namespace gpuopt::cuda
