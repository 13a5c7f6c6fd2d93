// Einsum on the GPU: the CPU reference's plan (labels bound to extents, output labels first,
// then the summed ones; per-operand strides, 0 along broadcast dims, summed for repeated labels)
// evaluated with one thread per output element walking the summed index space in double.
#pragma once

#include "backends/cuda/elementwise.h"

namespace gpuopt::cuda {

constexpr int kEinsumMaxInputs = 4;
constexpr int kEinsumMaxLabels = 12;

struct EinsumDesc {
  int num_inputs = 0;
  int num_labels = 0;  // output labels first
  int num_out = 0;
  int64_t out_n = 1, red_n = 1;
  int64_t ext[kEinsumMaxLabels] = {};
  int64_t strides[kEinsumMaxInputs][kEinsumMaxLabels] = {};
};

struct EinsumInputs {
  const void* p[kEinsumMaxInputs] = {};
};

// dt: f32, f16, bf16 (every operand and the output).
Status launch_einsum(DType dt, const EinsumInputs& in, void* y, const EinsumDesc& d, cudaStream_t s);

}  // namespace gpuopt::cuda
