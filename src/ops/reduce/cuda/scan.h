// CumSum / CumProd on the GPU (kernels/scan.cu).
#pragma once

#include "backends/cuda/elementwise.h"

namespace gpuopt::cuda {

// x viewed as [outer, n, inner], scanned along n. dt: f32, f64, f16, bf16, i32, i64.
Status launch_scan(DType dt, const void* x, void* y, int64_t outer, int64_t n, int64_t inner, bool prod,
                   bool exclusive, bool reverse, cudaStream_t s);

}  // namespace gpuopt::cuda
