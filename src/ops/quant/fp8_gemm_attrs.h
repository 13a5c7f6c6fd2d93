// Fp8Gemm's attributes, read and checked once (the schema, the CPU kernel and the CUDA op all
// read them through here): a_scale and b_scale finite and > 0; activation "", "Relu" or "Gelu"
// (with Gelu's `approximate`: "none", the erf form, or "tanh"); y_scale (optional, finite and
// > 0): the output is e4m3 of Y / y_scale, as u8 bit patterns.
#pragma once

#include "ir/op_table.h"

#include <cmath>
#include <string>

namespace gpuopt::quant {

struct Fp8GemmAttrs {
  enum class Act { kNone, kRelu, kGelu, kGeluTanh };
  float a_scale = 1.0f, b_scale = 1.0f;
  float y_scale = 0.0f;  // 0: the output is float
  Act act = Act::kNone;

  template <class Ctx>
  static Result<Fp8GemmAttrs> read(const Ctx& ctx) {
    Fp8GemmAttrs a;
    for (const char* name : {"a_scale", "b_scale"})
      if (!ctx.node.has_attr(name)) return ctx.error("attribute {} is missing", name);
    a.a_scale = ctx.node.attr_f("a_scale", 1.0f);
    a.b_scale = ctx.node.attr_f("b_scale", 1.0f);
    if (!(std::isfinite(a.a_scale) && a.a_scale > 0) || !(std::isfinite(a.b_scale) && a.b_scale > 0))
      return ctx.error("scales a_scale {} and b_scale {} must be finite and > 0", a.a_scale, a.b_scale);
    if (ctx.node.has_attr("y_scale")) {
      a.y_scale = ctx.node.attr_f("y_scale", 0.0f);
      if (!(std::isfinite(a.y_scale) && a.y_scale > 0)) return ctx.error("y_scale {} must be finite and > 0", a.y_scale);
    }
    const std::string act = ctx.node.attr_s("activation", "");
    if (act == "Relu") {
      a.act = Act::kRelu;
    } else if (act == "Gelu") {
      const std::string approx = ctx.node.attr_s("approximate", "none");
      if (approx != "none" && approx != "tanh")
        return ctx.error("activation Gelu: approximate is '{}'; expected 'none' or 'tanh'", approx);
      a.act = approx == "tanh" ? Act::kGeluTanh : Act::kGelu;
    } else if (!act.empty()) {
      return ctx.error("activation '{}' is not one of '', 'Relu', 'Gelu'", act);
    }
    return a;
  }

  // The activation of one value (double, as the CPU reference computes).
  double apply(double v) const {
    constexpr double kSqrt2OverPi = 0.7978845608028654;
    switch (act) {
      case Act::kRelu: return v > 0 ? v : 0.0;
      case Act::kGelu: return 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0)));
      case Act::kGeluTanh: return 0.5 * v * (1.0 + std::tanh(kSqrt2OverPi * (v + 0.044715 * v * v * v)));
      case Act::kNone: break;
    }
    return v;
  }
};

}  // namespace gpuopt::quant
