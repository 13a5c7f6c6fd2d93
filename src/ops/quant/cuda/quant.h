// QuantizeLinear / DequantizeLinear on the GPU, per tensor or per axis (blocked stays on the CPU).
// The arithmetic follows the CPU reference bit for bit: Quantize divides in double and rounds
// the quotient to the scale's float type (emulating the division in that type), rounds half to
// even, adds the zero point and saturates; Dequantize computes (x - zp) * scale in f32.
#pragma once

#include "backends/cuda/elementwise.h"

namespace gpuopt::cuda {

// Element i uses scale/zero point number (i / inner) % axis_dim (axis_dim = 1: per tensor).
struct QuantDesc {
  int64_t n = 0;
  int64_t axis_dim = 1;
  int64_t inner = 1;
};

// x: f32/f16/bf16; scale: f32/f16/bf16; zp (may be null) and y: u8/i8.
Status launch_quantize(DType x_dt, DType scale_dt, DType y_dt, const void* x, const void* scale, const void* zp, void* y,
                       const QuantDesc& d, cudaStream_t s);
// x and zp (may be null): u8/i8/i32; scale: f32/f16/bf16; y: f32/f16/bf16.
Status launch_dequantize(DType x_dt, DType scale_dt, DType y_dt, const void* x, const void* scale, const void* zp,
                         void* y, const QuantDesc& d, cudaStream_t s);

}  // namespace gpuopt::cuda
