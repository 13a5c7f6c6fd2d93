// ArgMax / ArgMin on the GPU (argmax.cu).
#pragma once

#include "core/dtype.h"
#include "core/status.h"

#include <cstdint>

typedef struct CUstream_st* cudaStream_t;

namespace gpuopt::cuda {

// x viewed as [outer, n, inner]; y[o, i] = the index along n (int64). dt: f32, f16, bf16, i32, i64.
Status launch_arg(bool max, DType dt, const void* x, int64_t* y, int64_t outer, int64_t n, int64_t inner, bool last,
                  cudaStream_t s);

}  // namespace gpuopt::cuda
