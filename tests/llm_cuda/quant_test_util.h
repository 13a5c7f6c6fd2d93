// Helpers shared by the quantized-kernel tests (quant_gemm_test.cpp, fp8_gemv_test.cpp): the
// checked columns of a product, the K-scaled tolerance, the split-K workspace as the runner holds
// one, and the benchmarks' timer.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "llm/kernels/llm_kernels.h"
#include "llm_cuda_test_util.h"

namespace gpuopt::llm::test {

// Every column of a small N; a prime stride (visiting every lane position and CTA) of a large one.
inline std::vector<int64_t> columns(int64_t N) {
  std::vector<int64_t> c;
  const int64_t step = N <= 512 ? 1 : 61;
  for (int64_t n = 0; n < N; n += step) c.push_back(n);
  if (c.back() != N - 1) c.push_back(N - 1);
  return c;
}

inline std::vector<float> pick(const std::vector<float>& y, int64_t T, int64_t N, const std::vector<int64_t>& cols) {
  std::vector<float> out;
  for (int64_t t = 0; t < T; ++t)
    for (int64_t c : cols) out.push_back(y[static_cast<size_t>(t * N + c)]);
  return out;
}

// The dtype's tolerance with its absolute term grown as a random walk over K.
inline Tol tol_k(DType dt, int64_t K) {
  Tol t = tol_for(dt);
  t.abs *= std::sqrt(static_cast<double>(K) / 64.0);
  return t;
}

struct Shape {
  int64_t N, K;
};

// The split-K workspace as the runner holds one: partial sums and zeroed arrival counters.
struct SplitWs {
  DevBuf partial{size_t{32} * 16 * 22016 * 4}, counters{4096 * 4};
  cuda::GemvSplitScratch ws;
  SplitWs() {
    EXPECT_EQ(cudaMemset(counters.get(), 0, 4096 * 4), cudaSuccess);
    ws = {static_cast<float*>(partial.get()), size_t{32} * 16 * 22016, static_cast<int*>(counters.get()), 4096};
  }
};

// Milliseconds per launch(i) over 100 launches after 5 warm-up ones.
template <class Launch>
float time_ms(Launch&& launch) {
  for (int i = 0; i < 5; ++i) launch(i);
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  cudaEventRecord(a);
  const int reps = 100;
  for (int i = 0; i < reps; ++i) launch(i);
  cudaEventRecord(b);
  cudaEventSynchronize(b);
  float ms = 0;
  cudaEventElapsedTime(&ms, a, b);
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return ms / reps;
}

}  // namespace gpuopt::llm::test
