// f32 array math for the fast CPU kernels: exp, erf, tanh (rational/polynomial forms after
// Cephes and Eigen, within a few ulp of libm over the float range) written as straight-line
// loops the compiler vectorises; each function is built for AVX2+FMA and for the baseline and
// picked at load time. In-place calls (y == x) are fine.
//
//   vec::exp(row, row, n);          // softmax numerators
//   vec::gelu_erf(y, y, n);         // FusedGemm's Gelu epilogue
#pragma once

#include <cstdint>

namespace gpuopt::cpu_fast::vec {

void exp(const float* x, float* y, int64_t n);
void tanh(const float* x, float* y, int64_t n);
void sigmoid(const float* x, float* y, int64_t n);
void gelu_erf(const float* x, float* y, int64_t n);   // 0.5 x (1 + erf(x / sqrt 2))
void gelu_tanh(const float* x, float* y, int64_t n);  // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
void swish(const float* x, float* y, int64_t n);      // x sigmoid(x)
void erf(const float* x, float* y, int64_t n);

// Softmax of one row in place: y = exp(x - max) / sum. A row whose every value is -inf gives NaN
// (as the reference: 0/0).
void softmax_row(float* x, int64_t n);
// Mean and (biased) variance of n values, two passes in f32 (the norms. statistics).
void moments(const float* x, int64_t n, float* mean, float* var);

}  // namespace gpuopt::cpu_fast::vec
