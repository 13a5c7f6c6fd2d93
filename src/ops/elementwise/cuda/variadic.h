// Variadic Sum / Mean / Min / Max on the GPU: any number of inputs, each broadcast (numpy rules)
// to the output shape, in one pass per group of up to kMaxVariadicInputs inputs (the pointers and
// strides travel in the kernel's parameters, 2.4 KB for 32 inputs).
//
//   Sum/Mean: accumulated in double and rounded once, as the CPU reference does (f32/f16/bf16).
//   Min/Max:  exact in the element type; a NaN in any input makes the result NaN (the CPU
//             reference's numpy rule), for f32/f16/bf16 and i8/u8/i32/i64.
//
// More inputs than one group takes (rare: ONNX models sum a handful): the first group writes the
// output, each further group reads it back as its first input (exact for Min/Max; Sum/Mean then
// round once per group instead of once overall).
#pragma once

#include "backends/cuda/elementwise.h"

#include <vector>

namespace gpuopt::cuda {

enum class VariadicOp : uint8_t { kSum, kMin, kMax };

constexpr int kMaxVariadicInputs = 32;

struct VariadicDesc {
  int rank = 0;
  int64_t numel = 0;
  int64_t out_dims[kMaxRank] = {};
  int num_inputs = 0;
  const void* in[kMaxVariadicInputs] = {};
  int64_t strides[kMaxVariadicInputs][kMaxRank] = {};  // elements; 0 where the input is broadcast
  bool contiguous[kMaxVariadicInputs] = {};            // input shape equals the output's
  double scale = 1.0;                                  // Sum only: result * scale (Mean = 1/N)
};

// Strides of `in` broadcast into `out` (right-aligned); fails when it does not broadcast.
Status broadcast_strides(const Shape& in, const Shape& out, int64_t* strides, bool* contiguous);

// y (shape `out`, dtype `dt`) = op over inputs (device pointers with their shapes). `scale`
// multiplies a Sum (Mean passes 1/N).
Status launch_variadic(VariadicOp op, DType dt, const std::vector<const void*>& inputs,
                       const std::vector<Shape>& shapes, void* y, const Shape& out, double scale, cudaStream_t s);

}  // namespace gpuopt::cuda
