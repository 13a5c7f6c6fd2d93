// Row-major batched matrix products through cuBLASLt, with plans (descriptors, layouts, the
// heuristic's algorithm) cached by a plain key struct — failures too, so an unsupported shape
// is diagnosed once. Accumulation is f32 for f16/bf16 and f32 (strict) for f32.
//
//   MatmulShape s{.m = 128, .n = 768, .k = 768, .batch = 12, .stride_a = 128 * 768, ...};
//   GPUOPT_RETURN_IF_ERROR(matmul(ctx, s, DType::F16, a, b, c, /*alpha=*/1, /*beta=*/0, bias));
#pragma once

#include "backends/cuda/cuda_ops.h"

#include <cstdint>

namespace gpuopt::cuda {

struct MatmulShape {
  int64_t m = 0, n = 0, k = 0;
  int64_t batch = 1;
  bool trans_a = false;  // A is stored [k, m] (row-major) and used transposed
  bool trans_b = false;  // B is stored [n, k]
  int64_t stride_a = 0, stride_b = 0, stride_c = 0;  // elements between batches; 0 = broadcast
  bool operator==(const MatmulShape&) const = default;
};

enum class Epilogue : uint8_t { kNone, kBias, kBiasRelu, kBiasGelu };

// C[b] = act(alpha * op(A[b]) @ op(B[b]) + beta * C_in[b] + bias[n] per row): the epilogue's bias
// and activation apply after the beta term. `bias` is a device vector of n elements of `dt`, or
// nullptr. C_in is `c_in` (C's layout and strides) or, when null, C itself (in place).
Status matmul(ExecContext& ctx, const MatmulShape& s, DType dt, const void* a, const void* b, void* c, float alpha,
              float beta, const void* bias = nullptr, Epilogue epilogue = Epilogue::kNone, const void* c_in = nullptr);

// Plans built so far (cache hits are not counted): for tests and `inspect`.
size_t matmul_plans_built();

}  // namespace gpuopt::cuda
