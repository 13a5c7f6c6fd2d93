// The per-element sum of the CUDA Einsum kernel, shared by the kernel and the host unit test.
#pragma once

#include "ops/matmul/cuda/einsum.h"

#ifdef __CUDACC__
#define GPUOPT_EINSUM_HD __host__ __device__
#else
#define GPUOPT_EINSUM_HD
#endif

namespace gpuopt::cuda {

// Output element o in double; load(k, offset) returns operand k's element as double.
template <typename Load>
GPUOPT_EINSUM_HD double einsum_point(const EinsumDesc& d, int64_t o, Load load) {
  int64_t off[kEinsumMaxInputs] = {};
  int64_t rem = o;
  for (int l = d.num_out - 1; l >= 0; --l) {
    const int64_t c = rem % d.ext[l];
    rem /= d.ext[l];
    for (int k = 0; k < d.num_inputs; ++k) off[k] += c * d.strides[k][l];
  }
  int64_t idx[kEinsumMaxLabels] = {};
  double acc = 0.0;
  for (int64_t r = 0; r < d.red_n; ++r) {
    double p = 1.0;
    for (int k = 0; k < d.num_inputs; ++k) p *= load(k, off[k]);
    acc += p;
    // Odometer over the summed labels, offsets kept incrementally (as the reference).
    for (int l = d.num_labels - 1; l >= d.num_out; --l) {
      if (++idx[l] < d.ext[l]) {
        for (int k = 0; k < d.num_inputs; ++k) off[k] += d.strides[k][l];
        break;
      }
      for (int k = 0; k < d.num_inputs; ++k) off[k] -= d.strides[k][l] * (d.ext[l] - 1);
      idx[l] = 0;
    }
  }
  return acc;
}

}  // namespace gpuopt::cuda
