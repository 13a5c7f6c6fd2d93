// Reading GPTQ, AWQ and compressed-tensors FP8 linear weights. Layouts (from the writers' packing
// code, AutoGPTQ's QuantLinear.pack, AutoAWQ's WQLinear_GEMM.from_linear, compressed-tensors'
// float quantization):
//   GPTQ  qweight[k / p][n] bits (k % p) * b..+b  (p = 32 / b values per int32, packed along K)
//         qzeros[g][n / p]  bits (n % p) * b..+b  (packed along N; v1 stores zero - 1)
//   AWQ   qweight[k][n / 8] and qzeros[g][n / 8]: column n sits in nibble kAwqNibble[n % 8]
//         (the writer packs columns in the order 0 2 4 6 1 3 5 7)
//   FP8   weight[n][k] e4m3, weight_scale [1] or [N, 1]
#include "llm/quantized.h"

#include <fmt/ranges.h>

#include <cmath>
#include <cstring>

namespace gpuopt::llm {

float load_float(const WeightView& w, size_t i) {
  const auto* p = static_cast<const unsigned char*>(w.data);
  if (w.dtype == DType::F32) {
    float f;
    std::memcpy(&f, p + 4 * i, 4);
    return f;
  }
  uint16_t b;
  std::memcpy(&b, p + 2 * i, 2);
  return w.dtype == DType::F16 ? Half::to_float(b) : BFloat16::to_float(b);
}

uint32_t load_u32(const WeightView& w, size_t i) {
  uint32_t v;
  std::memcpy(&v, static_cast<const unsigned char*>(w.data) + 4 * i, 4);
  return v;
}

namespace {

int64_t numel(const WeightView& w) {
  int64_t n = 1;
  for (int64_t d : w.shape) n *= d;
  return n;
}

int32_t load_i32(const WeightView& w, size_t i) {
  return static_cast<int32_t>(load_u32(w, i));
}

std::string shape_str(const std::vector<int64_t>& s) {
  return fmt::format("[{}]", fmt::join(s, ", "));
}

bool is_float(const WeightView& w) {
  return w.dtype == DType::F16 || w.dtype == DType::BF16 || w.dtype == DType::F32;
}

Status expect(const WeightView* w, const std::string& name, bool want_int, std::vector<int64_t> shape) {
  if (!w) return Status::NotFound("tensor '{}' is missing (the quantization_config needs it)", name);
  if (want_int ? w->dtype != DType::I32 : !is_float(*w))
    return Status::InvalidArgument("tensor '{}' has dtype {}, {} needs {}", name, w->file_dtype, name,
                                   want_int ? "I32" : "F16, BF16 or F32");
  if (w->shape != shape)
    return Status::InvalidArgument("tensor '{}' has shape {}, the quantization_config needs {}", name,
                                   shape_str(w->shape), shape_str(shape));
  return Status::Ok();
}

}  // namespace

size_t QuantizedLinear::packed_bytes() const {
  size_t b = 0;
  for (const WeightView* w : {qweight, qzeros, scales, g_idx, input_scale})
    if (w) b += w->bytes;
  return b;
}

Result<QuantizedLinear> find_quantized_linear(const std::function<const WeightView*(const std::string&)>& lookup,
                                              const std::string& base, const WeightQuant& cfg, int64_t N, int64_t K) {
  QuantizedLinear q;
  q.method = cfg.method;
  q.bits = cfg.bits;
  q.N = N;
  q.K = K;
  if (cfg.method == WeightQuant::Method::Fp8) {
    const std::string wn = base + ".weight";
    q.qweight = lookup(wn);
    if (!q.qweight || q.qweight->file_dtype != "F8_E4M3") return Status::NotFound("'{}' is not fp8", wn);
    if (q.qweight->shape != std::vector<int64_t>{N, K})
      return Status::InvalidArgument("tensor '{}' has shape {}, the config needs {}", wn, shape_str(q.qweight->shape),
                                     shape_str({N, K}));
    const std::string sn = base + ".weight_scale";
    q.scales = lookup(sn);
    if (!q.scales) return Status::NotFound("tensor '{}' is missing (fp8 weights need their scale)", sn);
    if (!is_float(*q.scales))
      return Status::InvalidArgument("tensor '{}' has dtype {}, it needs F32, F16 or BF16", sn, q.scales->file_dtype);
    const int64_t want = cfg.fp8_per_channel ? N : 1;
    if (numel(*q.scales) != want || q.scales->shape.size() > 2)
      return Status::InvalidArgument("tensor '{}' has shape {}, a {} scale needs {} value{}", sn,
                                     shape_str(q.scales->shape), cfg.fp8_per_channel ? "per-channel" : "per-tensor",
                                     want, want == 1 ? "" : "s");
    for (size_t i = 0; i < static_cast<size_t>(want); ++i) {
      const float s = load_float(*q.scales, i);
      if (!(s > 0) || !std::isfinite(s))
        return Status::InvalidArgument("tensor '{}' holds {} at {}: scales must be positive and finite", sn, s, i);
    }
    if (cfg.fp8_static_input) {
      const std::string in = base + ".input_scale";
      q.input_scale = lookup(in);
      if (!q.input_scale) return Status::NotFound("tensor '{}' is missing (static fp8 activations)", in);
      if (!is_float(*q.input_scale) || numel(*q.input_scale) != 1)
        return Status::InvalidArgument("tensor '{}' must hold one float", in);
    }
    return q;
  }

  q.qweight = lookup(base + ".qweight");
  if (!q.qweight) return Status::NotFound("'{}' is not quantized", base);
  const int64_t gs = cfg.group_size < 0 ? K : cfg.group_size;
  if (K % gs != 0)
    return Status::InvalidArgument("'{}': group_size {} does not divide the input dimension {}", base, gs, K);
  q.group_size = gs;
  q.groups = K / gs;
  const int64_t pack = 32 / cfg.bits;
  const bool awq = cfg.method == WeightQuant::Method::Awq;
  if ((awq ? N : K) % pack != 0 || N % pack != 0)
    return Status::InvalidArgument("'{}': [{}, {}] cannot be packed {} values per int32", base, N, K, pack);
  q.zero_minus_one = cfg.method == WeightQuant::Method::Gptq && cfg.zero_minus_one;
  q.qzeros = lookup(base + ".qzeros");
  q.scales = lookup(base + ".scales");
  if (awq) {
    GPUOPT_RETURN_IF_ERROR(expect(q.qweight, base + ".qweight", true, {K, N / pack}));
  } else {
    GPUOPT_RETURN_IF_ERROR(expect(q.qweight, base + ".qweight", true, {K / pack, N}));
  }
  GPUOPT_RETURN_IF_ERROR(expect(q.scales, base + ".scales", false, {q.groups, N}));
  GPUOPT_RETURN_IF_ERROR(expect(q.qzeros, base + ".qzeros", true, {q.groups, N / pack}));
  if (!awq) {
    q.g_idx = lookup(base + ".g_idx");
    if (!q.g_idx && cfg.desc_act)
      return Status::NotFound("tensor '{}.g_idx' is missing (desc_act needs it)", base);
    if (q.g_idx) {
      GPUOPT_RETURN_IF_ERROR(expect(q.g_idx, base + ".g_idx", true, {K}));
      for (int64_t k = 0; k < K; ++k) {
        const int32_t g = load_i32(*q.g_idx, static_cast<size_t>(k));
        if (g < 0 || g >= q.groups)
          return Status::InvalidArgument("tensor '{}.g_idx' names group {} at {}, not in 0..{}", base, g, k,
                                         q.groups - 1);
      }
    }
  }
  return q;
}

void dequantize(const QuantizedLinear& q, size_t first, size_t count, float* out) {
  const int64_t K = q.K, N = q.N;
  if (q.method == WeightQuant::Method::Fp8) {
    const auto* w = static_cast<const uint8_t*>(q.qweight->data);
    const bool per_row = numel(*q.scales) > 1;
    const float s0 = load_float(*q.scales, 0);
    for (size_t i = 0; i < count; ++i) {
      const size_t e = first + i;
      const float s = per_row ? load_float(*q.scales, e / static_cast<size_t>(K)) : s0;
      out[i] = fp8_e4m3_to_float(w[e]) * s;
    }
    return;
  }
  const int b = q.bits;
  const int64_t pack = 32 / b;
  const uint32_t mask = (1u << b) - 1;
  const bool awq = q.method == WeightQuant::Method::Awq;
  for (size_t i = 0; i < count; ++i) {
    const int64_t e = static_cast<int64_t>(first + i), n = e / K, k = e % K;
    uint32_t qv, zv;
    int64_t g;
    if (awq) {
      g = k / q.group_size;
      const int sh = 4 * kAwqNibble[n % 8];
      qv = (load_u32(*q.qweight, static_cast<size_t>(k * (N / 8) + n / 8)) >> sh) & mask;
      zv = (load_u32(*q.qzeros, static_cast<size_t>(g * (N / 8) + n / 8)) >> sh) & mask;
    } else {
      g = q.g_idx ? load_i32(*q.g_idx, static_cast<size_t>(k)) : k / q.group_size;
      qv = (load_u32(*q.qweight, static_cast<size_t>((k / pack) * N + n)) >> (b * (k % pack))) & mask;
      zv = (load_u32(*q.qzeros, static_cast<size_t>(g * (N / pack) + n / pack)) >> (b * (n % pack))) & mask;
      if (q.zero_minus_one) zv = (zv + 1) & mask;
    }
    const float s = load_float(*q.scales, static_cast<size_t>(g * N + n));
    out[i] = s * static_cast<float>(static_cast<int32_t>(qv) - static_cast<int32_t>(zv));
  }
}

float fp8_e4m3_to_float(uint8_t b) {
  const int sign = b >> 7, exp = (b >> 3) & 15, man = b & 7;
  if (exp == 15 && man == 7) return std::nanf("");
  const float v = exp == 0 ? std::ldexp(static_cast<float>(man), -9)  // subnormal: man/8 * 2^-6
                           : std::ldexp(static_cast<float>(8 + man), exp - 10);
  return sign ? -v : v;
}

uint8_t float_to_fp8_e4m3(float f) {
  if (std::isnan(f)) return 0x7f;
  const uint8_t sign = std::signbit(f) ? 0x80 : 0;
  float a = std::fabs(f);
  if (a >= 448.0f) return sign | 0x7e;  // saturate (e4m3fn has no infinity)
  // Round to the nearest representable value by scaling to the value's quantum: subnormals
  // (a < 2^-6) step by 2^-9, otherwise 2^(e-3) for a in [2^e, 2^(e+1)).
  int e = 0;
  std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1): the binade is [2^(e-1), 2^e)
  const int quantum_exp = std::max(e - 1, -6) - 3;
  const float r = std::nearbyint(std::ldexp(a, -quantum_exp));  // ties to even (default mode)
  a = std::ldexp(r, quantum_exp);
  if (a == 0) return sign;
  int e2 = 0;
  const float m2 = std::frexp(a, &e2);  // rounding may carry into the next binade
  const int biased = e2 - 1 + 7;
  if (biased <= 0) return sign | static_cast<uint8_t>(std::ldexp(a, 9));  // subnormal mantissa
  const int man = static_cast<int>(std::ldexp(m2, 4)) - 8;  // m2 in [0.5, 1): 8..15
  return sign | static_cast<uint8_t>(biased << 3) | static_cast<uint8_t>(man);
}

std::vector<float> weight_to_f32(const WeightView& w) {
  std::vector<float> out(static_cast<size_t>(numel(w)));
  if (w.quant) {
    dequantize(*w.quant, 0, out.size(), out.data());
    return out;
  }
  for (size_t i = 0; i < out.size(); ++i) out[i] = load_float(w, i);
  return out;
}

}  // namespace gpuopt::llm
