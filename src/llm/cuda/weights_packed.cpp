#include "llm/cuda/weights_packed.h"

#include <cstring>

#include "llm/quantized.h"

namespace gpuopt::llm::cuda {
namespace {

// g_idx absent, or exactly k / group_size (what writers store without act-order).
bool trivial_groups(const QuantizedLinear& q) {
  if (!q.g_idx) return true;
  for (int64_t k = 0; k < q.K; ++k)
    if (static_cast<int64_t>(static_cast<int32_t>(load_u32(*q.g_idx, static_cast<size_t>(k)))) != k / q.group_size)
      return false;
  return true;
}

}  // namespace

bool pack_fp8(const std::vector<const WeightView*>& parts, HostPacked* out) {
  const int64_t K = parts[0]->quant->K;
  HostPacked h;
  h.fp8 = true;
  h.K = K;
  for (const WeightView* p : parts) {
    const QuantizedLinear* q = p->quant;
    if (!q || q->method != WeightQuant::Method::Fp8 || q->K != K || q->N % 16 != 0 || K % 16 != 0) return false;
    const auto* w = static_cast<const uint8_t*>(q->qweight->data);
    h.fp8_w.insert(h.fp8_w.end(), w, w + q->N * K);
    const size_t ns = q->scales->bytes / dtype_size(q->scales->dtype);
    for (int64_t n = 0; n < q->N; ++n) h.fp8_scale.push_back(load_float(*q->scales, ns == 1 ? 0 : static_cast<size_t>(n)));
    h.N += q->N;
  }
  *out = std::move(h);
  return true;
}

bool pack_fused(const std::vector<const WeightView*>& parts, DType dt, HostPacked* out) {
  if (parts.empty() || (dt != DType::F16 && dt != DType::BF16)) return false;
  const QuantizedLinear* first = parts[0]->quant;
  if (first && first->method == WeightQuant::Method::Fp8) return pack_fp8(parts, out);
  if (!first || (first->method != WeightQuant::Method::Gptq && first->method != WeightQuant::Method::Awq)) return false;
  int64_t N = 0;
  for (const WeightView* p : parts) {
    const QuantizedLinear* q = p->quant;
    if (!q || q->method != first->method || q->bits != first->bits || q->K != first->K ||
        q->group_size != first->group_size || q->zero_minus_one != first->zero_minus_one)
      return false;
    // Act-order groups differ per part, and the fused weight has one g_idx.
    if (parts.size() > 1 && !trivial_groups(*q)) return false;
    N += q->N;
  }
  if (first->group_size % 8 != 0) return false;  // the kernels take groups of whole words
  const int bits = first->bits;
  const int64_t K = first->K, pack = 32 / bits, G = first->groups;
  const uint32_t mask = (1u << bits) - 1;
  HostPacked h;
  h.bits = bits;
  h.group_size = first->group_size;
  h.N = N;
  h.K = K;
  h.zero_minus_one = first->zero_minus_one;
  h.qweight.assign(static_cast<size_t>(K / pack * N), 0);
  h.qzeros.assign(static_cast<size_t>(G * (N / pack)), 0);
  h.scales.resize(static_cast<size_t>(G * N));
  int64_t off = 0;
  for (const WeightView* p : parts) {
    const QuantizedLinear& q = *p->quant;
    const int64_t Ni = q.N;
    if (q.method == WeightQuant::Method::Gptq) {
      for (int64_t r = 0; r < K / pack; ++r)
        for (int64_t n = 0; n < Ni; ++n)
          h.qweight[static_cast<size_t>(r * N + off + n)] = load_u32(*q.qweight, static_cast<size_t>(r * Ni + n));
      for (int64_t g = 0; g < G; ++g)
        for (int64_t j = 0; j < Ni / pack; ++j)
          h.qzeros[static_cast<size_t>(g * (N / pack) + off / pack + j)] =
              load_u32(*q.qzeros, static_cast<size_t>(g * (Ni / pack) + j));
    } else {
      // AWQ [K, N/8] interleaved -> GPTQ [K/8, N] packed along K; zeros to GPTQ's column order.
      for (int64_t k = 0; k < K; ++k)
        for (int64_t n = 0; n < Ni; ++n) {
          const uint32_t v = (load_u32(*q.qweight, static_cast<size_t>(k * (Ni / 8) + n / 8)) >> (4 * kAwqNibble[n % 8])) & mask;
          h.qweight[static_cast<size_t>((k / 8) * N + off + n)] |= v << (4 * (k % 8));
        }
      for (int64_t g = 0; g < G; ++g)
        for (int64_t n = 0; n < Ni; ++n) {
          const uint32_t z = (load_u32(*q.qzeros, static_cast<size_t>(g * (Ni / 8) + n / 8)) >> (4 * kAwqNibble[n % 8])) & mask;
          h.qzeros[static_cast<size_t>(g * (N / 8) + (off + n) / 8)] |= z << (4 * ((off + n) % 8));
        }
    }
    for (int64_t g = 0; g < G; ++g)
      for (int64_t n = 0; n < Ni; ++n) {
        const float s = load_float(*q.scales, static_cast<size_t>(g * Ni + n));
        h.scales[static_cast<size_t>(g * N + off + n)] = dt == DType::F16 ? Half::from_float(s) : BFloat16::from_float(s);
      }
    off += Ni;
  }
  if (parts.size() == 1 && !trivial_groups(*first))
    for (int64_t k = 0; k < K; ++k) h.g_idx.push_back(static_cast<int32_t>(load_u32(*first->g_idx, static_cast<size_t>(k))));
  *out = std::move(h);
  return true;
}

}  // namespace gpuopt::llm::cuda
