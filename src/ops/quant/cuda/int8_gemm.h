// Int8Gemm on the GPU (int8_gemm.cpp, int8_gemm.cu): int8 x int8 -> int32 through
// cuBLASLt's tensor-core kernels (a simple kernel where cuBLASLt has none), then one epilogue
// pass: v = act(acc * a_scale * b_scale[n] + bias[n]) + residual in f32, stored as f32/f16, or
// as int8 of v / y_scale (round half to even, saturated).
#pragma once

#include "core/status.h"
#include "core/dtype.h"
#include "ops/quant/gemm_activation.h"

#include <cstdint>

typedef struct CUstream_st* cudaStream_t;

namespace gpuopt::cuda {

struct Int8Epilogue {
  int64_t m = 0, n = 0;
  DType dt = DType::F32;          // scales, bias, residual and (without y_scale) output: f32 or f16
  const void* a_scale = nullptr;  // device, 1 value
  const void* b_scale = nullptr;  // device, 1 or n values
  bool b_per_channel = false;
  const void* bias = nullptr;      // device, n values, or null
  quant::GemmAct act = quant::GemmAct::kNone;
  const void* residual = nullptr;  // device, [m, n], or null
  const void* y_scale = nullptr;   // device, 1 value: the output is int8; null: it is dt
};

// acc [m, n] int32 (row-major) -> y [m, n] of e.dt (or int8). Eight (or four) columns per
// thread with 16-byte loads where n and the pointers allow, one otherwise.
Status launch_int8_epilogue(const Int8Epilogue& e, const int32_t* acc, void* y, cudaStream_t s);
// acc[m, n] = A[m, k] . B[n, k]^T, int32 (the fallback when cuBLASLt has no int8 algorithm).
Status launch_int8_gemm_simple(int64_t m, int64_t n, int64_t k, const int8_t* a, const int8_t* b, int32_t* acc,
                               cudaStream_t s);

}  // namespace gpuopt::cuda
