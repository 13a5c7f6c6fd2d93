// RotaryEmbedding (ONNX opset 23) on the GPU: one thread per element of x, f32 arithmetic.
#pragma once

#include "core/dtype.h"
#include "core/status.h"

#include <cstdint>

typedef struct CUstream_st* cudaStream_t;

namespace gpuopt::cuda {

struct RotaryArgs {
  DType dt = DType::F32;
  const void* x = nullptr;          // [B, H, S, D] (four_d) or [B, S, H*D]
  const void* cos = nullptr;        // [max_pos, rot/2] with pos, else [B, S, rot/2]
  const void* sin = nullptr;
  const int64_t* pos = nullptr;     // [B, S] positions, or nullptr
  void* y = nullptr;                // x's shape
  int64_t batch = 0, heads = 0, seq = 0, head = 0, rot = 0, max_pos = 0;
  bool four_d = false, interleaved = false;
};

// A position outside [0, max_pos) gives zeros in the rotated part of its row (the kernel cannot
// stop the run; the CPU reference refuses it with an error naming the position).
Status launch_rotary(const RotaryArgs& a, cudaStream_t s);

}  // namespace gpuopt::cuda
