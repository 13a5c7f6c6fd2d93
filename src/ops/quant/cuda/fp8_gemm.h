// Fp8Gemm on the GPU (fp8_gemm.cpp, fp8_gemm.cu): the activation quantized to e4m3 by our
// kernel (fp8_e4m3.h's rounding, x / a_scale, saturating), then a cuBLASLt FP8 tensor-core GEMM.
#pragma once

#include "core/dtype.h"
#include "core/status.h"

#include <cstdint>

typedef struct CUstream_st* cudaStream_t;

namespace gpuopt::cuda {

// q[i] = e4m3(x[i] / a_scale) for n elements of x (f32, f16 or bf16).
Status launch_fp8_quantize(DType dt, const void* x, int64_t n, float a_scale, uint8_t* q, cudaStream_t s);
// y[i] = bf16(x[i]) for n f16 values (a bias for cuBLASLt's bf16-C FP8 form).
Status launch_f16_to_bf16(const void* x, int64_t n, void* y, cudaStream_t s);
// *p = v on the device, in stream order (a kernel parameter, so a captured graph replays it).
Status launch_fp8_set_scalar(float* p, float v, cudaStream_t s);

}  // namespace gpuopt::cuda
