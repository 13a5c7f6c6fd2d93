// MatMulInteger and QLinearMatMul on the GPU: u8/i8 operands, numpy-broadcast batch dims, zero
// points per tensor or per row of A / per column of B. Products are summed exactly in int64;
// MatMulInteger keeps the low 32 bits (the CPU reference's int32 cast), QLinearMatMul
// requantizes as the reference does (multiplier rounded to the scales' float type, applied in
// double, rounded half to even, saturated).
#pragma once

#include "backends/cuda/elementwise.h"

namespace gpuopt::cuda {

constexpr int kMaxBatchRank = 6;

struct IntMatMulDesc {
  int64_t M = 0, K = 0, N = 0;
  int batch_rank = 0;
  int64_t batch_dims[kMaxBatchRank] = {};
  int64_t a_batch_strides[kMaxBatchRank] = {};  // in matrices; 0 where A is broadcast
  int64_t b_batch_strides[kMaxBatchRank] = {};
  int64_t batches = 1;
  bool a_signed = false, b_signed = false;
  int64_t a_zp_count = 0, b_zp_count = 0;  // 0: no zero point, 1: per tensor, M / N: per row / column
};

struct Requant {
  DType scale_dt = DType::F32;  // a_scale's dtype: the multiplier is rounded to it
  const void* a_scale = nullptr;
  int64_t a_scale_count = 1;    // 1 or M
  const void* b_scale = nullptr;
  int64_t b_scale_count = 1;    // 1 or N
  DType b_scale_dt = DType::F32;
  double y_scale = 1.0, y_zero_point = 0.0;
  bool y_signed = false;
};

// y: i32 (requant == nullptr) or u8/i8 (QLinearMatMul).
Status launch_int_matmul(const IntMatMulDesc& d, const void* a, const void* b, const void* a_zp, const void* b_zp,
                         const Requant* requant, void* y, cudaStream_t s);

}  // namespace gpuopt::cuda
