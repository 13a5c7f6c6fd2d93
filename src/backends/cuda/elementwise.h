// Elementwise CUDA kernels: one generic unary kernel and one generic broadcasting binary kernel,
// instantiated for f32, f16 and bf16 (math in f32), plus integer/bool types where the op allows.
// Launchers are plain functions over device pointers so they are testable without the engine.
//
//   BroadcastDesc d = make_broadcast({2,1,5}, {1,3,5});            // out {2,3,5}
//   GPUOPT_RETURN_IF_ERROR(launch_binary(BinaryOp::kAdd, DType::F16, a, b, y, d, stream));
#pragma once

#include "core/dtype.h"
#include "core/shape.h"
#include "core/status.h"

#include <cstdint>

typedef struct CUstream_st* cudaStream_t;

namespace gpuopt::cuda {

enum class UnaryOp : uint8_t {
  kIdentity, kRelu, kLeakyRelu, kElu, kSelu, kSigmoid, kHardSigmoid, kHardSwish, kTanh, kSoftplus,
  kGelu, kGeluTanh, kErf, kClip, kSqrt, kExp, kLog, kNeg, kAbs, kReciprocal, kFloor, kCeil, kRound,
  kSign, kSin, kCos, kNot, kIsNaN, kIsInf,
};

enum class BinaryOp : uint8_t {
  kAdd, kSub, kMul, kDiv, kPow, kMin, kMax, kMod, kFMod, kPRelu,
  kEqual, kLess, kLessOrEqual, kGreater, kGreaterOrEqual, kAnd, kOr, kXor,
};

// Parameters some unary ops take (LeakyRelu/Elu/Selu alpha, gamma; HardSigmoid alpha/beta; Clip min/max).
struct UnaryParams {
  float alpha = 0.f;
  float beta = 0.f;
  float gamma = 0.f;
};

constexpr int kMaxRank = 8;

struct BroadcastDesc {
  int rank = 0;
  int64_t numel = 0;
  int64_t out_dims[kMaxRank] = {};
  int64_t a_strides[kMaxRank] = {};  // 0 where a is broadcast along the axis
  int64_t b_strides[kMaxRank] = {};
  bool a_contiguous = false;  // a's shape equals the output's: index directly
  bool b_contiguous = false;
  bool b_scalar = false;
};

// Numpy broadcasting of two concrete shapes; fails when they do not broadcast or rank > kMaxRank.
Result<BroadcastDesc> make_broadcast(const Shape& a, const Shape& b);
bool binary_op_is_comparison(BinaryOp op);  // output is Bool

// x, y: n elements of dtype `dt` (y of Bool for IsNaN/IsInf/Not).
Status launch_unary(UnaryOp op, DType dt, const void* x, void* y, int64_t n, const UnaryParams& p, cudaStream_t s);
// a, b of dtype `dt`; y of `dt`, or Bool for comparisons and logic.
Status launch_binary(BinaryOp op, DType dt, const void* a, const void* b, void* y, const BroadcastDesc& d,
                     cudaStream_t s);
// Element type conversion on the device (every numeric dtype pair).
Status launch_cast(DType from, DType to, const void* x, void* y, int64_t n, cudaStream_t s);

}  // namespace gpuopt::cuda
