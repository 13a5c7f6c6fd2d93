#include "bench/counts.h"

namespace gpuopt::bench {

WorkCount copy_count(uint64_t bytes) {
  return {0, 2.0 * static_cast<double>(bytes)};
}
WorkCount read_count(uint64_t bytes) {
  return {0, static_cast<double>(bytes)};
}
WorkCount write_count(uint64_t bytes) {
  return {0, static_cast<double>(bytes)};
}
WorkCount transfer_count(uint64_t bytes) {
  return {0, static_cast<double>(bytes)};
}

const char* fma_kind_name(FmaKind k) {
  switch (k) {
    case FmaKind::F32:
      return "f32";
    case FmaKind::F16x2:
      return "f16x2";
    case FmaKind::F64:
      return "f64";
  }
  return "?";
}

int fma_flops_per_instruction(FmaKind k) {
  switch (k) {
    case FmaKind::F32:
      return 2;
    case FmaKind::F16x2:
      return 4;
    case FmaKind::F64:
      return 2;
  }
  return 0;
}

WorkCount fma_count(FmaKind k, uint64_t threads, int iterations) {
  const int elem = k == FmaKind::F64 ? 8 : 4;  // f16x2 stores one half2
  const int fma = fma_flops_per_instruction(k), add = fma / 2;
  const double per_thread = static_cast<double>(iterations) * kFmaChains * fma + (kFmaChains - 1) * add;
  return {static_cast<double>(threads) * per_thread, static_cast<double>(threads) * elem};
}

const char* roofline_type_name(RooflineType t) {
  return t == RooflineType::F32 ? "f32" : "f16";
}

bool roofline_ops(RooflineType t, int f, RooflineOps* ops) {
  if (f < 1 || f > 8192 || (f & (f - 1)) != 0) return false;
  *ops = {};
  if (t == RooflineType::F32) {
    if (f == 1)
      ops->scalar_muls = 1;  // x *= s
    else
      ops->fmas = f / 2;  // x = x * s + t, f/2 times
  } else {
    if (f == 1)
      ops->scalar_muls = 1;  // low lane only
    else if (f == 2)
      ops->vector_muls = 1;  // both lanes
    else
      ops->fmas = f / 4;  // half2 FMA: 4 FLOPs
  }
  return true;
}

int roofline_ops_flops(RooflineType t, const RooflineOps& ops) {
  const int fma = t == RooflineType::F32 ? 2 : 4;
  return ops.scalar_muls + 2 * ops.vector_muls + fma * ops.fmas;
}

WorkCount roofline_count(RooflineType t, uint64_t words, int flops_per_word) {
  RooflineOps ops;
  if (!roofline_ops(t, flops_per_word, &ops)) return {};
  return {static_cast<double>(words) * roofline_ops_flops(t, ops), static_cast<double>(words) * kRooflineBytesPerWord};
}

int roofline_flops_for_intensity(double intensity) {
  for (int f = 1; f <= 8192; f *= 2) {
    if (static_cast<double>(f) / kRooflineBytesPerWord == intensity) return f;
  }
  return 0;
}

WorkCount gemm_count(uint64_t m, uint64_t n, uint64_t k, int in_bytes, int out_bytes) {
  const double dm = static_cast<double>(m), dn = static_cast<double>(n), dk = static_cast<double>(k);
  return {2.0 * dm * dn * dk, (dm * dk + dk * dn) * in_bytes + dm * dn * out_bytes};
}

}  // namespace gpuopt::bench
