// Fp8Gemm's attributes, read and checked once (the schema, the CPU kernel and the CUDA op all
// read them through here): a_scale and b_scale finite and > 0; activation "", "Relu" or "Gelu"
// (with Gelu's `approximate`: "none", the erf form, or "tanh"); y_scale (optional, finite and
// > 0): the output is e4m3 of Y / y_scale, as u8 bit patterns.
#pragma once

#include "ops/quant/gemm_activation.h"

#include <cmath>
#include <string>

namespace gpuopt::quant {

struct Fp8GemmAttrs {
  using Act = GemmAct;
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
    GPUOPT_ASSIGN_OR_RETURN(a.act, read_gemm_activation(ctx));
    return a;
  }

  // The activation of one value (double, as the CPU reference computes).
  double apply(double v) const { return apply_gemm_act(act, v); }
};

}  // namespace gpuopt::quant
