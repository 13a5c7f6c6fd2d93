// The activation of a quantized GEMM's epilogue (Int8Gemm, Fp8Gemm), read and checked once:
// `activation` "" (identity), "Relu" or "Gelu", with Gelu's `approximate` ("none": the erf form,
// or "tanh"). `apply` is the CPU references' form (double).
#pragma once

#include "ir/op_table.h"

#include <cmath>
#include <string>

namespace gpuopt::quant {

enum class GemmAct { kNone, kRelu, kGelu, kGeluTanh };

template <class Ctx>
Result<GemmAct> read_gemm_activation(const Ctx& ctx) {
  const std::string act = ctx.node.attr_s("activation", "");
  if (act.empty()) return GemmAct::kNone;
  if (act == "Relu") return GemmAct::kRelu;
  if (act == "Gelu") {
    const std::string approx = ctx.node.attr_s("approximate", "none");
    if (approx != "none" && approx != "tanh")
      return ctx.error("activation Gelu: approximate is '{}'; expected 'none' or 'tanh'", approx);
    return approx == "tanh" ? GemmAct::kGeluTanh : GemmAct::kGelu;
  }
  return ctx.error("activation '{}' is not one of '', 'Relu', 'Gelu'", act);
}

inline double apply_gemm_act(GemmAct act, double v) {
  constexpr double kSqrt2OverPi = 0.7978845608028654;
  switch (act) {
    case GemmAct::kRelu: return v > 0 ? v : 0.0;
    case GemmAct::kGelu: return 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0)));
    case GemmAct::kGeluTanh: return 0.5 * v * (1.0 + std::tanh(kSqrt2OverPi * (v + 0.044715 * v * v * v)));
    case GemmAct::kNone: break;
  }
  return v;
}

}  // namespace gpuopt::quant
