// Helpers shared by the quantized-kernel tests (quant_gemm_test.cpp, fp8_gemv_test.cpp): the
// checked columns of a product, the K-scaled tolerance, the split-K workspace as the runner holds
// one, and the benchmarks' timer.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "llm/kernels/llm_kernels.h"
#include "llm_cuda_test_util.h"

namespace gpuopt::llm::test {

// GPTQ-layout int4/int8 weights made on the host: random codes and zeros (v1 zeros stored minus
// one), f16 scales exact in bf16 too, g_idx shuffled for act-order; w the dequantized [N, K] by
// the format's formula.
struct HostQuant {
  int bits = 4;
  int64_t N = 0, K = 0, group = 128, groups = 0;
  bool act_order = false;
  std::vector<int32_t> qweight, qzeros, g_idx;
  std::vector<uint16_t> scales;  // f16 bits
  std::vector<float> w;          // dequantized [N, K] (f32, as the formula computes it)
};

inline HostQuant make_quant(int bits, int64_t N, int64_t K, int64_t group, bool act_order, std::mt19937& rng) {
  HostQuant h;
  h.bits = bits;
  h.N = N;
  h.K = K;
  h.group = group;
  h.groups = K / group;
  h.act_order = act_order;
  const int pack = 32 / bits;
  const uint32_t mask = (1u << bits) - 1;
  std::uniform_int_distribution<uint32_t> qd(0, mask);
  std::uniform_real_distribution<float> sd(0.5f, 1.5f);
  std::vector<uint8_t> q(static_cast<size_t>(N * K)), z(static_cast<size_t>(h.groups * N));
  for (auto& v : q) v = static_cast<uint8_t>(qd(rng));
  for (auto& v : z) v = static_cast<uint8_t>(qd(rng));
  h.scales.resize(z.size());
  // Scales keep y ~ O(1) for x in [-1, 1]: w ~ scale * 2^(bits-1), sum of K of them.
  const float base = 1.0f / (static_cast<float>(1 << (bits - 1)) * std::sqrt(static_cast<float>(K)));
  // Scales exact in bf16 and in f16 alike, so the kernels' bf16 runs (which read scales in the
  // activation dtype, as the runner uploads them) dequantize to the same W as the f16 ones.
  for (auto& s : h.scales) s = Half::from_float(BFloat16::to_float(BFloat16::from_float(base * sd(rng))));
  h.g_idx.resize(static_cast<size_t>(K));
  std::vector<int64_t> order(static_cast<size_t>(K));
  std::iota(order.begin(), order.end(), 0);
  if (act_order) std::shuffle(order.begin(), order.end(), rng);
  for (int64_t i = 0; i < K; ++i) h.g_idx[static_cast<size_t>(order[static_cast<size_t>(i)])] = static_cast<int32_t>(i / group);
  h.qweight.assign(static_cast<size_t>(K / pack * N), 0);
  h.qzeros.assign(static_cast<size_t>(h.groups * (N / pack)), 0);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t kk = 0; kk < K; ++kk) {
      auto& word = reinterpret_cast<uint32_t&>(h.qweight[static_cast<size_t>((kk / pack) * N + n)]);
      word |= static_cast<uint32_t>(q[static_cast<size_t>(n * K + kk)]) << (bits * (kk % pack));
    }
  for (int64_t g = 0; g < h.groups; ++g)
    for (int64_t n = 0; n < N; ++n) {
      auto& word = reinterpret_cast<uint32_t&>(h.qzeros[static_cast<size_t>(g * (N / pack) + n / pack)]);
      word |= ((static_cast<uint32_t>(z[static_cast<size_t>(g * N + n)]) - 1) & mask) << (bits * (n % pack));  // v1
    }
  h.w.resize(q.size());
  for (int64_t n = 0; n < N; ++n)
    for (int64_t kk = 0; kk < K; ++kk) {
      const int64_t g = h.g_idx[static_cast<size_t>(kk)];
      const float s = Half::to_float(h.scales[static_cast<size_t>(g * N + n)]);
      h.w[static_cast<size_t>(n * K + kk)] =
          s * static_cast<float>(static_cast<int>(q[static_cast<size_t>(n * K + kk)]) -
                                 static_cast<int>(z[static_cast<size_t>(g * N + n)]));
    }
  return h;
}

struct DevQuant {
  DevBuf qw, qz, sc, gi;
  cuda::QuantWeightArgs args(const HostQuant& h) const {
    cuda::QuantWeightArgs a;
    a.qweight = qw.as<int32_t>();
    a.qzeros = qz.as<int32_t>();
    a.scales = sc.get();
    a.g_idx = h.act_order ? gi.as<int32_t>() : nullptr;
    a.bits = h.bits;
    a.group_size = h.group;
    a.zero_minus_one = true;
    return a;
  }
  // Scales in `dt`, the activation dtype (the kernels' contract, llm_kernels.h).
  explicit DevQuant(const HostQuant& h, DType dt = DType::F16)
      : qw(h.qweight.size() * 4), qz(h.qzeros.size() * 4), sc(h.scales.size() * 2), gi(h.g_idx.size() * 4) {
    qw.upload(h.qweight);
    qz.upload(h.qzeros);
    std::vector<uint16_t> scales = h.scales;
    if (dt == DType::BF16)
      for (auto& v : scales) v = BFloat16::from_float(Half::to_float(v));
    sc.upload(scales);
    gi.upload(h.g_idx);
  }
};

// y[t, n] for the checked columns, in double from the f16-rounded x and the f32 dequantized W.
inline std::vector<double> reference(const std::vector<float>& x, const HostQuant& h, int64_t T,
                              const std::vector<int64_t>& cols) {
  std::vector<double> ref(static_cast<size_t>(T) * cols.size());
  for (int64_t t = 0; t < T; ++t)
    for (size_t c = 0; c < cols.size(); ++c) {
      double s = 0;
      const float* wr = h.w.data() + cols[c] * h.K;
      for (int64_t kk = 0; kk < h.K; ++kk) s += static_cast<double>(x[static_cast<size_t>(t * h.K + kk)]) * wr[kk];
      ref[static_cast<size_t>(t) * cols.size() + c] = s;
    }
  return ref;
}

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
