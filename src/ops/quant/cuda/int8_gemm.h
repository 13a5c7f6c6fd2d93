// Int8Gemm on the GPU (int8_gemm.cpp, int8_gemm.cu): int8 x int8 -> int32 through
// cuBLASLt's tensor-core kernels (a simple kernel where cuBLASLt has none), then one epilogue
// pass: y = act(acc * a_scale * b_scale[n] + bias[n]) in f32, stored as f32 or f16.
#pragma once

#include "core/status.h"
#include "core/dtype.h"

#include <cstdint>

typedef struct CUstream_st* cudaStream_t;

namespace gpuopt::cuda {

struct Int8Epilogue {
  int64_t m = 0, n = 0;
  DType dt = DType::F32;          // scales, bias and output: f32 or f16
  const void* a_scale = nullptr;  // device, 1 value
  const void* b_scale = nullptr;  // device, 1 or n values
  bool b_per_channel = false;
  const void* bias = nullptr;     // device, n values, or null
  bool relu = false;
};

// acc [m, n] int32 (row-major) -> y [m, n] of e.dt.
Status launch_int8_epilogue(const Int8Epilogue& e, const int32_t* acc, void* y, cudaStream_t s);
// acc[m, n] = A[m, k] . B[n, k]^T, int32 (the fallback when cuBLASLt has no int8 algorithm).
Status launch_int8_gemm_simple(int64_t m, int64_t n, int64_t k, const int8_t* a, const int8_t* b, int32_t* acc,
                               cudaStream_t s);

}  // namespace gpuopt::cuda
