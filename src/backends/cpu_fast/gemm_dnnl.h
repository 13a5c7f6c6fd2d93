// oneDNN matmul for GEMMs with a constant right operand (MatMul/Gemm/FusedGemm weights), built
// with oneDNN like conv_dnnl.h (make() returns nullptr without it). The weights are reordered
// once into oneDNN's packed layout, where OpenBLAS packs them again on every call: 12-20% less
// time on BERT-base's shapes on one core (docs/perf-notes.md). The output is cut by gemm_parts
// (fast_kernel.h) into rows x columns parts, one single-threaded primitive per part, each column
// slice of B packed once; parts of fewer than 16 rows: the caller's sgemm.
//
//   auto mm = DnnlMatmul::make(K, N, /*trans_b=*/true);
//   bool done = mm->run(M, A, lda, B, Y, [&](int64_t m0, int64_t m1, int64_t n0, int64_t n1) { /* bias */ });
#pragma once

#include <cstdint>
#include <functional>
#include <memory>

namespace gpuopt::cpu_fast {

class DnnlMatmul {
 public:
  // For a constant B of K x N (trans_b: stored N x K); nullptr without oneDNN.
  static std::unique_ptr<DnnlMatmul> make(int64_t K, int64_t N, bool trans_b);
  virtual ~DnnlMatmul() = default;
  // Y[M, N] (row stride N) = A[M, K] (row stride lda) x op(B); then epilogue(m0, m1, n0, n1) over
  // the part [m0, m1) x [n0, n1) on the thread that computed it. False, having written nothing,
  // when the parts have fewer than 16 rows or oneDNN has no kernel for them. `B` must be the same
  // constant every call.
  virtual bool run(int64_t M, const float* A, int64_t lda, const float* B, float* Y,
                   const std::function<void(int64_t m0, int64_t m1, int64_t n0, int64_t n1)>& epilogue) = 0;
};

// GEMMs oneDNN completed in this process (the tests check that a case took this path).
uint64_t dnnl_matmul_calls();

}  // namespace gpuopt::cpu_fast
