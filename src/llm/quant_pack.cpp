// The rounding rules are the writers' own (AutoGPTQ's Quantizer.find_params, AutoAWQ's
// pseudo_quantize_tensor, compressed-tensors' fp8 min-max observer), so a folder written here
// holds what those tools would write for round-to-nearest.
#include "llm/quant_pack.h"

#include <algorithm>
#include <cmath>

#include "core/dtype.h"
#include "llm/quantized.h"

namespace gpuopt::llm {
namespace {

// The f16 value nearest `s`, kept positive (a zero scale would lose the group).
float f16_scale(float s, uint16_t* bits) {
  uint16_t b = Half::from_float(s);
  if (Half::to_float(b) <= 0.0f) b = 1;  // the smallest subnormal
  *bits = b;
  return Half::to_float(b);
}

}  // namespace

IntQuantized quantize_int(const float* w, int64_t N, int64_t K, int bits, int64_t group_size, IntRounding r) {
  IntQuantized out;
  out.bits = bits;
  out.N = N;
  out.K = K;
  out.group_size = group_size < 0 ? K : group_size;
  out.groups = K / out.group_size;
  out.q.resize(static_cast<size_t>(N * K));
  out.dequantized.resize(out.q.size());
  out.scales.resize(static_cast<size_t>(out.groups * N));
  out.zeros.resize(out.scales.size());
  const float maxq = static_cast<float>((1 << bits) - 1);
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t g = 0; g < out.groups; ++g) {
      const float* row = w + n * K + g * out.group_size;
      float lo = row[0], hi = row[0];
      for (int64_t i = 1; i < out.group_size; ++i) {
        lo = std::min(lo, row[i]);
        hi = std::max(hi, row[i]);
      }
      float scale, zero;
      if (r == IntRounding::Awq) {
        scale = std::max(hi - lo, 1e-5f) / maxq;
      } else {
        lo = std::min(lo, 0.0f);
        hi = std::max(hi, 0.0f);
        if (r == IntRounding::GptqSym) {
          hi = std::max(-lo, hi);
          lo = -hi;
        }
        if (lo == 0 && hi == 0) {
          lo = -1;
          hi = 1;
        }
        scale = (hi - lo) / maxq;
      }
      uint16_t sb;
      scale = f16_scale(scale, &sb);
      if (r == IntRounding::GptqSym)
        zero = (maxq + 1) / 2;
      else
        zero = std::clamp(std::nearbyint(-lo / scale), 0.0f, maxq);
      const size_t gi = static_cast<size_t>(g * N + n);
      out.scales[gi] = sb;
      out.zeros[gi] = static_cast<uint8_t>(zero);
      for (int64_t i = 0; i < out.group_size; ++i) {
        const size_t e = static_cast<size_t>(n * K + g * out.group_size + i);
        const float qv = std::clamp(std::nearbyint(row[i] / scale) + zero, 0.0f, maxq);
        out.q[e] = static_cast<uint8_t>(qv);
        out.dequantized[e] = scale * (qv - zero);
      }
    }
  }
  return out;
}

PackedInt pack_gptq(const IntQuantized& q, bool zero_minus_one) {
  PackedInt p;
  const int b = q.bits;
  const int64_t pack = 32 / b, N = q.N, K = q.K;
  const uint32_t mask = (1u << b) - 1;
  p.qweight_shape = {K / pack, N};
  p.qzeros_shape = {q.groups, N / pack};
  std::vector<uint32_t> qw(static_cast<size_t>(K / pack * N), 0), qz(static_cast<size_t>(q.groups * (N / pack)), 0);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < K; ++k)
      qw[static_cast<size_t>((k / pack) * N + n)] |= static_cast<uint32_t>(q.q[static_cast<size_t>(n * K + k)])
                                                     << (b * (k % pack));
  for (int64_t g = 0; g < q.groups; ++g)
    for (int64_t n = 0; n < N; ++n) {
      uint32_t z = q.zeros[static_cast<size_t>(g * N + n)];
      if (zero_minus_one) z = (z - 1) & mask;
      qz[static_cast<size_t>(g * (N / pack) + n / pack)] |= z << (b * (n % pack));
    }
  p.qweight.assign(qw.begin(), qw.end());
  p.qzeros.assign(qz.begin(), qz.end());
  p.g_idx.resize(static_cast<size_t>(K));
  for (int64_t k = 0; k < K; ++k) p.g_idx[static_cast<size_t>(k)] = static_cast<int32_t>(k / q.group_size);
  return p;
}

PackedInt pack_awq(const IntQuantized& q) {
  PackedInt p;
  const int64_t N = q.N, K = q.K;
  p.qweight_shape = {K, N / 8};
  p.qzeros_shape = {q.groups, N / 8};
  std::vector<uint32_t> qw(static_cast<size_t>(K * (N / 8)), 0), qz(static_cast<size_t>(q.groups * (N / 8)), 0);
  for (int64_t k = 0; k < K; ++k)
    for (int64_t n = 0; n < N; ++n)
      qw[static_cast<size_t>(k * (N / 8) + n / 8)] |= static_cast<uint32_t>(q.q[static_cast<size_t>(n * K + k)])
                                                     << (4 * kAwqNibble[n % 8]);
  for (int64_t g = 0; g < q.groups; ++g)
    for (int64_t n = 0; n < N; ++n)
      qz[static_cast<size_t>(g * (N / 8) + n / 8)] |= static_cast<uint32_t>(q.zeros[static_cast<size_t>(g * N + n)])
                                                     << (4 * kAwqNibble[n % 8]);
  p.qweight.assign(qw.begin(), qw.end());
  p.qzeros.assign(qz.begin(), qz.end());
  return p;
}

Fp8Quantized quantize_fp8(const float* w, int64_t N, int64_t K, bool per_channel) {
  Fp8Quantized out;
  out.w.resize(static_cast<size_t>(N * K));
  out.dequantized.resize(out.w.size());
  const int64_t rows_per_scale = per_channel ? 1 : N;
  for (int64_t n0 = 0; n0 < N; n0 += rows_per_scale) {
    float amax = 0;
    for (int64_t i = n0 * K; i < (n0 + rows_per_scale) * K; ++i) amax = std::max(amax, std::fabs(w[i]));
    const float scale = amax > 0 ? amax / 448.0f : 1.0f;
    out.scales.push_back(scale);
    for (int64_t i = n0 * K; i < (n0 + rows_per_scale) * K; ++i) {
      const uint8_t b = float_to_fp8_e4m3(w[i] / scale);
      out.w[static_cast<size_t>(i)] = b;
      out.dequantized[static_cast<size_t>(i)] = fp8_e4m3_to_float(b) * scale;
    }
  }
  return out;
}

}  // namespace gpuopt::llm
