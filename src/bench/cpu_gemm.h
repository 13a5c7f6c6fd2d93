// The CPU side of `bench cpu-vs-gpu`: single-precision matrix multiply through OpenBLAS (the
// Debian package), timed with the steady clock. Works without a GPU.
#pragma once

#include "bench/stats.h"
#include "core/status.h"

#include <string>

namespace gpuopt::bench {

// "OpenBLAS 0.3.21 ... (16 threads)", or Unavailable when built without BLAS.
Result<std::string> cpu_blas_description();
// C = A * B, n x n x n, random data in [-1, 1); median of `repeat` runs after one warm-up.
Result<TimingStats> time_cpu_sgemm(int n, int repeat);
// Compares sampled entries of the BLAS result with plain dot products in double.
Status check_cpu_sgemm(int n);

}  // namespace gpuopt::bench
